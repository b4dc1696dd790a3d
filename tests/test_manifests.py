"""The ModelDeployment builders, without a cluster."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.manifests.modeldeployment import (
    KALIPER_IMAGE,
    BuildError,
    build_deployment,
    build_service,
    endpoint,
    failed_status,
    observed_status,
)
from kaliper.runtimes import grpc_problem
from tests.support.prometheus import scrape_annotations


def spec(**extra: object) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate(
        {"model": {"pvc": {"claimName": "models", "path": "iris/model.onnx"}, "name": "iris"}, **extra}
    )


def test_onnxruntime_deployment_with_resources_gpu_scheduling_and_probe() -> None:
    s = spec(
        replicas=3,
        threads={"intraOp": 2},
        batching={"maxBatchSize": 8, "maxQueueDelay": "2ms"},
        resources={
            "requests": {"cpu": "500m", "memory": "256Mi"},
            "limits": {"cpu": 1, "memory": "512Mi"},
            "gpu": {"count": 1, "resourceName": "nvidia.com/mig-1g.5gb"},
        },
        nodeSelector={"pool": "gpu"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
        env=[{"name": "A", "value": "1"}],
    )
    d = build_deployment("iris", "ml", "uid-1", s)
    assert d["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kaliper.dev/v1alpha1",
            "kind": "ModelDeployment",
            "name": "iris",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    pod = d["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert d["spec"]["replicas"] == 3 and container["image"] == KALIPER_IMAGE
    assert container["command"] == ["python", "-m", "kaliper.serving"]
    assert container["args"] == [
        "--model",
        "/models/source/iris/model.onnx",
        "--name",
        "iris",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--grpc-port",
        "8081",
        "--intra-op",
        "2",
        "--max-batch-size",
        "8",
        "--max-queue-delay",
        "2ms",
        # It holds a GPU: CUDA, and the server refuses to start on the CPU alone.
        "--require-gpu",
        "--provider",
        "CUDAExecutionProvider",
        "--provider",
        "CPUExecutionProvider",
    ]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "512Mi", "nvidia.com/mig-1g.5gb": "1"},
    }
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"  # why it would not start
    assert container["env"] == [{"name": "A", "value": "1"}]
    assert pod["volumes"] == [{"name": "model", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}]
    assert pod["nodeSelector"] == {"pool": "gpu"} and pod["tolerations"][0]["operator"] == "Exists"
    assert d["spec"]["selector"]["matchLabels"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
    # Prometheus finds the server's own metrics (what spec.prediction reads): by the label or the annotations.
    template = d["spec"]["template"]["metadata"]
    assert template["labels"]["kaliper.dev/server-metrics"] == "true"
    assert template["annotations"] == scrape_annotations(8080)


def test_url_and_image_models_are_fetched_by_init_containers() -> None:
    url = build_deployment(
        "m",
        "ns",
        "u",
        ModelDeploymentSpec.model_validate({"model": {"url": "https://example.com/m/model.onnx", "sha256": "a" * 64}}),
    )
    (init,) = url["spec"]["template"]["spec"]["initContainers"]
    assert init["command"] == [
        "python",
        "-m",
        "kaliper.serving.fetch",
        "https://example.com/m/model.onnx",
        "/models/source/model.onnx",
        "--sha256",
        "a" * 64,
    ]
    image = build_deployment(
        "m",
        "ns",
        "u",
        ModelDeploymentSpec.model_validate(
            {
                "model": {"image": {"image": "reg/models:1", "path": "/models/resnet"}, "name": "resnet"},
                "runtime": {"type": "triton"},
            }
        ),
    )
    (copy,) = image["spec"]["template"]["spec"]["initContainers"]
    assert copy["image"] == "reg/models:1" and copy["command"] == ["cp", "-r", "/models/resnet", "/models/source/"]
    assert image["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--model-repository=/models/source",
        "--http-port=8000",
        "--grpc-port=8001",
        "--model-control-mode=explicit",
        "--load-model=resnet",
    ]


def test_triton_loads_the_one_model_directory_the_source_names() -> None:
    def triton(model: dict) -> dict:
        spec = ModelDeploymentSpec.model_validate({"model": model, "runtime": {"type": "triton"}})
        return build_deployment("resnet", "ns", "u", spec)

    on_pvc = triton({"pvc": {"claimName": "models", "path": "/repository/resnet"}})
    assert on_pvc["spec"]["template"]["spec"]["containers"][0]["args"][::4] == [
        "--model-repository=/models/source/repository",
        "--load-model=resnet",
    ]
    with pytest.raises(BuildError, match=r"Triton serves a model directory .* give it as model\.pvc or model\.image"):
        triton({"configMap": {"name": "m", "key": "model.onnx"}})
    with pytest.raises(
        BuildError, match=re.escape("spec.model.name: Triton serves the model under its directory's name, 'v2'")
    ):
        triton({"pvc": {"claimName": "models", "path": "/repository/v2"}, "name": "resnet"})


def test_mlserver_and_custom_runtimes() -> None:
    mls = build_deployment("m", "ns", "u", spec(runtime={"type": "mlserver"}, threads={"workers": 2}))
    env = {e["name"]: e["value"] for e in mls["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MLSERVER_MODEL_IMPLEMENTATION"] == "mlserver_sklearn.SKLearnModel"
    assert env["MLSERVER_PARALLEL_WORKERS"] == "2"
    custom = build_deployment(
        "m",
        "ns",
        "u",
        spec(
            runtime={"type": "custom", "image": "me/server:1", "port": 9000, "command": ["serve"], "args": ["--fast"]}
        ),
    )
    container = custom["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["command"], container["args"]) == ("me/server:1", ["serve"], ["--fast"])
    assert container["ports"][0]["containerPort"] == 9000 and container["readinessProbe"]["httpGet"]["path"] == "/"


def test_local_only_model_is_refused() -> None:
    with pytest.raises(BuildError, match=r"model\.file is a path on one machine"):
        build_deployment("m", "ns", "u", ModelDeploymentSpec.model_validate({"model": {"file": "m.onnx"}}))


def test_service_targets_the_named_ports() -> None:
    service = build_service("iris", "ml", "u", spec(service={"type": "NodePort", "port": 8081, "grpcPort": 9001}))
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8081, "targetPort": "http", "protocol": "TCP"},
        {"name": "grpc", "port": 9001, "targetPort": "grpc", "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"},
    ]
    assert service["spec"]["type"] == "NodePort"
    assert endpoint("iris", "ml", spec(service={"grpcPort": 9001}), "oip-v2-grpc") == "http://iris.ml.svc:9001"
    assert endpoint("iris", "ml", spec(), "oip-v2-grpc") == "http://iris.ml.svc:8081"  # the runtime's port number
    assert endpoint("iris", "ml", spec(), "oip-v2") == "http://iris.ml.svc:80"


def test_grpc_ports_follow_the_runtime() -> None:
    def ports(**fields: Any) -> tuple[list, list]:
        built = spec(**fields)
        container = build_deployment("m", "ns", "u", built)["spec"]["template"]["spec"]["containers"][0]
        return container["ports"], [p["name"] for p in build_service("m", "ns", "u", built)["spec"]["ports"]]

    mlserver_ports, mlserver_service = ports(runtime={"type": "mlserver"})
    assert mlserver_ports == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "grpc", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert mlserver_service == ["http", "grpc"]
    custom = {"type": "custom", "image": "me/server:1", "port": 9000}
    assert ports(runtime=custom) == ([{"name": "http", "containerPort": 9000, "protocol": "TCP"}], ["http"])
    with_grpc = ports(runtime={**custom, "grpcPort": 9500})[0]
    assert with_grpc[1] == {"name": "grpc", "containerPort": 9500, "protocol": "TCP"}
    with pytest.raises(BuildError) as refused:
        endpoint("m", "ns", spec(runtime=custom), "oip-v2-grpc")
    assert str(refused.value) == (
        "runtime custom serves no gRPC service; set runtime.grpcPort (custom), or use onnxruntime, mlserver and triton"
    )
    # Run here as a process (kaliper run), Triton is not among those that serve gRPC (decided in one place).
    assert grpc_problem(spec(runtime={"type": "triton"}), "pod") is None
    assert grpc_problem(spec(runtime={"type": "triton"}), "local") == (
        "runtime triton serves no gRPC service here (onnxruntime and mlserver do)"
    )


def rollout(generation: int, observed: int, replicas: int, ready: int, updated: int, available: int) -> dict:
    """A Deployment as the API server returns it, its controller's view in status."""
    status = {"observedGeneration": observed, "replicas": replicas, "readyReplicas": ready}
    status |= {"updatedReplicas": updated, "availableReplicas": available}
    return {"metadata": {"generation": generation}, "status": status}


