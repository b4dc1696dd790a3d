"""A profile's prediction held to production, read from a real Prometheus (Debian's) scraping two real built-in
servers on loopback every second. Production's traffic is this test's own (not Kaliper's load generator): 400
requests, one at a time to each server. The servers batch with a 20 ms queue delay, so an answer takes at least
20 ms of the server's own time whatever the machine is doing: the bucket its percentiles fall in starts at
10 ms or above, which sets the verdicts against the scripted profiles below."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kaliper.metrics.production import ProductionError, read_production
from kaliper.metrics.prometheus import PrometheusMetrics
from kaliper.report.schema import ProfileReport
from kaliper.serving.examples import make_iris
from tests.support.builtin_server import IRIS_ROWS, serve
from tests.support.groundtruth import wait_http
from tests.support.paths import KALIPER
from tests.support.prometheus import instant_value, prometheus
from tests.support.sample_reports import report_with, succeeded

HISTOGRAM = "kaliper_server_request_seconds"
PER_SERVER = 200
BODY = json.dumps({"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": IRIS_ROWS[0]}]})
BUCKET_EDGES_MS = {0.0, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0}


def infer(base: str) -> None:
    request = urllib.request.Request(
        f"{base}/v2/models/iris/infer", data=BODY.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def wait_for(url: str, promql: str, expected: float, timeout: float = 30) -> None:
    """Until Prometheus's latest samples add up to `expected` (each scrape is a second apart)."""
    deadline = time.monotonic() + timeout
    while (found := instant_value(url, promql)) != expected:
        assert time.monotonic() < deadline, f"{promql} read {found}, not {expected}, for {timeout:g} s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float, float]]:
    """(Prometheus's URL, the window's seconds, its end): the window from the scrapes that saw each server's
    first answer to the one that saw its last."""
    iris = make_iris(tmp_path_factory.mktemp("models") / "iris.onnx")
    servers = [serve(iris, "--intra-op", "1", "--max-batch-size", "8", "--max-queue-delay", "20ms") for _ in "ab"]
    try:
        for _, base in servers:
            wait_http(f"{base}/v2/health/ready")
            infer(base)  # a model's series appear with its first answer
        with prometheus([base.removeprefix("http://") for _, base in servers]) as url:
            wait_for(url, f"count({HISTOGRAM}_count == 1)", 2)
            # The window starts at the older of the two samples that hold one answer each.
            start = instant_value(url, f"min(timestamp({HISTOGRAM}_count))")
            assert start is not None
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda base: [infer(base) for _ in range(PER_SERVER)], [b for _, b in servers]))
            wait_for(url, f"sum({HISTOGRAM}_count)", 2 + 2 * PER_SERVER)
            end = time.time()
            yield url, end - start + 0.001, end
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait()


def test_production_is_read_from_the_servers_own_histogram(production: tuple[str, float, float]) -> None:
    url, window_s, end = production
    found = read_production(PrometheusMetrics(url), '{job="test"}', HISTOGRAM, window_s, end, (50, 99))
    # Every answer after the first sample of each server, on two replicas (told apart by their scrape targets).
    assert (found.requests, found.replicas, found.latency_basis) == (2 * PER_SERVER, 2.0, "server")
    assert found.rate_rps == pytest.approx(found.requests / found.seconds / 2)
    for percentile in (50, 99):
        band = found.latency_ms[percentile]
        # Inside one of the server's buckets, which starts at 10 ms or more: the queue delay alone is 20 ms.
        assert band.low is not None and band.high is not None and band.low < band.value <= band.high
        assert {band.low, band.high} <= BUCKET_EDGES_MS and band.low >= 10.0


def test_a_selector_that_matches_nothing_says_so(production: tuple[str, float, float]) -> None:
    url, window_s, end = production
    with pytest.raises(ProductionError, match=r'no kaliper_server_request_seconds_count\{job="other"\} series'):
        read_production(PrometheusMetrics(url), 'job="other"', HISTOGRAM, window_s, end, (50,))


