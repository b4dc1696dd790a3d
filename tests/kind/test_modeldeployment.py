"""A ModelDeployment whose model comes from a URL, on the kind cluster: the model-fetch init container (the
project's image) downloads and checks it, the built-in server answers through the Service, and a wrong
checksum stops the pod before it serves."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kind_cluster import IMAGE, KindCluster, files_for_pods
from tests.support.kind_operator import Operator, pods_of, server_pod


@pytest.fixture
def model_server(iris_model: Path) -> Iterator[str]:
    """The model file over HTTP on this machine's address on the kind network (the only place outside the
    cluster that pods can reach)."""
    with files_for_pods(iris_model.parent) as base:
        yield f"{base}/{iris_model.name}"


def deployment(name: str, url: str, sha256: str) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {
            "model": {"url": url, "sha256": sha256, "name": "iris"},
            "runtime": {"type": "onnxruntime"},
            "resources": {"limits": {"cpu": "250m", "memory": "256Mi"}},
        },
    }


def test_a_model_from_a_url_is_fetched_checked_and_served(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, model_server: str, iris_model: Path
) -> None:
    kubectl = cluster.kubectl
    digest = hashlib.sha256(iris_model.read_bytes()).hexdigest()
    kubectl("apply", "-n", cluster_namespace, "-f", "-", input=json.dumps(deployment("fetched", model_server, digest)))
    kubectl.wait_for_phase("modeldeployment", "fetched", cluster_namespace, "Ready", timeout=120)
    pod = server_pod(cluster, cluster_namespace, "fetched")
    fetch = pod["status"]["initContainerStatuses"][0]
    assert fetch["name"] == "fetch-model" and fetch["image"] == IMAGE
    assert fetch["state"]["terminated"]["exitCode"] == 0
    logs = kubectl("logs", pod["metadata"]["name"], "-c", "fetch-model", "-n", cluster_namespace).stdout
    assert logs.strip() == f"fetched {model_server} to /models/source/iris.onnx (sha256 {digest})"
    # An inference through the Service's cluster IP (this machine routes the Service range into the cluster).
    cluster_ip = cluster.service_address(cluster_namespace, "fetched")
    body = {"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
    request = urllib.request.Request(
        f"http://{cluster_ip}:80/v2/models/iris/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        outputs = {o["name"]: o for o in json.load(response)["outputs"]}
    assert outputs["label"]["data"] == [0]  # setosa


def test_a_wrong_checksum_stops_the_pod_before_it_serves(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, model_server: str, iris_model: Path
) -> None:
    kubectl = cluster.kubectl
    wrong = "0" * 64
    kubectl("apply", "-n", cluster_namespace, "-f", "-", input=json.dumps(deployment("tampered", model_server, wrong)))

    def fetch_failed() -> bool:
        if not pods_of(cluster, cluster_namespace, "tampered"):
            return False  # the operator has not made its Deployment's pod yet
        statuses = server_pod(cluster, cluster_namespace, "tampered")["status"].get("initContainerStatuses") or []
        state = statuses[0] if statuses else {}
        return (state.get("lastState") or state.get("state") or {}).get("terminated", {}).get("exitCode") == 1

    kubectl.wait_for(fetch_failed, timeout=120, what="the fetch-model init container to fail")
    pod = server_pod(cluster, cluster_namespace, "tampered")
    said = f"SHA-256 is {hashlib.sha256(iris_model.read_bytes()).hexdigest()}, expected {wrong}"

    def fetch_logs() -> str:
        """The failed fetch's logs, the last or the one before: while the kubelet restarts the init container,
        one of the two may be unreadable for a moment ("unable to retrieve container logs", seen on a cold run)."""
        name = pod["metadata"]["name"]
        runs = [
            kubectl("logs", name, "-c", "fetch-model", "-n", cluster_namespace, *flag, check=False)
            for flag in (["--previous"], [])
        ]
        return "".join(run.stdout + run.stderr for run in runs)

    kubectl.wait_for(lambda: said in fetch_logs(), timeout=60, what="the fetch's log of the checksum it refused")
    assert pod["status"]["containerStatuses"][0].get("ready") is False