def test_status_follows_the_rollout_and_keeps_transition_times() -> None:
    s = spec(replicas=2)
    progressing = observed_status("iris", "ml", 3, s, rollout(1, 1, 2, 1, 2, 1), [], "t1")
    assert progressing["phase"] == "Progressing" and progressing["readyReplicas"] == 1
    ready = observed_status("iris", "ml", 3, s, rollout(1, 1, 2, 2, 2, 2), progressing["conditions"], "t2")
    by_type = {c["type"]: c for c in ready["conditions"]}
    assert ready["phase"] == "Ready" and by_type["Ready"]["lastTransitionTime"] == "t2"
    assert by_type["Degraded"]["lastTransitionTime"] == "t1"  # unchanged status keeps its time
    assert ready["endpoint"] == "http://iris.ml.svc:80" and ready["observedGeneration"] == 3
    stuck = observed_status(
        "iris",
        "ml",
        3,
        s,
        {
            "status": {
                "replicas": 2,
                "readyReplicas": 0,
                "conditions": [
                    {
                        "type": "Progressing",
                        "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                        "message": "ReplicaSet has timed out progressing.",
                    }
                ],
            }
        },
        [],
        "t3",
    )
    assert stuck["phase"] == "Degraded" and "timed out" in stuck["message"]

    # What kstatus (Flux) and Argo CD read: Reconciling while it rolls out, Stalled once it is stuck.
    def gitops(status: dict) -> dict[str, str]:
        return {c["type"]: c["status"] for c in status["conditions"] if c["type"] in ("Reconciling", "Stalled")}

    assert gitops(progressing) == {"Reconciling": "True", "Stalled": "False"}
    assert gitops(ready) == {"Reconciling": "False", "Stalled": "False"}
    assert gitops(stuck) == {"Reconciling": "False", "Stalled": "True"}