def profile(tmp_path: Path, p99_ms: float, rates: tuple[float, float]) -> Path:
    """A saved profile of cpu=1 at two load levels (`rates` answers a second, one replica), its p99 `p99_ms`
    (95% interval within 10%) and its median half that, at both."""
    trials = [succeeded(index, "1", p99_ms) for index in (0, 1)]
    for trial, concurrency, rate in zip(trials, ("1", "8"), rates, strict=True):
        trial.parameters = {"cpu": "1", "concurrency": concurrency}
        assert trial.stage is not None
        trial.stage.throughput_rps = rate
    report = report_with(trials, level_name="concurrency", best_trial=1)
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json(by_alias=True))
    assert ProfileReport.model_validate_json(path.read_text()).best_trial == 1
    return path


def compare(report: Path, production: tuple[str, float, float], *more: str) -> subprocess.CompletedProcess:
    url, window_s, end = production
    window = f"{window_s * 1000:.0f}ms"
    return subprocess.run(
        [str(KALIPER), "compare", str(report), "--from-prometheus", url, "--selector", 'job="test"', "--window", window,
         "--end", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(end)) + f".{int(end % 1 * 1e6):06d}+00:00", *more],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_deployment_slower_than_its_profile_is_said_and_fails_the_gate(
    production: tuple[str, float, float], tmp_path: Path
) -> None:
    done = compare(profile(tmp_path, 2.0, (1.0, 1000.0)), production, "--fail-if-regressed")
    assert done.returncode == 1, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("prediction does not hold: SlowerThanProfiled: p50 ")
    assert "above the profile's 1 ms" in last


def test_a_deployment_within_its_profile_holds(production: tuple[str, float, float], tmp_path: Path) -> None:
    done = compare(profile(tmp_path, 200.0, (1.0, 1000.0)), production, "--json")
    assert done.returncode == 0, done.stderr
    scored = json.loads(done.stdout)
    assert (scored["holds"], scored["reason"]) == (True, "Holds")
    assert scored["production"]["requests"] == 2 * PER_SERVER
    assert [f["figure"] for f in scored["figures"]] == ["p50 latency (ms)", "p99 latency (ms)"]


def test_load_the_profile_never_measured_is_said_not_extrapolated(
    production: tuple[str, float, float], tmp_path: Path
) -> None:
    done = compare(profile(tmp_path, 200.0, (5000.0, 6000.0)), production)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("prediction not judged: LoadOutsideProfile: ")
    assert "outside the profiled 5000-6000 requests/s: not extrapolated" in done.stdout


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ((), "give the run to compare (NEW) after BASELINE, or --from-prometheus URL"),
        (("other.json", "--from-prometheus", "http://127.0.0.1:9"), "drop NEW and --html"),
        (("--from-prometheus", "http://127.0.0.1:9", "--runtime", "llamacpp"),
         "'llamacpp' exports no latency histogram Kaliper reads; one of: onnxruntime, vllm"),
        (("--from-prometheus", "http://127.0.0.1:9", "--configuration", "cpu"), "'cpu': give NAME=VALUE"),
        (("--from-prometheus", "http://127.0.0.1:9", "--configuration", "cpu=9"),
         "demo has no succeeded trial of cpu=9: check --configuration"),
        (("--from-prometheus", "http://127.0.0.1:9", "--window", "soon"), "Invalid value for --window"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_option(tmp_path: Path, arguments: tuple[str, ...], said: str) -> None:
    from click.testing import CliRunner

    from kaliper.cli import main

    report = str(profile(tmp_path, 200.0, (1.0, 1000.0)))
    done = CliRunner().invoke(main, ["compare", report, *arguments])
    assert done.exit_code == 2 and said in " ".join(done.output.split()), done.output


def test_a_prometheus_that_does_not_answer_is_said(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(KALIPER), "compare", str(profile(tmp_path, 200.0, (1.0, 1000.0))), "--from-prometheus",
         "http://user:secret@127.0.0.1:9"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and "cannot reach Prometheus at http://user:***@127.0.0.1:9" in done.stderr
    assert "secret" not in done.stderr
