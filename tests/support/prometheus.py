"""A real Prometheus (Debian's package): on loopback scraping given targets every second, or scraping a kind
cluster's kubelets (`/metrics/cadvisor`) at a chosen interval, as kube-prometheus-stack does, and the pods that ask
for it by the prometheus.io annotations, as the Prometheus community chart's `kubernetes-pods` job does (the
discovery through a file, since Debian builds Prometheus without Kubernetes service discovery)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kaliper.netutil import free_port
from tests.support.groundtruth import wait_http

CONFIG = """
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
"""
JOB = """
  - job_name: {name}
    honor_timestamps: true
    static_configs:
      - targets: [{targets}]
        labels: {labels}
"""

# kube-prometheus-stack's kubelet job for cAdvisor: HTTPS to the kubelet, the exporter's timestamps kept.
CLUSTER_CONFIG = """
global:
  scrape_interval: {interval}
  evaluation_interval: {interval}
scrape_configs:
  - job_name: kubelet
    scheme: https
    metrics_path: /metrics/cadvisor
    honor_labels: true
    honor_timestamps: true
    tls_config:
      insecure_skip_verify: true   # the kubelet's self-signed serving certificate
      cert_file: {cert}
      key_file: {key}
    static_configs:
      - targets: [{kubelets}]
  # The pods that ask for it by the prometheus.io annotations. Debian's Prometheus is built without
  # kubernetes_sd_configs, so `pod_targets` does that discovery's part: the pods' IPs and annotated ports and
  # paths, with the namespace and pod labels the community chart's kubernetes-pods job gives them.
  - job_name: kubernetes-pods
    file_sd_configs:
      - files: ["{pods_file}"]
"""


def binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        raise RuntimeError(
            "prometheus is not installed: `make test` installs Debian's package (apt-get install prometheus)"
        )
    return path


@contextmanager
def _run(config_text: str, address: str) -> Iterator[str]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="kaliper-prom-") as root:
        config = Path(root) / "prometheus.yml"
        config.write_text(config_text)
        process = subprocess.Popen(
            [
                binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={root}/data",
                f"--web.listen-address={address}:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_http(f"http://{address}:{port}/-/ready", timeout=30)
            yield f"http://{address}:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)


@contextmanager
def prometheus(targets: list[str], namespaces: tuple[str, ...] = ()) -> Iterator[str]:
    """Prometheus on loopback scraping `targets` every second; with `namespaces`, once per namespace, each
    scrape's series labelled with it, as Kubernetes discovery labels a pod's series with its namespace."""
    listed = ", ".join(f'"{t}"' for t in targets)
    jobs = [JOB.format(name=f"ns-{n}", targets=listed, labels=f"{{namespace: {n}}}") for n in namespaces]
    config = CONFIG + "".join(jobs or [JOB.format(name="test", targets=listed, labels="{}")])
    with _run(config, "127.0.0.1") as url:
        yield url


@contextmanager
def pods_prometheus(pods: dict[str, dict[str, str]]) -> Iterator[str]:
    """Prometheus on loopback scraping each target (host:port) every second with its own labels (a pod's
    `namespace` and `pod`, as Kubernetes discovery gives them)."""
    groups = "".join(
        f"""
      - targets: ["{target}"]
        labels: {json.dumps(labels)}"""
        for target, labels in pods.items()
    )
    config = (
        CONFIG
        + f"""
  - job_name: pods
    honor_timestamps: true
    static_configs:{groups}
"""
    )
    with _run(config, "127.0.0.1") as url:
        yield url


@contextmanager
def cluster_prometheus(
    kubelets: list[str], address: str, cert: Path, key: Path, interval: str, pods_file: Path
) -> Iterator[str]:
    """Prometheus on `address` (where pods can reach it) scraping the kubelets at `kubelets` (host:port) and
    the pod targets written to `pods_file` (pod_targets)."""
    listed = ", ".join(f'"{kubelet}"' for kubelet in kubelets)
    config = CLUSTER_CONFIG.format(interval=interval, cert=cert, key=key, kubelets=listed, pods_file=pods_file)
    with _run(config, address) as url:
        yield url


def scrape_annotations(port: int) -> dict[str, str]:
    """The annotations by which annotation-based discovery (pod_targets) scrapes a server pod's own metrics."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}


def pod_targets(pods: list[dict]) -> list[dict]:
    """file_sd target groups of the running pods annotated prometheus.io/scrape=true, as annotation-based
    discovery makes them: the pod's IP and prometheus.io/port, prometheus.io/path (default /metrics), and
    the namespace and pod labels."""
    groups = []
    for pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        status = pod.get("status", {})
        ip, running = status.get("podIP"), status.get("phase") == "Running"
        if (
            annotations.get("prometheus.io/scrape") != "true"
            or not (ip and running)
            or "prometheus.io/port" not in annotations
        ):
            continue
        labels = {"namespace": pod["metadata"]["namespace"], "pod": pod["metadata"]["name"]}
        labels["__metrics_path__"] = annotations.get("prometheus.io/path", "/metrics")
        groups.append({"targets": [f"{ip}:{annotations['prometheus.io/port']}"], "labels": labels})
    return groups


def instant_value(url: str, promql: str) -> float | None:
    """The first value of an instant query now (None when nothing matches)."""
    query = urllib.parse.urlencode({"query": promql})
    result = json.loads(urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=10).read())["data"]["result"]
    return float(result[0]["value"][1]) if result else None
