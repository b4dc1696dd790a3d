"""A profile's prediction held to production by `kaliper compare --from-prometheus`, read from a real Prometheus
(Debian's) scraping two real built-in servers on loopback every second, production's traffic this test's own: 400
requests, one at a time to each server (tests/support/production.py says why the verdicts against the scripted
profiles below do not depend on the machine)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaliper.metrics.production import ProductionError, read_production
from kaliper.metrics.prometheus import PrometheusMetrics
from kaliper.serving.examples import make_iris
from tests.support.builtin_server import serve
from tests.support.groundtruth import wait_http
from tests.support.paths import KALIPER
from tests.support.production import BATCHED, HISTOGRAM, infer, scripted_profile, send, wait_for_value
from tests.support.prometheus import instant_value, prometheus

PER_SERVER = 200
BUCKET_EDGES_MS = {0.0, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0}


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float, float]]:
    """(Prometheus's URL, the window's seconds, its end): the window from the scrapes that saw each server's
    first answer to the one that saw its last."""
    iris = make_iris(tmp_path_factory.mktemp("models") / "iris.onnx")
    servers = [serve(iris, *BATCHED) for _ in "ab"]
    try:
        for _, base in servers:
            wait_http(f"{base}/v2/health/ready")
            infer(base)  # a model's series appear with its first answer
        with prometheus([base.removeprefix("http://") for _, base in servers]) as url:
            wait_for_value(url, f"count({HISTOGRAM}_count == 1)", 2)
            # The window starts at the older of the two samples that hold one answer each.
            start = instant_value(url, f"min(timestamp({HISTOGRAM}_count))")
            assert start is not None
            send([base for _, base in servers], PER_SERVER)
            wait_for_value(url, f"sum({HISTOGRAM}_count)", 2 + 2 * PER_SERVER)
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
    path = tmp_path / "report.json"
    path.write_text(scripted_profile(p99_ms, rates).model_dump_json(by_alias=True))
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
    page = tmp_path / "page.html"
    done = compare(profile(tmp_path, 200.0, (1.0, 1000.0)), production, "--json", "--html", str(page))
    assert done.returncode == 0, done.stderr
    # What a ModelDeployment's status.production says (spec.prediction), for the profile and configuration compared.
    scored = json.loads(done.stdout)
    assert (scored["holds"], scored["reason"], scored["requests"]) == (True, "Holds", 2 * PER_SERVER)
    assert (scored["profile"], scored["configuration"], scored["profiledRps"]) == (
        str(tmp_path / "report.json"), {"cpu": "1"}, [1.0, 1000.0]
    )  # fmt: skip
    assert [f["figure"] for f in scored["figures"]] == ["p50 latency (ms)", "p99 latency (ms)"]
    # The profile's page, production's percentiles drawn over its latency curves.
    text = page.read_text()
    assert "production p50 (Holds)" in text and "production p99 (Holds)" in text


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
        (("other.json", "--from-prometheus", "http://127.0.0.1:9"), "against production: drop NEW"),
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
