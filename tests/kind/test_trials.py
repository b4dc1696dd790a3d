"""ProfileRun trials on the kind cluster, driven by the operator pod the chart installs: what the kubelet and
containerd really do when a server runs out of memory or its image does not exist, distributed load over
real pod networking with the operator killed in the middle of it, and REST and gRPC trials admitted under the
restricted Pod Security Standard. (Each run waits for the final scrape: what one test can check, it does.)"""

from __future__ import annotations

import json
import time
from datetime import datetime

from kaliper.report.publish import RESULT_KEY
from kaliper.report.store import read_document
from tests.support.kind_cluster import IMAGE, KindCluster
from tests.support.kind_operator import (
    OPERATOR_NAMESPACE,
    Operator,
    apply_with_model,
    operator_pod,
    poll_until_phase,
    wait_for_phase,
)

PAYLOAD = {"tensors": {"inputs": [{"name": "float_input", "shape": [-1, 4], "datatype": "FP32"}], "seed": 7}}


def iris(name: str, memory: str = "256Mi", cpu: str = "250m", runtime: dict | None = None) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {
            "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"},
            "runtime": runtime or {"type": "onnxruntime"},
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
            "threads": {"intraOp": 1},
        },
    }


def profilerun(name: str, target: str, seconds: int = 10, **load: object) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": name},
        "spec": {
            "target": {"deploymentRef": {"name": target}},
            "payload": PAYLOAD,
            "load": {
                "closedLoop": {"concurrency": 2},
                "warmup": "1s",
                "minDuration": f"{seconds}s",
                "maxDuration": f"{seconds}s",
                **load,
            },
            "slo": {"latency": [{"percentile": 99, "max": "200ms"}]},
            "readyTimeout": "5m",
        },
    }


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def test_a_server_over_its_memory_limit_is_reported_oomkilled(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model
) -> None:  # type: ignore[no-untyped-def]
    # Python with onnxruntime and numpy loaded needs far more than 40Mi: the kernel kills it at start-up.
    apply_with_model(cluster, cluster_namespace, iris_model, iris("small", memory="40Mi"), profilerun("oom", "small"))
    status = wait_for_phase(cluster, cluster_namespace, "oom", "Failed", timeout=240)
    trial = status["trials"][0]
    assert trial["phase"] == "Failed" and trial["failedIn"] == "Deploying"
    assert trial["message"].startswith("OOMKilled: container server of pod oom-t0-")
    assert trial["resources"]["oomKills"] == 1
    assert status["message"].startswith("no trial succeeded; the first failure: OOMKilled")


def test_an_image_that_does_not_exist_fails_the_trial_in_seconds(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model
) -> None:  # type: ignore[no-untyped-def]
    missing = {"type": "custom", "image": "localhost/kaliper-missing:1", "command": ["serve"], "port": 8080}
    apply_with_model(
        cluster, cluster_namespace, iris_model, iris("ghost", runtime=missing), profilerun("ghost", "ghost")
    )
    status = wait_for_phase(cluster, cluster_namespace, "ghost", "Failed", timeout=240)
    trial = status["trials"][0]
    assert trial["failedIn"] == "Deploying"
    assert trial["message"].split(":", 1)[0] == "ErrImagePull", trial["message"]  # whichever state the kubelet showed
    assert "cannot pull image localhost/kaliper-missing:1" in trial["message"]
    # Diagnosed from the pod as soon as the kubelet gave up pulling, not at readyTimeout (5 minutes).
    assert seconds_between(trial["startTime"], trial["completionTime"]) < 60


def test_a_distributed_run_whose_operator_pod_is_killed_carries_on_and_creates_nothing_twice(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model
) -> None:  # type: ignore[no-untyped-def]
    """A master and two workers over pod networking; the operator pod deleted while they load."""
    run = profilerun("sturdy", "sturdy", seconds=20, workers=2)
    apply_with_model(cluster, cluster_namespace, iris_model, iris("sturdy"), run)
    first = operator_pod(cluster)
    seen: dict[str, set[str]] = {"loadgen-master": set(), "loadgen": set()}
    killed: list[float] = []

    def watch_pods_and_kill_when_loading() -> None:
        pods = cluster.kubectl.json("get", "pods", "-n", cluster_namespace, "-l", "kaliper.dev/profilerun=sturdy")
        for pod in pods["items"]:
            role = pod["metadata"]["labels"].get("kaliper.dev/role")
            if role in seen and pod["status"].get("phase") in ("Running", "Succeeded"):
                seen[role].add(pod["metadata"]["name"])
        status = cluster.kubectl.json("get", "profilerun", "sturdy", "-n", cluster_namespace).get("status") or {}
        if killed or not status.get("trials") or status["trials"][0].get("phase") != "Running":
            return
        cluster.kubectl(
            "delete", "pod", first["metadata"]["name"], "-n", OPERATOR_NAMESPACE, "--grace-period=0", "--force"
        )
        killed.append(time.time())

    status = poll_until_phase(
        cluster, cluster_namespace, "sturdy", "Succeeded", watch_pods_and_kill_when_loading, timeout=300
    )
    assert killed, "the run finished before its load generator was seen running"
    assert operator_pod(cluster)["metadata"]["name"] != first["metadata"]["name"]
    trial = status["trials"][0]
    assert trial["phase"] == "Succeeded" and trial["requests"] > 100 and trial["errorRate"] == 0
    assert len(seen["loadgen-master"]) == 1 and len(seen["loadgen"]) == 2, seen
    stored = cluster.kubectl.json("get", "configmap", "sturdy-t0-result", "-n", cluster_namespace)
    document = json.loads(read_document(stored, RESULT_KEY) or "{}")
    assert document["generator"]["workers"] == 2
    created: dict[str, int] = {}
    for event in cluster.audit_events():
        ref = event.get("objectRef") or {}
        if ref.get("namespace") == cluster_namespace and (event.get("responseStatus") or {}).get("code") == 201:
            key = f"{ref['resource']}/{ref.get('name') or ''}"
            created[key] = created.get(key, 0) + 1
    for key in (
        "modeldeployments/sturdy-t0",
        "jobs/sturdy-t0-lgm",
        "jobs/sturdy-t0-lgw",
        "configmaps/sturdy-t0-lg",
        "configmaps/sturdy-t0-result",
    ):
        assert created.get(key) == 1, (key, created)


