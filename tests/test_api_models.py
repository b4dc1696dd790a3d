"""The models: defaults, and each cross-field rule refusing what it should and accepting what it should."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from kaliper.api.base import KaliperModel, only_with
from kaliper.api.loader import ManifestError, parse_resource
from kaliper.api.profilerun import Progress
from kaliper.api.resources import KINDS, ModelDeployment, ProfileRun

PROFILE_RUN: dict[str, Any] = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ProfileRun",
    "metadata": {"name": "run"},
    "spec": {
        "target": {"deploymentRef": {"name": "iris"}},
        "payload": {"inline": "{}"},
        "load": {"closedLoop": {"concurrency": 2}},
    },
}
MODEL_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {"name": "iris"},
    "spec": {"model": {"file": "model.onnx"}},
}


def with_spec(base: dict[str, Any], **spec: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(base)
    manifest["spec"].update(spec)
    return manifest


def problems(manifest: dict[str, Any]) -> list[str]:
    try:
        parse_resource(manifest)
    except ManifestError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_defaults_are_applied() -> None:
    run = parse_resource(PROFILE_RUN)
    assert isinstance(run, ProfileRun)
    assert run.spec.request.protocol == "oip-v2"
    assert run.spec.load.warmup == "10s"
    assert run.spec.search.strategy == "grid"
    assert run.spec.cost.currency == "USD"
    deployment = parse_resource(MODEL_DEPLOYMENT)
    assert isinstance(deployment, ModelDeployment)
    assert deployment.spec.runtime.type == "onnxruntime"
    assert deployment.spec.replicas == 1


def test_manifest_round_trip_keeps_camel_case() -> None:
    run = parse_resource(with_spec(PROFILE_RUN, sweep={"cpu": ["500m", 1]}))
    manifest = run.to_manifest()
    assert manifest["spec"]["sweep"]["cpu"] == ["500m", "1"]
    assert "closedLoop" in manifest["spec"]["load"]
    assert parse_resource(manifest) == run


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"target": {}}, "spec.target: set exactly one of deploymentRef, workloadRef or url"),
        ({"payload": {"inline": "{}", "dataset": {"file": "x"}}}, "spec.payload: set exactly one of"),
        ({"load": {"closedLoop": {"concurrency": 1}, "openLoop": {"rate": 5}}}, "spec.load: set exactly one"),
        (
            {"load": {"closedLoop": {"concurrency": 1}, "minDuration": "2m", "maxDuration": "1m"}},
            "spec.load.minDuration",
        ),
        ({"sweep": {"rate": [1, 2]}}, "spec.sweep.rate: sweep.rate sets open-loop"),
        ({"search": {"strategy": "knee"}}, "spec.search.strategy: the knee search"),
        ({"slo": {}}, "spec.slo: an SLO needs at least one objective"),
        (
            {"slo": {"maxErrorRate": 0.01, "failIfRegressed": {}}},
            "spec.slo.failIfRegressed: failIfRegressed compares with a baseline run; set spec.baseline",
        ),
        ({"baseline": {"run": "a", "report": "b.json"}}, "spec.baseline: set exactly one of run, configMap or report"),
        ({"search": {"capacity": {"probes": 9}}}, "spec.search.capacity.probes"),
        ({"metrics": {"customQueries": [{"name": "q", "query": "up"}]}}, "spec.metrics.customQueries"),
        ({"sweep": {"threads": [2, 2]}}, "spec.sweep.threads: 2 is listed twice"),
        ({"load": {"closedLoop": {"concurrency": 0}}}, "spec.load.closedLoop.concurrency"),
        ({"request": {"timeout": "0s"}}, "spec.request.timeout: '0s' must be longer than zero"),
    ],
)
def test_profile_run_rules(spec: dict[str, Any], expected: str) -> None:
    found = problems(with_spec(PROFILE_RUN, **spec))
    assert any(expected in p for p in found), found


TENSORS = {"tensors": {"inputs": [{"name": "x", "shape": [-1, 4], "datatype": "FP32"}]}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"request": {"protocol": "oip-v2-grpc", "path": "/v2/models/iris/infer"}},
            "spec.request.path: request.path is an HTTP path; oip-v2-grpc calls "
            "inference.GRPCInferenceService/ModelInfer on the target's gRPC port: remove request.path",
        ),
        (
            {"request": {"grpc": {"connections": 2}}},
            "spec.request.grpc: request.grpc sets the connections of gRPC calls; set request.protocol to "
            "oip-v2-grpc (or sweep.protocol) or remove request.grpc",
        ),
        (
            {"request": {"protocol": "oip-v2-grpc"}, "load": {"openLoop": {"rate": 5, "maxConnections": 4}}},
            "spec.load.openLoop.maxConnections: gRPC calls share HTTP/2 connections: bound them with "
            "request.grpc.connections and streamsPerConnection instead of load.openLoop.maxConnections",
        ),
        (
            {"request": {"protocol": "http-json"}, "sweep": {"protocol": ["oip-v2", "oip-v2-grpc"]}},
            "spec.sweep.protocol: sweep.protocol compares the Open Inference Protocol's REST and gRPC faces",
        ),
        (
            {"sweep": {"protocol": ["oip-v2", "http-json"]}},
            "spec.sweep.protocol[1]: Input should be 'oip-v2' or 'oip-v2-grpc' (got 'http-json')",
        ),
        ({"request": {"protocol": "oip-v2-grpc", "grpc": {"connections": 0}}}, "spec.request.grpc.connections"),
    ],
)
def test_grpc_rules(spec: dict[str, Any], expected: str) -> None:
    found = problems(with_spec(PROFILE_RUN, **spec))
    assert any(expected in p for p in found), found


def test_grpc_requests_take_oip_payloads_and_a_protocol_sweep() -> None:
    grpc_run = with_spec(PROFILE_RUN, request={"protocol": "oip-v2-grpc", "grpc": {"connections": 4}}, payload=TENSORS)
    assert problems(grpc_run) == []
    swept = with_spec(PROFILE_RUN, payload=TENSORS, sweep={"protocol": ["oip-v2", "oip-v2-grpc"]})
    swept["spec"]["request"] = {"grpc": {"streamsPerConnection": 8}}
    assert problems(swept) == []
    swept["spec"]["target"] = {"url": "http://x.example"}
    assert any(
        "sweeping deployment parameters or the protocol needs target.deploymentRef" in p for p in problems(swept)
    )


def test_url_target_may_sweep_load_levels_only() -> None:
    url_run = with_spec(PROFILE_RUN, target={"url": "http://x.example"}, sweep={"concurrency": [1, 2]})
    assert problems(url_run) == []
    url_run["spec"]["sweep"]["replicas"] = [1, 2]
    assert any("needs target.deploymentRef" in p for p in problems(url_run))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"model": {}}, "spec.model: set exactly one of pvc, configMap, url, image or file"),
        ({"model": {"file": "m.onnx", "sha256": "a" * 64}}, "spec.model.sha256"),
        ({"runtime": {"type": "custom", "port": 9000}}, "a custom runtime needs image"),
        ({"runtime": {"type": "mlserver", "executionProviders": ["CPUExecutionProvider"]}}, "executionProviders"),
        ({"runtime": {"implementation": "x.Y"}}, "spec.runtime.implementation"),
        ({"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}, "spec.resources.requests.memory"),
        ({"resources": {"limits": {"cpu": -1}}}, "must not be negative"),
        ({"runtime": {"type": "custom", "image": "x", "port": 1}, "batching": {"maxBatchSize": 4}}, "spec.batching"),
        (
            {"env": [{"name": "A", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]},
            "spec.env[0]",
        ),
        ({"tolerations": [{"operator": "Exists", "value": "x"}]}, "spec.tolerations[0].value"),
        ({"replicas": -1}, "spec.replicas"),
    ],
)
def test_model_deployment_rules(spec: dict[str, Any], expected: str) -> None:
    found = problems(with_spec(MODEL_DEPLOYMENT, **spec))
    assert any(expected in p for p in found), found


def test_requests_equal_to_limits_are_fine() -> None:
    ok = with_spec(MODEL_DEPLOYMENT, resources={"requests": {"cpu": "1000m"}, "limits": {"cpu": 1}})
    assert problems(ok) == []


def test_unknown_field_suggests_the_closest_name() -> None:
    found = problems(with_spec(PROFILE_RUN, laod={}))
    assert any("spec.laod: unknown field; did you mean 'load'?" in p for p in found), found


def test_every_problem_is_reported_not_just_the_first() -> None:
    found = problems(with_spec(PROFILE_RUN, target={}, payload={}))
    assert len(found) >= 2


def test_wrong_api_version_and_kind() -> None:
    assert any("use kaliper.dev/v1alpha1" in p for p in problems(PROFILE_RUN | {"apiVersion": "kaliper.dev/v1"}))
    assert any("not a Kaliper kind" in p for p in problems(PROFILE_RUN | {"kind": "Profile"}))


def test_follow_up_profile_run_is_checked_as_a_profile_run() -> None:
    manifest = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": "opt"},
        "spec": {
            "model": {"source": {"file": "m.onnx"}},
            "passes": {"graphOptimization": {}},
            "followUp": {
                "deployment": {"name": "opt-serve"},
                "profileRun": {"name": "opt-profile", "template": {"payload": {"inline": "{}"}, "load": {}}},
            },
        },
    }
    found = problems(manifest)
    expected = "spec.followUp.profileRun.template.load: set exactly one of closedLoop, openLoop, trace or fitted"
    assert any(expected in p for p in found)


def test_every_kind_is_registered_with_spec_and_status() -> None:
    assert {k.kind for k in KINDS} == {"ModelDeployment", "ProfileRun", "ModelOptimization", "Cleanup"}
    for info in KINDS:
        assert info.spec_model.__name__ == f"{info.kind}Spec"
        assert info.status_model.__name__ == f"{info.kind}Status"


def test_progress_counts_finished_trials_of_reports_and_summaries() -> None:
    class Summary:  # a status summary has a phase; a report has a status
        def __init__(self, phase: str) -> None:
            self.phase = phase

    trials = [Summary("Succeeded"), Summary("Failed"), Summary("Skipped"), Summary("Measuring"), Summary("Pending")]
    assert Progress.of(trials, 6, "t3") == Progress(
        completed_trials=3, total_trials=6, current_trial="t3", summary="3/6"
    )


PROMPTS = {"synthetic": {"inputTokens": {"mean": 128}}, "tokenizer": {"file": "tokenizer.json"}}


def test_generation_requests_and_prompts_go_together() -> None:
    assert problems(with_spec(PROFILE_RUN, payload={"prompts": PROMPTS})) == [
        "spec.payload.prompts: payload.prompts are for generation requests; set request.protocol to openai-chat "
        "or openai-completions"
    ]
    assert problems(with_spec(PROFILE_RUN, request={"protocol": "openai-chat"})) == [
        "spec.payload: openai-chat and openai-completions requests are built from payload.prompts (synthetic or "
        "a dataset of prompts or messages); set payload.prompts"
    ]
    assert problems(with_spec(PROFILE_RUN, request={"protocol": "openai-chat"}, payload={"prompts": PROMPTS})) == []


def test_synthetic_prompts_need_the_models_tokenizer() -> None:
    manifest = with_spec(
        PROFILE_RUN,
        request={"protocol": "openai-completions"},
        payload={"prompts": {"synthetic": {"inputTokens": {"mean": 128}}}},
    )
    assert problems(manifest) == [
        "spec.payload.prompts.tokenizer: synthetic, trace and fitted prompts are made to exact token counts with the "
        "model's tokenizer; set prompts.tokenizer.file (or configMap) to its tokenizer.json"
    ]


def test_a_closed_loop_ramp_is_measured_for_its_whole_length_in_whole_users() -> None:
    ramp = {
        "closedLoop": {"concurrency": 1, "ramp": {"to": 8, "shape": "stepped"}},
        "minDuration": "20s",
        "maxDuration": "20s",
    }
    assert problems(with_spec(PROFILE_RUN, load=ramp)) == []
    assert problems(with_spec(PROFILE_RUN, load={**ramp, "stopping": {}})) == [
        "spec.load.stopping: a ramp is measured for its whole length (maxDuration): remove stopping, or the ramp"
    ]
    halves = {"closedLoop": {"concurrency": 1, "ramp": {"to": 2.5}}}
    assert any("spec.load.closedLoop.ramp.to" in p for p in problems(with_spec(PROFILE_RUN, load=halves)))


TRACE = {"trace": {"file": "burst.jsonl", "format": "mooncake"}, "tokenizer": {"file": "tokenizer.json"}}


def test_a_trace_and_its_replay_go_together() -> None:
    chat = {"protocol": "openai-chat"}
    replay = {"trace": {"speedup": 2, "duration": "10s"}, "warmup": "1s"}
    assert problems(with_spec(PROFILE_RUN, request=chat, payload={"prompts": TRACE}, load=replay)) == []
    assert problems(with_spec(PROFILE_RUN, request=chat, payload={"prompts": TRACE})) == [
        "spec.load: a trace's requests are sent on its own clock: replace load.openLoop or load.closedLoop with "
        "load.trace (speedup, start, duration, loop)"
    ]
    assert problems(with_spec(PROFILE_RUN, request=chat, payload={"prompts": PROMPTS}, load=replay)) == [
        "spec.payload.prompts: load.trace replays a trace: set payload.prompts.trace (file or configMap, and its "
        "format)"
    ]
    assert problems(
        with_spec(PROFILE_RUN, request=chat, payload={"prompts": TRACE}, load={**replay, "stopping": {}})
    ) == [
        "spec.load.stopping: a trace is measured for its whole replay: remove stopping (cut the replay with "
        "trace.duration)"
    ]
    untokenized = {"trace": TRACE["trace"]}
    assert problems(with_spec(PROFILE_RUN, request=chat, payload={"prompts": untokenized}, load=replay)) == [
        "spec.payload.prompts.tokenizer: synthetic, trace and fitted prompts are made to exact token counts with the "
        "model's tokenizer; set prompts.tokenizer.file (or configMap) to its tokenizer.json"
    ]


def test_chat_sessions_need_the_chat_protocol() -> None:
    sessions = {**PROMPTS, "turns": 3}
    manifest = with_spec(PROFILE_RUN, request={"protocol": "openai-completions"}, payload={"prompts": sessions})
    assert problems(manifest) == [
        "spec.payload.prompts.turns: multi-turn sessions carry earlier answers as chat messages; set "
        "request.protocol to openai-chat or payload.prompts.turns to 1"
    ]
    assert problems(with_spec(PROFILE_RUN, request={"protocol": "openai-chat"}, payload={"prompts": sessions})) == []
    too_many = with_spec(
        PROFILE_RUN, request={"protocol": "openai-chat"}, payload={"prompts": {**PROMPTS, "turns": 65}}
    )
    assert problems(too_many) == ["spec.payload.prompts.turns: Input should be less than or equal to 64"]


def test_streaming_metrics_need_a_generation_protocol() -> None:
    manifest = with_spec(PROFILE_RUN, slo={"latency": [{"metric": "ttft", "percentile": 90, "max": "200ms"}]})
    assert problems(manifest) == [
        "spec.request.protocol: ttft, ttfot, itl and tpot are measured on streamed generation; set request.protocol to "
        "openai-chat or openai-completions, or use metric latency"
    ]


def test_a_uniform_length_distribution_needs_its_maximum() -> None:
    prompts = {**PROMPTS, "synthetic": {"inputTokens": {"distribution": "uniform", "mean": 100}}}
    manifest = with_spec(PROFILE_RUN, request={"protocol": "openai-chat"}, payload={"prompts": prompts})
    assert problems(manifest) == [
        "spec.payload.prompts.synthetic.inputTokens.max: a uniform distribution needs max (and min, default 1)"
    ]


class _Inner(KaliperModel):
    mode: str | None = None


class _Outer(KaliperModel):
    inner: _Inner | None = None
    needed_field: _Inner | None = None

    cross_field_rules = (only_with("inner.mode", "needed_field.mode", "fast", message="set neededField.mode: fast"),)


def test_only_with_states_a_rule_once_for_the_server_and_for_the_models() -> None:
    rule = _Outer.cross_field_rules[0]
    assert rule.cel == (
        "!has(self.inner) || !has(self.inner.mode) || "
        "(has(self.neededField) && has(self.neededField.mode) && self.neededField.mode == 'fast')"
    )
    assert rule.field_path == ".inner.mode"
    _Outer(), _Outer(inner=_Inner()), _Outer(inner=_Inner(mode="x"), needed_field=_Inner(mode="fast"))
    for needed in (_Inner(mode="slow"), _Inner(), None):
        with pytest.raises(ValidationError, match=r"set neededField\.mode: fast"):
            _Outer(inner=_Inner(mode="x"), needed_field=needed)
    assert only_with("a", "b", message="m", at="b").cel == "!has(self.a) || has(self.b)"
    assert only_with("a", "b", message="m", at="b").field_path == ".b"
    assert only_with("a.on", "b", "x", flag=True, message="m").cel == (
        "!has(self.a) || !has(self.a.on) || !self.a.on || (has(self.b) && self.b == 'x')"
    )
