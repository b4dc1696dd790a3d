"""A real Prometheus (Debian's package): on loopback scraping given targets every second, or scraping the real
node's kubelet (`/metrics/cadvisor`) at a chosen interval, as kube-prometheus-stack does, and the pods that ask
for it by the prometheus.io annotations, as the Prometheus community chart's `kubernetes-pods` job does."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
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
  - job_name: test
    honor_timestamps: true
    static_configs:
      - targets: [{targets}]
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
      - targets: ["{kubelet}"]
  # Annotation-based pod discovery: pods with prometheus.io/scrape=true, at their IP and the annotated port
  # and path, labelled with their namespace and pod (the labels Kaliper's queries filter on).
  - job_name: kubernetes-pods
    kubernetes_sd_configs:
      - role: pod
        api_server: {api_server}
        tls_config: {{ca_file: {ca}, cert_file: {cert}, key_file: {key}}}
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
        action: keep
        regex: "true"
      - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
        action: replace
        target_label: __metrics_path__
        regex: (.+)
      - source_labels: [__meta_kubernetes_pod_ip, __meta_kubernetes_pod_annotation_prometheus_io_port]
        action: replace
        regex: (.+);(\\d+)
        replacement: $1:$2
        target_label: __address__
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
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
def prometheus(targets: list[str]) -> Iterator[str]:
    with _run(CONFIG.format(targets=", ".join(f'"{t}"' for t in targets)), "127.0.0.1") as url:
        yield url


@contextmanager
def cluster_prometheus(
    kubelet: str, api_server: str, address: str, ca: Path, cert: Path, key: Path, interval: str
) -> Iterator[str]:
    """Prometheus on `address` (where pods can reach it) scraping the kubelet at `kubelet` (host:port) and
    the pods the API server at `api_server` lists with the prometheus.io annotations."""
    config = CLUSTER_CONFIG.format(interval=interval, ca=ca, cert=cert, key=key, kubelet=kubelet, api_server=api_server)
    with _run(config, address) as url:
        yield url
