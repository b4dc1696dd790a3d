"""The built-in server as a process: a real ONNX model (made here with scikit-learn and skl2onnx) served
over HTTP, answers checked against ONNX Runtime called directly."""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from tests.support.builtin_server import IRIS_ROWS as ROWS
from tests.support.builtin_server import serve
from tests.support.docs_site import documented_metrics, exported_metrics
from tests.support.groundtruth import wait_http


@pytest.fixture(
    scope="module", params=[(), ("--max-batch-size", "8", "--max-queue-delay", "2ms")], ids=["unbatched", "batched"]
)
def server(request: pytest.FixtureRequest, iris: Path) -> Iterator[str]:
    process, base = serve(iris, "--intra-op", "1", *request.param)
    try:
        wait_http(f"{base}/v2/health/ready")
        yield base
    finally:
        process.terminate()
        process.wait()


def post(url: str, body: object) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_inference_matches_onnxruntime_called_directly(server: str, iris: Path) -> None:
    status, response = post(
        f"{server}/v2/models/iris/infer",
        {
            "id": "42",
            "inputs": [
                {"name": "float_input", "shape": [3, 4], "datatype": "FP32", "data": [v for row in ROWS for v in row]}
            ],
        },
    )
    assert status == 200 and response["id"] == "42" and response["model_name"] == "iris"
    outputs = {o["name"]: o for o in response["outputs"]}
    labels, probabilities = ort.InferenceSession(str(iris)).run(None, {"float_input": np.array(ROWS, np.float32)})
    assert outputs["label"]["data"] == labels.tolist() and outputs["label"]["datatype"] == "INT64"
    assert np.allclose(np.array(outputs["probabilities"]["data"]).reshape(3, 3), probabilities)


def test_metadata_health_and_metrics(server: str) -> None:
    metadata = json.loads(urllib.request.urlopen(f"{server}/v2/models/iris").read())
    assert metadata["inputs"] == [{"name": "float_input", "datatype": "FP32", "shape": [-1, 4]}]
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/iris/ready"):
        assert urllib.request.urlopen(server + path).status == 200
    post(
        f"{server}/v2/models/iris/infer",
        {"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": ROWS[0]}]},
    )
    metrics = urllib.request.urlopen(f"{server}/metrics").read().decode()
    assert 'kaliper_server_requests_total{code="200",model="iris"}' in metrics
    assert "kaliper_server_inference_seconds_bucket" in metrics and "kaliper_server_queue_seconds_count" in metrics
    # Every metric it declares is in docs/reference/metrics.md with its type, and nothing else is.
    assert exported_metrics(metrics, "kaliper_") == documented_metrics("The built-in server")
    assert len(documented_metrics("The built-in server")) == 6


def test_each_answered_request_is_timed_and_refused_ones_are_not(iris: Path) -> None:
    process, base = serve(iris, "--intra-op", "1")
    try:
        wait_http(f"{base}/v2/health/ready")
        body = {"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": ROWS[0]}]}
        for _ in range(7):
            assert post(f"{base}/v2/models/iris/infer", body)[0] == 200
        assert post(f"{base}/v2/models/resnet/infer", body)[0] == 404
        assert post(f"{base}/v2/models/iris/infer", {"inputs": []})[0] == 400
        metrics = urllib.request.urlopen(f"{base}/metrics").read().decode()
        count = float(metrics.split('kaliper_server_request_seconds_count{model="iris"} ')[1].split()[0])
        inf = float(metrics.split('kaliper_server_request_seconds_bucket{le="+Inf",model="iris"} ')[1].split()[0])
        assert (count, inf) == (7.0, 7.0)
    finally:
        process.terminate()
        process.wait()


def test_bad_requests_get_400_and_unknown_models_404(server: str) -> None:
    status, body = post(
        f"{server}/v2/models/iris/infer",
        {"inputs": [{"name": "float_input", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]},
    )
    assert status == 400 and "the model takes [-1, 4] for float_input" in body["error"]
    status, body = post(f"{server}/v2/models/resnet/infer", {"inputs": []})
    assert status == 404 and "serves 'iris'" in body["error"]


def test_concurrent_requests_are_batched(iris: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    process, base = serve(iris, "--max-batch-size", "16", "--max-queue-delay", "20ms")
    try:
        wait_http(f"{base}/v2/health/ready")
        body = {"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": ROWS[1]}]}
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: post(f"{base}/v2/models/iris/infer", body), range(32)))
        assert all(status == 200 and r["outputs"][0]["data"] == [2] for status, r in answers)
        metrics = urllib.request.urlopen(f"{base}/metrics").read().decode()
        runs = float(metrics.split('kaliper_server_batch_rows_count{model="iris"} ')[1].split()[0])
        rows = float(metrics.split('kaliper_server_batch_rows_sum{model="iris"} ')[1].split()[0])
        assert rows / runs > 1.5  # requests shared batches (each request is counted with its batch's rows)
    finally:
        process.terminate()
        process.wait()


def test_a_broken_model_file_exits_with_the_reason(tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    process, _ = serve(broken)
    assert process.wait(timeout=60) == 1
    assert "cannot load the model" in process.stderr.read()


def test_in_a_pod_every_answer_names_the_replica_that_gave_it(iris: Path) -> None:
    # Kubernetes sets KUBERNETES_SERVICE_HOST in every pod, whose hostname is the pod's name; a rehearsal reads
    # when each new replica first answered from this header. Outside a pod the server names nobody.
    answers = {}
    for where, env in (("pod", {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}), ("machine", {})):
        plain = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
        process, base = serve(iris, "--intra-op", "1", env={**plain, **env})
        try:
            wait_http(f"{base}/v2/health/ready")
            body = {"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": ROWS[0]}]}
            request = urllib.request.Request(f"{base}/v2/models/iris/infer", json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(request, timeout=10) as answer:
                answers[where] = answer.headers.get("Kaliper-Replica")
        finally:
            process.terminate()
            process.wait()
    assert answers == {"pod": socket.gethostname(), "machine": None}
