"""Progress of a load test on stderr: the lines themselves (pure functions), and `python -m kaliper.loadgen run`
against a real HTTP server on loopback (the ground-truth server of bench/groundtruth), whose stdout stays the
results document."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kaliper.loadgen import progress
from kaliper.loadgen.progress import StageProgress
from kaliper.loadgen.recorder import Window
from kaliper.measure.histogram import LatencyHistogram
from kaliper.report.schema import LoadTestResult
from tests.support.groundtruth import groundtruth

OIP = {"protocol": "oip-v2", "modelName": "truth"}
BODY = {"inline": '{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}]}'}
SHORT = {"warmup": "1s", "minDuration": "3s", "maxDuration": "3s", "stopping": {"window": "1s"}}


def test_stage_started_line() -> None:
    assert (
        progress.stage_started_line(0, 8, "closed", 1, 3, 3)
        == "stage 0 starting: 8 users, closed loop; warm-up 1s, then measuring for 3s"
    )
    assert (
        progress.stage_started_line(2, 150.5, "open", 10, 30, 300)
        == "stage 2 starting: 150.5 req/s, open loop; warm-up 10s, then measuring for 30s to 300s"
    )
    assert (
        progress.stage_started_line(0, 2, "trace", 1, 30, 300, 6)
        == "stage 0 starting: the trace at 2x speed; warm-up 1s, then measuring 6s to its last send, then its answers"
    )


def test_measuring_and_done_lines() -> None:
    assert (
        progress.measuring_line(1, 12.4, 10, 4321, 431.06, 99, 24.734, "p99 confidence interval is 7.5% wide")
        == "stage 1: 12s, measured 10s, 4321 requests, 431.1 ok/s, p99 24.73ms; p99 confidence interval is 7.5% wide"
    )
    assert (
        progress.measuring_line(0, 2, 1, 0, 0.0, 99.9, None, "measuring")
        == "stage 0: 2s, measured 1s, 0 requests, 0.0 ok/s, p99.9 -; measuring"
    )
    assert progress.warming_up_line(3, 0.6) == "stage 3: 1s, warming up"
    assert progress.stage_done_line(0, "reached maxDuration (3s)") == "stage 0 done: reached maxDuration (3s)"
    assert progress.stopped_line("the target is down") == "stopped: the target is down"


def window(index: int, requests: int, errors: int) -> Window:
    return Window(stage=1, index=index, requests=requests, errors=Counter({"HTTP 503": errors} if errors else {}))


def test_a_window_update_sums_the_measured_windows() -> None:
    cumulative = LatencyHistogram()
    for _ in range(198):
        cumulative.record(0.002)  # below 2048 us: exact in the histogram
    for _ in range(2):
        cumulative.record(0.050)
    out = io.StringIO()
    reporter = StageProgress(out)
    reporter.window(1, 3.6, [window(1, 100, 2), window(2, 100, 0)], 1.0, cumulative, 99, "waiting for 3 windows")
    reporter.window(1, 0.9, [], 1.0, LatencyHistogram(), 99, "measuring")
    reporter.done(1, "reached maxDuration (2s)")
    assert out.getvalue().splitlines() == [
        "stage 1: 4s, measured 2s, 200 requests, 99.0 ok/s, p99 2.00ms; waiting for 3 windows",
        "stage 1: 1s, warming up",
        "stage 1 done: reached maxDuration (2s)",
    ]


def test_every_update_is_one_plain_line() -> None:
    out = io.StringIO()
    StageProgress(out).stopped("every request failed\n  (\x1b[31mConnectionRefusedError x12\x1b[0m)")
    assert out.getvalue() == "stopped: every request failed ([31mConnectionRefusedError x12[0m)\n"


def test_progress_can_be_turned_off() -> None:
    out = io.StringIO()
    progress.set_enabled(False)
    try:
        StageProgress(out).done(0, "stable")
    finally:
        progress.set_enabled(True)
    assert out.getvalue() == ""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with groundtruth("-median", "5ms", "-sigma", "0.3") as base:
        yield base


def run(tmp_path: Path, config: dict, *flags: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "kaliper.loadgen", *flags, "run", str(path), "--output", "-"],
        capture_output=True,
        text=True,
        timeout=120,
    )


MEASURING = re.compile(r"^stage 0: \d+s, measured ([123])s, (\d+) requests, [\d.]+ ok/s, p99 [\d.]+ms; (.*)$")


def test_run_prints_progress_on_stderr_and_the_results_on_stdout(tmp_path: Path, server: str) -> None:
    process = run(
        tmp_path, {"url": server, "request": OIP, "payload": BODY, "load": {"closedLoop": {"concurrency": 2}, **SHORT}}
    )
    assert process.returncode == 0, process.stderr
    result = LoadTestResult.model_validate_json(process.stdout)  # stdout is the document, nothing else
    assert result.ok and len(result.stages) == 1
    lines = process.stderr.splitlines()
    assert "\x1b" not in process.stderr  # not a terminal: plain text
    assert lines[0] == "stage 0 starting: 2 users, closed loop; warm-up 1s, then measuring for 3s"
    measuring = [found for found in map(MEASURING.match, lines) if found]
    assert measuring, process.stderr
    assert measuring[-1].group(1) == "3" and measuring[-1].group(3) == "reached maxDuration (3s)"
    # The measured windows' requests: the graceful stop's come after the last progress line.
    assert int(measuring[-1].group(2)) == result.stages[0].requests - result.stages[0].drained
    assert all(found.group(3) == "measuring" for found in measuring[:-1])
    done = lines.index("stage 0 done: reached maxDuration (3s)")
    assert done > lines.index(measuring[-1].group(0))
    assert lines[done + 1] == f"target {result.target}"  # then the summary, as before


def test_quiet_run_prints_only_the_summary(tmp_path: Path, server: str) -> None:
    process = run(
        tmp_path,
        {"url": server, "request": OIP, "payload": BODY, "load": {"closedLoop": {"concurrency": 2}, **SHORT}},
        "--quiet",
    )
    assert process.returncode == 0, process.stderr
    assert process.stderr.splitlines()[0].startswith("target ")
    assert "starting:" not in process.stderr and "done:" not in process.stderr
