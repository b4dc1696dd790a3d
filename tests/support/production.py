"""Production for the prediction checks' tests: real built-in servers that batch with a 20 ms queue delay (an
answer takes at least 20 ms of the server's own time, whatever the machine is doing, so the histogram bucket
its percentiles fall in starts at 10 ms or above), the test's own traffic to them (not Kaliper's load
generator), and scripted profiles to hold them to."""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from kaliper.report.schema import ProfileReport
from tests.support.builtin_server import IRIS_ROWS
from tests.support.prometheus import instant_value
from tests.support.sample_reports import report_with, succeeded

HISTOGRAM = "kaliper_server_request_seconds"
BATCHED = ("--intra-op", "1", "--max-batch-size", "8", "--max-queue-delay", "20ms")
BODY = json.dumps({"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": IRIS_ROWS[0]}]})


def infer(base: str) -> None:
    request = urllib.request.Request(
        f"{base}/v2/models/iris/infer", data=BODY.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def send(bases: list[str], each: int) -> None:
    """`each` requests to every server, one at a time to each, the servers at once."""
    with ThreadPoolExecutor(len(bases)) as pool:
        list(pool.map(lambda base: [infer(base) for _ in range(each)], bases))


def wait_for_value(url: str, promql: str, expected: float, timeout: float = 30) -> None:
    """Until Prometheus's latest samples give `expected` (each scrape is a second apart)."""
    deadline = time.monotonic() + timeout
    while (found := instant_value(url, promql)) != expected:
        assert time.monotonic() < deadline, f"{promql} read {found}, not {expected}, for {timeout:g} s"
        time.sleep(0.2)


def scripted_profile(p99_ms: float, rates: tuple[float, float]) -> ProfileReport:
    """A profile of cpu=1 at two load levels (`rates` answers a second, one replica) that chose it, its p99
    `p99_ms` (95% interval within 10%) and its median half that, at both."""
    trials = [succeeded(index, "1", p99_ms) for index in (0, 1)]
    for trial, concurrency, rate in zip(trials, ("1", "8"), rates, strict=True):
        trial.parameters = {"cpu": "1", "concurrency": concurrency}
        assert trial.stage is not None
        trial.stage.throughput_rps = rate
    return report_with(trials, level_name="concurrency", best_trial=1)
