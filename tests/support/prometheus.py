"""A real Prometheus (Debian's package): on loopback scraping given targets every second, or scraping the real
node's kubelet (`/metrics/cadvisor`) at a chosen interval, as kube-prometheus-stack does."""

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
CADVISOR_CONFIG = """
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
def cadvisor_prometheus(kubelet: str, address: str, cert: Path, key: Path, interval: str) -> Iterator[str]:
    """Prometheus on `address` (where pods can reach it) scraping the kubelet at `kubelet` (host:port)."""
    config = CADVISOR_CONFIG.format(interval=interval, cert=cert, key=key, kubelet=kubelet)
    with _run(config, address) as url:
        yield url
