"""Shared pieces of the benchmarks: the ground-truth server, running Kaliper and stock Locust, exact
percentiles."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from tests.support.groundtruth import groundtruth, records, reset, wait_http  # noqa: E402

__all__ = ["groundtruth", "records", "reset", "wait_http"]


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


def run_stock_locust(
    url: str, users: int, warmup: float, duration: float, cpus: str | None = None, method: str = "GET", body: str = ""
) -> dict[str, Any]:
    command = [
        sys.executable,
        str(BENCH / "stock_locust.py"),
        url,
        "--users",
        str(users),
        "--warmup",
        str(warmup),
        "--duration",
        str(duration),
        "--method",
        method,
        "--body",
        body,
    ]
    if cpus:
        command = ["taskset", "-c", cpus, *command]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def measured_interval(stage: dict[str, Any]) -> tuple[float, float]:
    """Wall-clock interval of a Kaliper stage's measured windows."""
    from datetime import datetime

    start = datetime.fromisoformat(stage["startedAt"].replace("Z", "+00:00")).timestamp() + stage["warmupS"]
    return start, start + stage["measuredS"]


def stage_truth(served: list[tuple[float, float]], start: float, end: float) -> list[float]:
    """The server's times (ms) of the requests a Kaliper stage measured: those it received in the measured
    interval [start, end), as a request counts in the window it was sent in (the graceful stop awaits the ones
    in flight at its end); each record is (done, unix seconds; took, ms)."""
    return [ms for done, ms in served if start <= done - ms / 1000 < end]


def percent_error(value: float, truth: float) -> str:
    return f"{(value - truth) / truth * 100:+.2f}%"


def lognormal_cdf(x: float, median: float, sigma: float) -> float:
    if x <= 0:
        return 0.0
    return 0.5 * (1 + math.erf((math.log(x) - math.log(median)) / (sigma * math.sqrt(2))))


def stalled_percentile(p: float, median: float, sigma: float, period: float, stall: float, steps: int = 4000) -> float:
    """The p-th percentile (ms) of latency from the intended send when a server holds every request that
    arrives in a stall of `stall` s once every `period` s, and otherwise answers after a lognormal draw.
    Over whole periods the send phase is uniform, so the latency distribution is the mixture

        F(x) = (1 - S/P) * L(x) + (1/P) * integral_0^S L(x - r) dr        (L: the lognormal CDF)

    computed by numerical integration and bisection."""

    def mixture_cdf(x: float) -> float:
        held = sum(lognormal_cdf(x - (i + 0.5) * stall / steps, median, sigma) for i in range(steps)) * stall / steps
        return (1 - stall / period) * lognormal_cdf(x, median, sigma) + held / period

    low, high = 0.0, stall + 10.0
    for _ in range(60):
        mid = (low + high) / 2
        if mixture_cdf(mid) < p / 100:
            low = mid
        else:
            high = mid
    return (low + high) / 2 * 1000
