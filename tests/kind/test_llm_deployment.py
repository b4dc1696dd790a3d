"""A llamacpp ModelDeployment on the kind cluster: Kaliper's image runs llama.cpp's llama-server (built into it
from the pinned source) on the tiny GGUF model made here, fetched from a URL and checked; it streams chat
completions through the Service with its slots and metrics on; a file that is not GGUF fails the pod with
llama.cpp's own reason in the status."""

from __future__ import annotations

import hashlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kind_cluster import IMAGE, KindCluster, files_for_pods
from tests.support.kind_operator import Operator, pods_of, server_pod
from tests.support.llama import MODEL_NAME, tiny_model


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The tiny model (and a file that is not GGUF) over HTTP on this machine's address on the kind network."""
    model = tiny_model(tmp_path_factory.mktemp("tiny-llm"))
    (model.parent / "not-a-model.gguf").write_text("<html>404 Not Found</html>\n")
    with files_for_pods(model.parent) as base:
        yield base, model


def llama_deployment(name: str, url: str, sha256: str) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {
            "model": {"url": url, "sha256": sha256, "name": MODEL_NAME},
            "runtime": {"type": "llamacpp"},
            "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
            "llm": {"slots": 2, "contextSize": 2048},
        },
    }


def test_llama_server_from_kaliper_image_streams_through_the_service(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, model_files: tuple[str, Path]
) -> None:
    kubectl = cluster.kubectl
    base, model = model_files
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    manifest = llama_deployment("tiny-llm", f"{base}/{model.name}", digest)
    kubectl("apply", "-n", cluster_namespace, "-f", "-", input=json.dumps(manifest))
    kubectl.wait_for_phase("modeldeployment", "tiny-llm", cluster_namespace, "Ready", timeout=120)
    pod = server_pod(cluster, cluster_namespace, "tiny-llm")
    (server,) = pod["spec"]["containers"]
    assert (server["image"], server["command"]) == (IMAGE, ["llama-server"])
    assert server["securityContext"]["runAsUser"] == 10001
    endpoint = f"http://{cluster.service_address(cluster_namespace, 'tiny-llm')}:80"
    body = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": "no ka li"}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        f"{endpoint}/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        events = [line[6:] for line in response.read().decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])["usage"]
    assert usage["completion_tokens"] == 8
    with urllib.request.urlopen(f"{endpoint}/slots", timeout=10) as response:
        slots = json.load(response)
    assert len(slots) == 2 and {s["n_ctx"] for s in slots} == {1024}  # 2,048 context tokens over 2 slots
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert "llamacpp:tokens_predicted_total 8" in metrics.splitlines()


def test_a_file_that_is_not_gguf_fails_the_pod_with_llama_cpp_reason(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, model_files: tuple[str, Path]
) -> None:
    kubectl = cluster.kubectl
    base, model = model_files
    wrong = model.parent / "not-a-model.gguf"
    digest = hashlib.sha256(wrong.read_bytes()).hexdigest()
    manifest = llama_deployment("not-gguf", f"{base}/{wrong.name}", digest)
    kubectl("apply", "-n", cluster_namespace, "-f", "-", input=json.dumps(manifest))

    def terminated() -> dict:
        # Nothing yet while the operator's Deployment has not made its pod (CI once polled before it had).
        pods = pods_of(cluster, cluster_namespace, "not-gguf")
        statuses = (pods[0]["status"].get("containerStatuses") or []) if len(pods) == 1 else []
        state = statuses[0] if statuses else {}
        return (state.get("lastState") or {}).get("terminated") or (state.get("state") or {}).get("terminated") or {}

    kubectl.wait_for(lambda: bool(terminated()), timeout=120, what="llama-server to exit on a file that is not GGUF")
    exited = terminated()
    assert exited["exitCode"] == 1
    assert "failed to load model" in exited.get("message", ""), exited
