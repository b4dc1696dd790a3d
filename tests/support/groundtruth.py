"""The ground-truth HTTP server of bench/groundtruth (Go, standard library only): known latency, its own
records of every request. Built on first use and cached by the hash of its source."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kaliper.netutil import free_port

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "bench" / "groundtruth"
CACHE = Path(os.environ.get("KALIPER_CACHE", Path.home() / ".cache" / "kaliper")) / "bench"


def binary() -> Path:
    digest = hashlib.sha256((SOURCE / "main.go").read_bytes() + (SOURCE / "go.mod").read_bytes()).hexdigest()
    target = CACHE / f"groundtruth-{digest[:12]}"
    if not target.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["go", "build", "-o", str(target), "."],
            cwd=SOURCE,
            check=True,
            env={**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"},
        )
    return target


def wait_http(url: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def groundtruth(*flags: str, port: int | None = None) -> Iterator[str]:
    """Run the server on loopback; yields its base URL."""
    port = port or free_port()
    process = subprocess.Popen([str(binary()), "-addr", f"127.0.0.1:{port}", *flags], stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/_truth/records")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def records(base: str) -> tuple[float, list[tuple[float, float]]]:
    """(stall epoch, [(completed unix seconds, service ms)]) of every request served so far."""
    data = json.loads(urllib.request.urlopen(f"{base}/_truth/records", timeout=30).read())
    return data["epoch"], [(ns / 1e9, us / 1000) for ns, us in data["records"]]


def reset(base: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{base}/_truth/reset", method="POST"), timeout=10).read()