def test_an_edited_deployment_is_not_ready_until_its_controller_has_seen_the_edit() -> None:
    s = spec(replicas=2)
    # Right after an edit (generation 2): the status still describes generation 1's two ready replicas.
    edited = observed_status("iris", "ml", 4, s, rollout(2, 1, 2, 2, 2, 2), [], "t1")
    assert (edited["phase"], edited["message"]) == (
        "Progressing",
        "the Deployment controller has not yet seen generation 2 of the Deployment",
    )
    # Seen, a new replica up but not yet available: still rolling out.
    assert observed_status("iris", "ml", 4, s, rollout(2, 2, 2, 2, 2, 1), [], "t2")["phase"] == "Progressing"
    assert observed_status("iris", "ml", 4, s, rollout(2, 2, 2, 2, 2, 2), [], "t3")["phase"] == "Ready"
    failed = failed_status(1, "bad", [], "t4")
    assert failed["phase"] == "Failed" and failed["conditions"][0]["reason"] == "InvalidSpec"


def test_pods_meet_the_restricted_pod_security_standard_and_kaliper_runs_as_its_own_user() -> None:
    restricted_user = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": 10001,
    }
    fetched = build_deployment(
        "m", "ns", "u", spec(model={"url": "https://example.com/model.onnx"}), "registry.example.com/kaliper:2"
    )["spec"]["template"]["spec"]
    assert fetched["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert fetched["containers"][0]["image"] == "registry.example.com/kaliper:2"
    assert fetched["containers"][0]["securityContext"] == restricted_user
    assert fetched["initContainers"][0]["image"] == "registry.example.com/kaliper:2"
    assert fetched["initContainers"][0]["securityContext"] == restricted_user
    # Another image keeps its own user, but still gets no privilege escalation and no capabilities.
    custom = build_deployment(
        "m", "ns", "u", spec(runtime={"type": "custom", "image": "me/server:1", "port": 9000, "command": ["serve"]})
    )["spec"]["template"]["spec"]
    assert custom["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
