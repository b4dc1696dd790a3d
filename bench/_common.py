"""Shared pieces of the benchmarks: the ground-truth server, running Kaliper and stock Locust, exact
percentiles."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

BENCH = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("KALIPER_CACHE", Path.home() / ".cache" / "kaliper")) / "bench"


def groundtruth_binary() -> Path:
    """Build bench/groundtruth (Go, standard library only), cached by the hash of its source."""
    source = (BENCH / "groundtruth" / "main.go").read_bytes()
    target = CACHE / f"groundtruth-{hashlib.sha256(source).hexdigest()[:12]}"
    if not target.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(target), "."], cwd=BENCH / "groundtruth", check=True)
    return target


@contextmanager
def groundtruth(port: int, *flags: str):  # type: ignore[no-untyped-def]
    process = subprocess.Popen([str(groundtruth_binary()), "-addr", f"127.0.0.1:{port}", *flags],
                               stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{port}/_truth/records")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def wait_http(url: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def truth_records(base: str) -> tuple[float, list[tuple[float, float]]]:
    """(stall epoch, [(completed unix seconds, service ms)])."""
    data = json.loads(urllib.request.urlopen(f"{base}/_truth/records", timeout=30).read())
    return data["epoch"], [(ns / 1e9, us / 1000) for ns, us in data["records"]]


def nearest_rank(values: list[float], percentile: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(len(ordered) * percentile / 100 - 1e-9)) - 1]


def run_kaliper(config: dict[str, Any], cpus: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "kaliper.loadgen", "run", str(path), "-o", str(out)]
        if cpus:
            command = ["taskset", "-c", cpus, *command]
        subprocess.run(command, check=False, stderr=subprocess.DEVNULL)
        return json.loads(out.read_text())


def run_stock_locust(url: str, users: int, warmup: float, duration: float, cpus: str | None = None,
                     method: str = "GET", body: str = "") -> dict[str, Any]:  # fmt: skip
    command = [sys.executable, str(BENCH / "stock_locust.py"), url, "--users", str(users),
               "--warmup", str(warmup), "--duration", str(duration), "--method", method, "--body", body]  # fmt: skip
    if cpus:
        command = ["taskset", "-c", cpus, *command]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def measured_interval(stage: dict[str, Any]) -> tuple[float, float]:
    """Wall-clock interval of a Kaliper stage's measured windows."""
    from datetime import datetime

    start = datetime.fromisoformat(stage["startedAt"].replace("Z", "+00:00")).timestamp() + stage["warmupS"]
    return start, start + stage["measuredS"]


def percent_error(value: float, truth: float) -> str:
    return f"{(value - truth) / truth * 100:+.2f}%"
