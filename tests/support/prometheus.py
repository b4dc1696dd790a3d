"""A real Prometheus (Debian's package) on loopback, scraping given targets every second."""

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


def binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        raise RuntimeError(
            "prometheus is not installed: `make test` installs Debian's package (apt-get install prometheus)"
        )
    return path


@contextmanager
def prometheus(targets: list[str]) -> Iterator[str]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="kaliper-prom-") as root:
        config = Path(root) / "prometheus.yml"
        config.write_text(CONFIG.format(targets=", ".join(f'"{t}"' for t in targets)))
        process = subprocess.Popen(
            [
                binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={root}/data",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/-/ready", timeout=30)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)
