"""Fixtures of the kind tier: the tier's kind cluster (tests/support/kind_cluster.py), a real Prometheus on this
machine scraping its kubelets every 5 s, and the chart's operator pointed at it."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kaliper.serving.examples import make_iris
from tests.support.controlplane import ControlPlaneError, fresh_namespace, interrupt
from tests.support.kind import HOST_IP, KindError
from tests.support.kind_cluster import KindCluster, cluster_session
from tests.support.kind_operator import OPERATOR_NAMESPACE, Operator, operator_pod
from tests.support.paths import REPO
from tests.support.prometheus import cluster_prometheus, pod_targets

CHART = REPO / "charts" / "kaliper"


@pytest.fixture(scope="package")
def cluster() -> Iterator[KindCluster]:
    """The kind cluster the tutorial's cluster-wide steps make (kind-config.yaml, the image, Prometheus, the
    chart), made once for this package's tests (one worker runs them all, tests/support/tiers.py) and deleted
    after its last, so that its nodes do not idle beside the modules that worker runs next; the test fails if
    anything of it is left on this machine."""
    signal.signal(signal.SIGTERM, interrupt)  # a CI timeout: the cluster is still deleted
    try:
        with cluster_session() as made:
            yield made
    except (KindError, ControlPlaneError) as exc:
        pytest.fail(f"the kind cluster: {exc}", pytrace=False)


@pytest.fixture
def cluster_namespace(cluster: KindCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace on the kind cluster."""
    yield from fresh_namespace(cluster.kubectl, request, "n")


@contextmanager
def host_prometheus(cluster: KindCluster, interval: str) -> Iterator[str]:
    """Prometheus on HOST_IP (pods reach it there) scraping the workers' kubelets' /metrics/cadvisor and the pods
    that carry the prometheus.io annotations (the LLM servers' metrics), found every 5 s."""
    cert, key = cluster.admin_credentials()
    pods_file = cluster.host.root / f"prometheus-pods-{interval}.json"
    pods_file.write_text("[]")
    stop = threading.Event()

    def discover() -> None:
        while not stop.wait(5):
            try:
                listed = cluster.kubectl.json("get", "pods", "-A")
            except ControlPlaneError:
                continue
            found = json.dumps(pod_targets(listed["items"]), sort_keys=True)
            if found != pods_file.read_text():
                partial = pods_file.with_suffix(".partial")
                partial.write_text(found)
                partial.replace(pods_file)  # Prometheus never reads half a file

    discovery = threading.Thread(target=discover, daemon=True)
    discovery.start()
    try:
        with cluster_prometheus(cluster.kubelets(), HOST_IP, cert, key, interval, pods_file) as url:
            yield url
    finally:
        stop.set()
        discovery.join()


@pytest.fixture(scope="package")
def prometheus_source(cluster: KindCluster) -> Iterator[dict[str, str]]:
    """A Prometheus scraping every 5 s: the operator's default once `operator` has set it (the chart's
    prometheus.url and scrapeInterval), and what tests that set spec.metrics.prometheus name (this dict). The
    operator sizes its windows and waits for the final scrape from the interval; the tutorial's Prometheus
    (30 s, as kube-prometheus-stack's) is tested end to end by tests/kind/test_walkthrough.py, and sparse samples
    by the window tests of tests/metrics, so the other tests do not wait for it."""
    with host_prometheus(cluster, "5s") as url:
        yield {"url": url, "scrapeInterval": "5s"}


@pytest.fixture(scope="package")
def operator(cluster: KindCluster, prometheus_source: dict[str, str]) -> Operator:
    """The tutorial's `helm install` upgraded to the settings these tests need: the 5 s Prometheus and load
    generators that fit beside a trial's server on this machine's two cores; then the chart's own `helm test`."""
    upgrade = cluster.helm(
        "upgrade",
        "kaliper",
        str(CHART),
        "-n",
        OPERATOR_NAMESPACE,
        "--reuse-values",
        f"--set=prometheus.url={prometheus_source['url']}",
        f"--set=prometheus.scrapeInterval={prometheus_source['scrapeInterval']}",
        "--set=loadGenerator.resources.requests.cpu=250m",
        "--set=loadGenerator.antiAffinity=preferred",  # two workers for a master and two load generators
        "--wait",
        "--timeout=3m",
    )
    assert upgrade.returncode == 0, (
        upgrade.stderr
        + "\n"
        + cluster.kubectl("describe", "pods", "-n", OPERATOR_NAMESPACE, check=False).stdout[-3000:]
    )
    # The chart's own `helm test`: a pod of the image reads the operator's metrics through its Service.
    tested = cluster.helm("test", "kaliper", "-n", OPERATOR_NAMESPACE, "--timeout=2m")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    return Operator(operator_pod(cluster))


@pytest.fixture(scope="session")
def iris_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_iris(tmp_path_factory.mktemp("models") / "iris.onnx")
