from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from kaliper.api.loader import problems_from
from kaliper.api.profilerun import GeneratedTensors, Payload
from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.http import build_request
from kaliper.loadgen.payloads import PayloadError, build_bodies, generate_oip_requests

BASE = {"url": "http://127.0.0.1:9", "request": {"protocol": "http-json"}, "payload": {"inline": "{}"}}


def config(**load: object) -> LoadGenConfig:
    return LoadGenConfig.model_validate({**BASE, "load": load})


def test_malformed_dataset_line_is_reported_with_its_number(tmp_path: Path) -> None:
    dataset = tmp_path / "requests.jsonl"
    dataset.write_text('{"a": 1}\n\n{"a": 2}\n{"a": \n')
    with pytest.raises(PayloadError, match=r"requests.jsonl, line 4: not valid JSON"):
        build_bodies(Payload.model_validate({"dataset": {"file": str(dataset)}}))


def test_dataset_lines_become_bodies_in_order_or_shuffled(tmp_path: Path) -> None:
    dataset = tmp_path / "requests.jsonl"
    dataset.write_text("\n".join(json.dumps({"i": i}) for i in range(20)))
    ordered = build_bodies(Payload.model_validate({"dataset": {"file": str(dataset)}}))
    assert ordered[0] == b'{"i": 0}' and len(ordered) == 20
    shuffled = build_bodies(Payload.model_validate({"dataset": {"file": str(dataset), "order": "random"}}), seed=1)
    assert sorted(shuffled) == sorted(ordered) and shuffled != ordered


def test_empty_dataset_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(PayloadError, match="empty"):
        build_bodies(Payload.model_validate({"dataset": {"file": str(tmp_path / "empty.txt")}}))


def test_oip_requests_from_a_tensor_spec() -> None:
    spec = GeneratedTensors.model_validate(
        {
            "inputs": [{"name": "x", "shape": [-1, 4]}, {"name": "ids", "shape": [-1], "datatype": "INT64"}],
            "batchSize": 3,
            "seed": 5,
        }
    )
    bodies = generate_oip_requests(spec, seed=5)
    first = json.loads(bodies[0])
    x, ids = first["inputs"]
    assert x["shape"] == [3, 4] and len(x["data"]) == 12 and x["datatype"] == "FP32"
    assert ids["shape"] == [3] and all(isinstance(v, int) for v in ids["data"])
    assert bodies == generate_oip_requests(spec, seed=5)


@pytest.mark.parametrize(
    ("load", "field"),
    [
        ({"openLoop": {"rate": 0}}, "load.openLoop.rate"),
        ({"openLoop": {"rate": -5}}, "load.openLoop.rate"),
        ({"closedLoop": {"concurrency": 1}, "maxDuration": "0s"}, "load.maxDuration"),
        ({"closedLoop": {"concurrency": 1}, "minDuration": "1m", "maxDuration": "10s"}, "load.minDuration"),
        ({"closedLoop": {"concurrency": 0}}, "load.closedLoop.concurrency"),
        ({}, "load"),
    ],
)
def test_nonsense_settings_are_refused_before_anything_starts(load: dict, field: str) -> None:
    with pytest.raises(ValidationError) as error:
        config(**load)
    assert any(p.path.startswith(field) for p in problems_from(error.value, LoadGenConfig))


def test_fractional_users_and_missing_model_name() -> None:
    with pytest.raises(ValidationError, match="whole numbers"):
        LoadGenConfig.model_validate({**BASE, "load": {"closedLoop": {"concurrency": 1}}, "levels": [1.5]})
    with pytest.raises(ValidationError, match="modelName"):
        LoadGenConfig.model_validate(
            {**BASE, "request": {"protocol": "oip-v2"}, "load": {"closedLoop": {"concurrency": 1}}}
        )


def test_oip_path_and_levels() -> None:
    c = LoadGenConfig.model_validate(
        {**BASE, "request": {"modelName": "iris"}, "load": {"openLoop": {"rate": 50}}, "levels": [10, 20]}
    )
    assert c.path == "/v2/models/iris/infer"
    assert c.stage_levels == [10, 20] and c.open_loop


def test_requests_are_serialised_once_with_length_and_host() -> None:
    raw = build_request("POST", "h:80", "/p", {"Content-Type": "application/json", "Host": "x"}, b'{"a":1}')
    head, body = raw.split(b"\r\n\r\n")
    assert head.split(b"\r\n") == [
        b"POST /p HTTP/1.1",
        b"Host: h:80",
        b"Content-Type: application/json",
        b"Content-Length: 7",
    ]
    assert body == b'{"a":1}'


def test_the_documented_example_config_is_valid() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "load-generator.md").read_text()
    block = page.split("# loadtest.yaml", 1)[1].split("\n", 1)[1].split("```", 1)[0]
    config = LoadGenConfig.model_validate(yaml.safe_load(block))
    assert config.stage_levels == [100, 200, 400] and config.load.processes == 2


def test_secret_headers_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from kaliper.loadgen.config import LoadGenError, request_headers

    c = LoadGenConfig.model_validate(
        {
            **BASE,
            "load": {"closedLoop": {"concurrency": 1}},
            "request": {"protocol": "http-json", "headers": {"X-Team": "ml"}},
            "envHeaders": {"Authorization": "SCORING_KEY"},
        }
    )
    monkeypatch.setenv("SCORING_KEY", "Bearer s3cret")
    headers = request_headers(c)
    assert headers["Authorization"] == "Bearer s3cret" and headers["X-Team"] == "ml"
    assert headers["Content-Type"] == "application/json"
    monkeypatch.delenv("SCORING_KEY")
    with pytest.raises(LoadGenError, match="environment variable SCORING_KEY, which is not set"):
        request_headers(c)


def test_repetitions_run_each_level_several_times_in_a_row() -> None:
    config = LoadGenConfig.model_validate(
        {
            "url": "http://127.0.0.1:1",
            "request": {"modelName": "m"},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 2}, "repetitions": 3},
            "levels": [2, 8],
        }
    )
    assert config.stage_levels == [2, 2, 2, 8, 8, 8]