def test_a_crash_looping_server_and_an_unschedulable_one_fail_their_trials_with_the_reason(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model
) -> None:  # type: ignore[no-untyped-def]
    # Trial 0 asks for more CPU than a node has; trial 1 is scheduled, and its server exits at once.
    crashing = {"type": "custom", "image": IMAGE, "command": ["python", "-c", "raise SystemExit(3)"], "port": 8080}
    run = profilerun("broken", "broken")
    run["spec"].update(sweep={"cpu": ["64", "250m"]}, readyTimeout="20s", search={"parallelism": 2})
    apply_with_model(cluster, cluster_namespace, iris_model, iris("broken", runtime=crashing), run)
    status = wait_for_phase(cluster, cluster_namespace, "broken", "Failed", timeout=180)
    trials = {t["index"]: t for t in status["trials"]}
    assert trials[0]["failedIn"] == "Deploying"
    assert trials[0]["message"].startswith("not ready after readyTimeout (20s): Unschedulable: pod broken-t0-")
    assert "Insufficient cpu" in trials[0]["message"]
    assert trials[1]["failedIn"] == "Deploying"
    assert trials[1]["message"].startswith("CrashLoopBackOff: container server of pod broken-t1-")
    assert "(exit code 3)" in trials[1]["message"]


def test_a_protocol_sweep_under_the_restricted_pod_security_standard_loads_the_rest_and_grpc_ports(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model
) -> None:  # type: ignore[no-untyped-def]
    """Every pod of the run (servers, load generators and the gRPC one's client process) is admitted in a
    namespace that enforces the restricted standard."""
    cluster.kubectl("label", "namespace", cluster_namespace, "pod-security.kubernetes.io/enforce=restricted")
    run = profilerun("faces", "faces")
    run["spec"]["readyTimeout"] = "90s"  # a refused pod would otherwise wait out 5 minutes
    run["spec"]["sweep"] = {"protocol": ["oip-v2", "oip-v2-grpc"]}
    run["spec"]["request"] = {"grpc": {"connections": 2}}
    run["spec"]["search"] = {"parallelism": 2}
    services: dict[str, list] = {}

    def watch_services() -> None:
        for service in cluster.kubectl.json("get", "services", "-n", cluster_namespace)["items"]:
            services.setdefault(service["metadata"]["name"], service["spec"]["ports"])

    apply_with_model(cluster, cluster_namespace, iris_model, iris("faces"), run)
    status = poll_until_phase(cluster, cluster_namespace, "faces", "Succeeded", watch_services, timeout=300)
    rest, grpc = status["trials"]
    assert rest["parameters"] == {"protocol": "oip-v2", "concurrency": "2"}
    assert grpc["parameters"] == {"protocol": "oip-v2-grpc", "concurrency": "2"}
    for trial in (rest, grpc):
        assert trial["phase"] == "Succeeded" and trial["requests"] > 100 and trial["errorRate"] == 0, trial
    # Each trial's Service exposes both faces of the built-in server; the gRPC trial called the grpc port.
    assert [(p["name"], p["port"]) for p in services["faces-t1"]] == [("http", 80), ("grpc", 8081)]
    documents = {}
    for index in (0, 1):
        stored = cluster.kubectl.json("get", "configmap", f"faces-t{index}-result", "-n", cluster_namespace)
        documents[index] = json.loads(read_document(stored, RESULT_KEY) or "{}")
    assert documents[0]["target"] == f"http://faces-t0.{cluster_namespace}.svc:80/v2/models/iris/infer"
    assert (
        documents[1]["target"]
        == f"http://faces-t1.{cluster_namespace}.svc:8081/inference.GRPCInferenceService/ModelInfer"
    )
    assert (documents[1]["generator"]["protocol"], documents[1]["generator"]["connections"]) == ("oip-v2-grpc", 2)
    events = cluster.kubectl.json("get", "events", "-n", cluster_namespace)["items"]
    assert [e["message"] for e in events if "violates PodSecurity" in e.get("message", "")] == []
