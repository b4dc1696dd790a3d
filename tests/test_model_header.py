"""The operator's fit check reads each model's header in a Job of its own (the model mounted as the server's
pod mounts it) and keeps the shape from the pod's termination message: the Job as built, the reader as the Job
runs it, and what the operator makes of a Job that finished or failed. tests/kind/test_fit_check.py runs it
on a real cluster."""

from __future__ import annotations

import json
from pathlib import Path

from kaliper.api.model_shape import ModelHeader, ModelShape
from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.controllers.run_headers import _read
from kaliper.manifests.model_header import build_header_job, header_source
from kaliper.runtimes.header import main
from tests.support.llama import TINY_SHAPE, tiny_model

RUN = {"metadata": {"name": "fit", "namespace": "team-a", "uid": "u-1"}}
TINY = ModelShape.model_validate(TINY_SHAPE)


def llama(model: dict, **more: object) -> ModelDeploymentSpec:
    limits = {"resources": {"limits": {"memory": "128Mi"}}}
    return ModelDeploymentSpec.model_validate({"model": model, "runtime": {"type": "llamacpp"}, **limits, **more})


def test_models_on_a_volume_or_in_a_configmap_are_read_once_each_and_no_others() -> None:
    assert header_source(llama({"pvc": {"claimName": "models", "path": "/tiny/model.gguf"}})) == (
        "llamacpp pvc models/tiny/model.gguf"
    )
    assert header_source(llama({"configMap": {"name": "m", "key": "model.gguf"}})) == "llamacpp configMap m/model.gguf"
    # Fetched or copied by the server's own pod: reading its header would mean a second copy of the whole model.
    assert header_source(llama({"url": "https://models.example.com/tiny.gguf"})) is None
    # Runtimes without an estimate: the builtin ONNX server, vLLM on GPUs.
    onnx = ModelDeploymentSpec.model_validate({"model": {"pvc": {"claimName": "models", "path": "iris.onnx"}}})
    assert header_source(onnx) is None
    gpu = {"resources": {"limits": {"memory": "8Gi"}, "gpu": {"count": 1}}}
    vllm = {"model": {"pvc": {"claimName": "models", "path": "qwen"}}, "runtime": {"type": "vllm"}, **gpu}
    assert header_source(ModelDeploymentSpec.model_validate(vllm)) is None
    assert header_source(ModelDeploymentSpec.model_validate({**vllm, "resources": {"limits": {"memory": "8Gi"}}})) == (
        "vllm pvc models/qwen"
    )


def test_the_header_job_mounts_the_model_as_the_server_would_and_reads_it_with_kaliper() -> None:
    template = llama(
        {"pvc": {"claimName": "models", "path": "tiny/model.gguf"}},
        nodeSelector={"pool": "cpu"},
        imagePullSecrets=[{"name": "registry"}],
    )
    job = build_header_job(RUN, "llamacpp pvc models/tiny/model.gguf", template, "kaliper:dev")
    assert job["metadata"]["name"] == "fit-header-187d94ec"  # the first 8 hex digits of the source's SHA-256
    assert job["metadata"]["labels"] == {
        "kaliper.dev/profilerun": "fit",
        "kaliper.dev/role": "model-header",
        "app.kubernetes.io/managed-by": "kaliper",
    }
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert (job["spec"]["backoffLimit"], job["spec"]["activeDeadlineSeconds"]) == (0, 300)
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "model", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}]
    assert (pod["nodeSelector"], pod["imagePullSecrets"]) == ({"pool": "cpu"}, [{"name": "registry"}])
    assert (pod["restartPolicy"], pod["automountServiceAccountToken"]) == ("Never", False)
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    (reader,) = pod["containers"]
    header = ["python", "-m", "kaliper.runtimes.header"]
    assert reader["command"] == [*header, "llamacpp", "/models/source/tiny/model.gguf"]
    assert reader["image"] == "kaliper:dev"
    assert reader["volumeMounts"] == [{"name": "model", "mountPath": "/models/source", "readOnly": True}]
    assert reader["resources"]["limits"] == {"cpu": "1", "memory": "256Mi"}
    assert reader["securityContext"]["runAsNonRoot"] is True
    assert "readinessProbe" not in reader and "ports" not in reader


def test_the_reader_leaves_the_shape_or_the_reason_in_its_termination_message(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    assert main(["llamacpp", str(tiny_model(tmp_path))], message) == 0
    assert json.loads(message.read_text()) == TINY_SHAPE
    assert main(["llamacpp", str(tmp_path / "absent.gguf")], message) == 1
    assert (
        message.read_text() == f"{tmp_path}/absent.gguf: [Errno 2] No such file or directory: '{tmp_path}/absent.gguf'"
    )


def job(condition: str, reason: str = "", message: str = "") -> dict:
    status = {"type": condition, "status": "True", "reason": reason, "message": message}
    return {"metadata": {"name": "fit-header-1"}, "status": {"conditions": [status]}}


def pod(terminated: dict | None) -> dict:
    state = {"terminated": terminated} if terminated is not None else {"running": {}}
    return {
        "metadata": {"name": "fit-header-1-x"},
        "status": {"containerStatuses": [{"name": "header", "state": state}]},
    }


def test_a_finished_job_gives_the_shape_a_failed_one_the_reason_and_a_running_one_nothing() -> None:
    source = "llamacpp pvc models/tiny.gguf"
    done = {"exitCode": 0, "message": TINY.model_dump_json(by_alias=True)}
    assert _read(source, job("Complete"), [pod(done)]) == ModelHeader(model=source, shape=TINY)
    assert _read(source, job("Complete"), []) is None  # its pod's final status not seen yet
    assert _read(source, {"metadata": {"name": "fit-header-1"}, "status": {}}, [pod(None)]) is None
    failed = {"exitCode": 1, "reason": "Error", "message": "/models/tiny.gguf: not a GGUF file"}
    assert _read(
        source, job("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"), [pod(failed)]
    ) == ModelHeader(
        model=source,
        problem="header Job fit-header-1 failed: BackoffLimitExceeded Job has reached the specified backoff limit; "
        "pod fit-header-1-x exited with code 1 (Error): /models/tiny.gguf: not a GGUF file; its configurations are "
        "not estimated",
    )
    garbled = {"exitCode": 0, "message": "hello"}
    assert _read(source, job("Complete"), [pod(garbled)]) == ModelHeader(
        model=source, problem="its reader said 'hello', not a shape"
    )
