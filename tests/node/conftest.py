"""Fixtures of the real node tier's tests: a real Prometheus scraping the node's kubelet, the chart
installed with the operator running as a pod of the image built from the Dockerfile."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kaliper.serving.examples import make_iris
from tests.support.controlplane import build_binaries
from tests.support.node import HOST_IP, IMAGE, NODE_IP, Node
from tests.support.node_operator import OPERATOR_NAMESPACE, Operator, operator_pod
from tests.support.paths import REPO
from tests.support.prometheus import cluster_prometheus, pod_targets

CHART = REPO / "charts" / "kaliper"


def helm(node: Node, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(build_binaries("helm") / "helm"), f"--kubeconfig={node.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def node_prometheus(node: Node, interval: str) -> Iterator[str]:
    """Prometheus on HOST_IP (pods reach it there) scraping the kubelet's /metrics/cadvisor and the pods that
    carry the prometheus.io annotations (the LLM servers' metrics), found every 5 s."""
    assert node.plane is not None
    pki = node.plane.root / "pki"
    pods_file = node.root / f"prometheus-pods-{interval}.json"
    pods_file.write_text("[]")
    stop = threading.Event()

    def discover() -> None:
        while not stop.wait(5):
            listed = node.kubectl("get", "pods", "-A", "-o", "json", check=False)
            if listed.returncode != 0:
                continue
            found = json.dumps(pod_targets(json.loads(listed.stdout)["items"]), sort_keys=True)
            if found != pods_file.read_text():
                partial = pods_file.with_suffix(".partial")
                partial.write_text(found)
                partial.replace(pods_file)  # Prometheus never reads half a file

    discovery = threading.Thread(target=discover, daemon=True)
    discovery.start()
    try:
        with cluster_prometheus(
            f"{NODE_IP}:10250", HOST_IP, pki / "admin.crt", pki / "admin.key", interval, pods_file
        ) as url:
            yield url
    finally:
        stop.set()
        discovery.join()


@pytest.fixture(scope="session")
def node_prometheus_source(node: Node) -> Iterator[dict[str, str]]:
    """The node's Prometheus, scraping every 5 s: the operator's default (the chart's prometheus.url and
    scrapeInterval), and what tests that set spec.metrics.prometheus name (this dict). The operator sizes its
    windows and waits for the final scrape from the interval; the 30 s of kube-prometheus-stack is tested end to
    end by the kind walkthrough (tests/kind), whose Prometheus scrapes at 30 s, and sparse samples by the window
    tests of tests/metrics, so the node tier does not wait for it."""
    with node_prometheus(node, "5s") as url:
        yield {"url": url, "scrapeInterval": "5s"}


@pytest.fixture(scope="session")
def operator(node: Node, node_prometheus_source: dict[str, str]) -> Iterator[Operator]:
    """`helm install` of the chart: CRDs, RBAC and the operator as a pod of the project's image."""
    repository, tag = IMAGE.rsplit(":", 1)
    install = helm(
        node,
        "install",
        "kaliper",
        str(CHART),
        "-n",
        OPERATOR_NAMESPACE,
        "--create-namespace",
        f"--set=image.repository={repository}",
        f"--set=image.tag={tag}",
        "--set=image.pullPolicy=Never",
        f"--set=prometheus.url={node_prometheus_source['url']}",
        f"--set=prometheus.scrapeInterval={node_prometheus_source['scrapeInterval']}",
        # Two cores in all: the trial's server, its load generator and the operator must fit together.
        "--set=loadGenerator.resources.requests.cpu=250m",
        "--set=loadGenerator.antiAffinity=preferred",  # one node: best effort
        "--wait",
        "--timeout=3m",
    )
    assert install.returncode == 0, (
        install.stderr + "\n" + node.kubectl("describe", "pods", "-n", OPERATOR_NAMESPACE, check=False).stdout[-3000:]
    )
    # The chart's own `helm test`: a pod of the image reads the operator's metrics through its Service.
    tested = helm(node, "test", "kaliper", "-n", OPERATOR_NAMESPACE, "--timeout=2m")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    yield Operator(operator_pod(node))
    helm(node, "uninstall", "kaliper", "-n", OPERATOR_NAMESPACE, "--wait")


@pytest.fixture(scope="session")
def iris_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_iris(tmp_path_factory.mktemp("models") / "iris.onnx")
