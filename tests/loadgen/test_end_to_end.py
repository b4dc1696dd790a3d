"""The load generator end to end: `python -m kaliper.loadgen` against a real HTTP server on loopback (the
ground-truth server of bench/groundtruth), in both load models, one and several processes."""

from __future__ import annotations

import itertools
import json
import math
import socketserver
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaliper.loadgen.results import summarize
from kaliper.netutil import free_port
from kaliper.profiling.decisions import error_rate_check
from tests.support.groundtruth import (
    binary,
    groundtruth,
    records,
    served_in_measured_window,
    wait_http,
    wait_served_for,
)
from tests.support.loadgen_run import run_loadgen

OIP = {"protocol": "oip-v2", "modelName": "truth"}
BODY = {"inline": '{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}]}'}
SHORT = {"warmup": "1s", "minDuration": "3s", "maxDuration": "3s", "stopping": {"window": "1s"}}


def percentile(figures: Any, p: float) -> float:
    found = figures.at(p)
    assert found is not None and found.value_ms is not None
    return found.value_ms


@pytest.fixture(scope="module")
def server() -> Any:
    with groundtruth("-median", "20ms", "-sigma", "0.3", "-fail-every", "50") as base:
        yield base


def test_closed_loop_with_two_levels(tmp_path: Path, server: str) -> None:
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": OIP,
            "payload": BODY,
            "levels": [2, 8],
            "load": {"closedLoop": {"concurrency": 2}, **SHORT},
        },
    )
    assert process.returncode == 0, process.stderr
    assert result is not None and result.ok
    assert [s.level for s in result.stages] == [2, 8]
    for stage in result.stages:
        assert stage.load_model == "closed" and stage.measured_s == 3 and stage.warmup_s == 1
        # The server's own count of the requests it received in the measured window.
        served = served_in_measured_window(server, stage)
        assert len(served) > 50 and abs(len(served) - stage.requests) <= stage.level
        # The measured windows' requests, and those the graceful stop awaited: at most a request per user, and
        # every one answered (20 ms against the default grace of the 10 s timeout).
        assert sum(w.requests for w in stage.windows if not w.warmup) + stage.drained == stage.requests
        assert stage.drained <= stage.level and stage.in_flight_at_end == 0
        # The answered requests are in the latency histogram, the failures in their own: none dropped.
        assert stage.failure_time is not None
        assert (stage.latency.count, stage.failure_time.count) == (stage.requests - stage.errors, stage.errors)
        # Every 50th request is a 503: counted by kind, never dropped.
        assert stage.errors_by_kind.keys() == {"HTTP 503"}
        assert stage.errors == pytest.approx(stage.requests / 50, abs=3)
        values = [percentile(stage.latency, p) for p in (50, 90, 95, 99)]
        assert values == sorted(values)
        p99 = stage.latency.at(99)
        assert p99.ci_low_ms <= p99.value_ms and (p99.ci_high_ms is None or p99.value_ms <= p99.ci_high_ms)
        assert stage.stop_reason == "reached maxDuration (3s)"
        # Network accounting: every request is the same bytes, written out here by hand (HTTP/1.1, RFC 9112):
        # 70 bytes of JSON body under a head of 139 bytes plus the port's digits.
        port = int(server.rsplit(":", 1)[1])
        raw = (
            f"POST /v2/models/truth/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\nUser-Agent: kaliper-loadgen\r\nContent-Length: 70\r\n\r\n"
            + BODY["inline"]
        )
        assert len(raw) == 209 + len(str(port))
        assert stage.bytes_sent == stage.requests * len(raw)
        assert stage.bytes_received > stage.requests * 100  # a status line, headers and a JSON body each
    assert result.stages[1].throughput_rps > result.stages[0].throughput_rps  # more users, more throughput
    assert "stage 1: 8 users" in process.stderr  # the human summary


def test_closed_loop_agrees_with_the_servers_own_records(tmp_path: Path) -> None:
    with groundtruth("-median", "30ms", "-sigma", "0.3") as base:
        process, result = run_loadgen(
            tmp_path,
            {"url": base, "request": OIP, "payload": BODY, "load": {"closedLoop": {"concurrency": 4}, **SHORT}},
        )
        assert process.returncode == 0, process.stderr
        stage = result.stages[0]
        truth = served_in_measured_window(base, stage)
    assert abs(len(truth) - stage.requests) <= 4  # the users
    median = truth[len(truth) // 2]
    # A ratio against the server's own measurement, loose enough for a loaded CI machine.
    assert percentile(stage.latency, 50) == pytest.approx(median, rel=0.1)


def test_open_loop_keeps_its_schedule_and_reports_corrected_latency(tmp_path: Path, server: str) -> None:
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": OIP,
            "payload": BODY,
            "load": {"openLoop": {"rate": 100, "maxConnections": 32}, **SHORT},
        },
    )
    assert process.returncode == 0, process.stderr
    stage = result.stages[0]
    assert stage.load_model == "open" and result.generator.connections == 32
    assert stage.requests == pytest.approx(300, abs=15)  # 100 req/s for 3 s, whatever the latency
    for p in (50, 90, 99):  # measured from the intended send time, never below the service time
        assert percentile(stage.latency, p) >= percentile(stage.service_time, p)


def test_open_loop_with_too_few_connections_is_flagged(tmp_path: Path) -> None:
    with groundtruth("-median", "200ms", "-sigma", "0.1") as base:
        process, result = run_loadgen(
            tmp_path,
            {
                "url": base,
                "request": OIP,
                "payload": BODY,
                "load": {"openLoop": {"rate": 50, "maxConnections": 2}, **SHORT},
            },
        )
        assert process.returncode == 0, process.stderr
        stage = result.stages[0]
        served = served_in_measured_window(base, stage)
    # Two connections to a 200 ms server carry 10 of the 50 sends a second: from the warm-up's backlog on,
    # every request the server served in the measured interval left late, each for want of a free connection.
    assert abs(len(served) - stage.requests) <= 2  # the connections
    assert stage.late_sends.count == stage.requests
    assert (stage.late_sends.no_free_connection, stage.late_sends.generator_lag) == (stage.requests, 0)
    assert stage.late_sends.flagged and stage.late_sends.share > 0.5
    assert "raise load.openLoop.maxConnections" in stage.late_sends.reason
    assert result.warnings == [stage.late_sends.reason]
    # Requests queued behind busy connections: what users see is far above what the server took.
    assert percentile(stage.latency, 90) > 2 * percentile(stage.service_time, 90)


def test_several_processes_merge_into_one_result(tmp_path: Path, server: str) -> None:
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": OIP,
            "payload": BODY,
            "load": {"openLoop": {"rate": 120, "maxConnections": 40}, "processes": 2, **SHORT},
        },
    )
    assert process.returncode == 0, process.stderr
    assert "spawn rate" not in process.stderr  # Locust's advice about starting 40 users at once: not asked for
    stage = result.stages[0]
    assert result.generator.processes == 2
    assert stage.requests == pytest.approx(360, abs=20)  # each process sent half of the schedule
    failed = stage.failure_time.count if stage.failure_time else 0
    assert (stage.latency.count, failed) == (stage.requests - stage.errors, stage.errors)


def test_gamma_arrivals_reach_the_server_with_the_rate_and_burstiness_asked(tmp_path: Path) -> None:
    # Two processes share one gamma schedule of shape 0.25: 200 sends a second on average, in bursts (the gaps'
    # coefficient of variation 2, where a Poisson process has 1 and two copies of one schedule would pair sends).
    with groundtruth("-median", "2ms", "-sigma", "0.05") as base:
        load = {"openLoop": {"rate": 200, "arrival": "gamma", "burstiness": 0.25, "maxConnections": 64}}
        process, result = run_loadgen(
            tmp_path,
            {
                "url": base,
                "request": OIP,
                "payload": BODY,
                "seed": 11,
                "load": {**load, "processes": 2, "warmup": "1s", "minDuration": "6s", "maxDuration": "6s"},
            },
        )
        assert process.returncode == 0, process.stderr
        stage = result.stages[0]
        start = stage.started_at.timestamp() + stage.warmup_s
        arrivals = sorted(done - ms / 1000 for done, ms in records(base)[1] if start <= done - ms / 1000 < start + 6)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert len(arrivals) == pytest.approx(1200, rel=0.15)
    assert statistics.fmean(gaps) == pytest.approx(0.005, rel=0.15)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(2.0, rel=0.15)
    # Every connection a burst needed was free. How many sends the machine's own scheduling leaves late is a
    # figure of the host (1.3-9.3% more than 2 ms late on one whose idle CPUs wake late), measured by
    # bench/arrivals.py, not bounded here.
    assert stage.late_sends.no_free_connection == 0


def test_a_linear_ramp_reaches_the_server_at_the_rate_of_each_segment(tmp_path: Path) -> None:
    # 100 requests a second through the warm-up, then steadily up to 300 over 4 s: the segments' mean rates
    # are 125, 175, 225 and 275 a second, so that many requests arrive in each second of the measurement.
    with groundtruth("-median", "2ms", "-sigma", "0.05") as base:
        ramp = {"to": 300, "segments": 4}
        load = {"openLoop": {"rate": 100, "ramp": ramp}, "warmup": "1s", "minDuration": "4s", "maxDuration": "4s"}
        process, result = run_loadgen(
            tmp_path, {"url": base, "request": OIP, "payload": BODY, "seed": 5, "load": {**load, "processes": 2}}
        )
        assert process.returncode == 0, process.stderr
        stage = result.stages[0]
        start = stage.started_at.timestamp() + stage.warmup_s
        arrivals = [done - ms / 1000 - start for done, ms in records(base)[1]]
    per_second = [sum(1 for t in arrivals if i <= t < i + 1) for i in range(4)]
    assert per_second == pytest.approx([125, 175, 225, 275], abs=4)
    assert [s.intended_rps for s in stage.segments] == [125, 175, 225, 275]
    assert [s.throughput_rps for s in stage.segments] == pytest.approx([125, 175, 225, 275], rel=0.05)
    assert all(s.p99_ms is not None and s.p99_ms < 50 for s in stage.segments)
    assert "ramp 3-4s: 275 req/s asked, " in process.stderr


def test_a_stepped_closed_loop_ramp_keeps_as_many_requests_at_the_server_as_it_has_users(tmp_path: Path) -> None:
    # 1, 2, 3 then 4 users for a second each after the warm-up, against a server answering in 50 ms: the
    # server's own records say how many requests it held at once in each second (its busy time in the second).
    with groundtruth("-median", "50ms", "-sigma", "0.02") as base:
        ramp = {"to": 4, "shape": "stepped", "segments": 4}
        load = {
            "closedLoop": {"concurrency": 1, "ramp": ramp},
            "warmup": "1s",
            "minDuration": "4s",
            "maxDuration": "4s",
        }
        process, result = run_loadgen(tmp_path, {"url": base, "request": OIP, "payload": BODY, "load": load})
        assert process.returncode == 0, process.stderr
        stage = result.stages[0]
        start = stage.started_at.timestamp() + stage.warmup_s
        served = [(done - ms / 1000 - start, done - start) for done, ms in records(base)[1]]

    def busy(second: int) -> float:
        """Seconds of service the server gave within [second, second + 1): the requests it held at once."""
        return sum(max(0.0, min(end, second + 1) - max(began, second)) for began, end in served)

    # Each user loses its own turnaround between answers (1-2% here), and a user the ramp adds starts when the
    # worker process has the master's spawn message: once 170 ms late on this 2-core host (busy 2.82 of 3).
    assert [busy(i) for i in range(4)] == pytest.approx([1, 2, 3, 4], abs=0.2)
    assert [s.intended_users for s in stage.segments] == [1, 2, 3, 4]
    assert [s.intended_rps for s in stage.segments] == [None, None, None, None]
    # Each user sends a request every 50 ms or so: 20, 40, 60 and 80 answers a second.
    assert [s.throughput_rps for s in stage.segments] == pytest.approx([20, 40, 60, 80], rel=0.1)
    assert "ramp 3-4s: 4 users asked, " in process.stderr


def two_seconds_against_a_slow_server(
    tmp_path: Path, median: str, timeout: str, request: dict | None = None, **load: object
):  # type: ignore[no-untyped-def]
    """Two closed-loop users for 2 s (no warm-up) against a ground-truth server answering in about `median`."""
    with groundtruth("-median", median, "-sigma", "0.01") as base:
        load = {"closedLoop": {"concurrency": 2}, "warmup": "0s", "minDuration": "2s", "maxDuration": "2s", **load}
        return run_loadgen(
            tmp_path,
            {"url": base, "request": {**(request or OIP), "timeout": timeout}, "payload": BODY, "load": load},
        )


def test_timeouts_are_errors_with_their_time_to_failure(tmp_path: Path) -> None:
    process, result = two_seconds_against_a_slow_server(tmp_path, "2s", "300ms")
    # The preflight request timed out too, but a timeout is not "unreachable": the run goes on.
    stage = result.stages[0] if result and result.stages else None
    assert stage is not None, process.stderr
    assert set(stage.errors_by_kind) == {"timeout"} and stage.error_rate == 1
    # A timeout is no answer: no latency figure, and its time to failure is the timeout.
    assert stage.latency.count == 0 and stage.service_time.count == 0
    assert percentile(stage.failure_time, 50) >= 300


def test_a_first_request_answered_with_an_error_leads_the_warnings(tmp_path: Path) -> None:
    """Every request answered 503 (the server sheds load): measured, and the first answer, with the server's
    words, is the results' first warning, as a gRPC target's first call is."""
    with groundtruth("-median", "5ms", "-sigma", "0.05", "-fail-every", "1") as base:
        load = {"closedLoop": {"concurrency": 1}, "warmup": "0s", "minDuration": "1s", "maxDuration": "1s"}
        process, result = run_loadgen(tmp_path, {"url": base, "request": OIP, "payload": BODY, "load": load})
    assert process.returncode == 0, process.stderr
    assert result.warnings[0] == (
        'the first request failed: HTTP 503: {"outputs":[{"name":"y","shape":[1],"datatype":"FP32","data":[1.0]}]}'
    )
    assert result.stages[0].errors_by_kind == {"HTTP 503": result.stages[0].requests}


def test_unreachable_target_fails_fast_with_a_clear_error(tmp_path: Path) -> None:
    started = time.monotonic()
    process, result = run_loadgen(
        tmp_path,
        {
            "url": f"http://127.0.0.1:{free_port()}",
            "request": OIP,
            "payload": BODY,
            "load": {"closedLoop": {"concurrency": 2}, "maxDuration": "5m"},
        },
    )
    assert time.monotonic() - started < 30  # not the 5 minutes asked for: a hang guard, not a benchmark
    assert process.returncode == 1
    assert result is not None and not result.ok and result.stages == []
    assert "is unreachable: ConnectionRefusedError" in result.error
    assert "ERROR: target" in process.stderr


def test_bad_input_is_refused_before_anything_starts(tmp_path: Path) -> None:
    process, _ = run_loadgen(
        tmp_path, {"url": "http://127.0.0.1:1", "request": OIP, "payload": BODY, "load": {"openLoop": {"rate": 0}}}
    )
    assert process.returncode == 2
    assert "load.openLoop.rate" in process.stderr

    dataset = tmp_path / "requests.jsonl"
    dataset.write_text('{"ok": 1}\n{"broken": \n')
    process, _ = run_loadgen(
        tmp_path,
        {
            "url": "http://127.0.0.1:1",
            "request": {"protocol": "http-json"},
            "payload": {"dataset": {"file": str(dataset)}},
            "load": {"closedLoop": {"concurrency": 1}},
        },
    )
    assert process.returncode == 2
    assert "requests.jsonl, line 2: not valid JSON" in process.stderr


def test_results_document_is_versioned_json(tmp_path: Path, server: str) -> None:
    run_loadgen(
        tmp_path, {"url": server, "request": OIP, "payload": BODY, "load": {"closedLoop": {"concurrency": 1}, **SHORT}}
    )
    document = json.loads((tmp_path / "result.json").read_text())
    assert document["schemaVersion"] == "kaliper.dev/loadtest/v2"
    assert document["stages"][0]["latency"]["histogram"]  # the encoded HDR histogram travels along


def test_stopping_rule_ends_a_stable_measurement_early(tmp_path: Path, server: str) -> None:
    stopping = {"window": "1s", "stableWindows": 3, "tolerance": 0.5, "percentile": 50, "maxRelativeCiWidth": 0.5}
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": OIP,
            "payload": BODY,
            "load": {
                "closedLoop": {"concurrency": 4},
                "warmup": "1s",
                "minDuration": "3s",
                "maxDuration": "60s",
                "stopping": stopping,
            },
        },
    )
    assert process.returncode == 0, process.stderr
    stage = result.stages[0]
    assert stage.stop_reason.startswith("stable: last 3 windows within 50%")
    assert 3 <= stage.measured_s < 60


def two_users_of(port: int, **durations: str) -> dict:
    """Two closed-loop users against the ground-truth server on `port`, in 1 s windows after a 1 s warm-up."""
    load = {"closedLoop": {"concurrency": 2}, "warmup": "1s", **durations, "stopping": {"window": "1s"}}
    return {"url": f"http://127.0.0.1:{port}", "request": OIP, "payload": BODY, "load": load}


def test_a_target_that_goes_down_mid_run_ends_it_early(tmp_path: Path) -> None:
    port = free_port()
    target = subprocess.Popen(
        [str(binary()), "-addr", f"127.0.0.1:{port}", "-median", "5ms"], stderr=subprocess.DEVNULL
    )
    wait_http(f"http://127.0.0.1:{port}/_truth/records")

    def outage() -> None:
        wait_served_for(f"http://127.0.0.1:{port}", 2)  # the 1 s warm-up and a measured window
        target.kill()

    threading.Thread(target=outage, daemon=True).start()
    started = time.monotonic()
    process, result = run_loadgen(tmp_path, two_users_of(port, maxDuration="2m"))
    target.kill()  # already, unless the outage never came
    target.wait()
    assert time.monotonic() - started < 60  # a hang guard: maxDuration was two minutes
    assert process.returncode == 1 and result is not None
    # Stopped once it had answered nothing for 10 s, with what the stage measured before kept.
    assert result.error.startswith(
        "stage 0 stopped early: the target answered nothing for 10 s: every request of the last 10 windows failed "
        "(ConnectionRefusedError x"
    ), result.error
    (stage,) = result.stages
    assert stage.stop_reason.startswith("the target answered nothing for 10 s")
    # Refused once it was down; the two users' requests in flight at the kill, if any, were reset (seen in a
    # make check run), never more.
    errors = dict(stage.errors_by_kind)
    assert stage.requests - stage.errors > 50 and errors.pop("ConnectionRefusedError") > 0
    assert set(errors) <= {"ConnectionResetError"} and sum(errors.values()) <= 2, stage.errors_by_kind


def test_a_target_that_comes_back_is_measured_on(tmp_path: Path) -> None:
    """Down for 2 s of a 10 s stage: measured through, the outage counted as the errors it is, and as the fifth
    of the time it took, though the users backing off sent few requests while it lasted."""
    port = free_port()
    command = [str(binary()), "-addr", f"127.0.0.1:{port}", "-median", "5ms"]
    target = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{port}/_truth/records")
    back: list[subprocess.Popen] = []

    def outage() -> None:
        wait_served_for(f"http://127.0.0.1:{port}", 2)  # the 1 s warm-up and a measured window
        target.kill()
        target.wait()
        time.sleep(2)  # the outage the test is about: two seconds without a server
        back.append(subprocess.Popen(command, stderr=subprocess.DEVNULL))

    outage_thread = threading.Thread(target=outage)
    outage_thread.start()
    try:
        process, result = run_loadgen(tmp_path, two_users_of(port, minDuration="10s", maxDuration="10s"))
    finally:
        outage_thread.join()
        for server in [target, *back]:
            server.kill()
            server.wait()
    assert process.returncode == 0, process.stderr
    (stage,) = result.stages
    assert stage.stop_reason == "reached maxDuration (10s)"
    assert set(stage.errors_by_kind) == {"ConnectionRefusedError"}
    answered = [w.requests - w.errors for w in stage.windows if not w.warmup]
    assert answered[0] > 50 and answered[-1] > 50  # before the outage and after it
    # About a fifth of the time failed (2 of 10 s, and however long the server took to start again: the
    # outage's exact share is test_an_outage_reads_as_the_share_of_the_time_it_took's, on a server that
    # records it), while the users backing off as real clients do sent few requests: not the flood of instant
    # refusals that resending at once makes (over 90% of the requests).
    assert 0.1 <= stage.error_time_share <= 0.45
    assert stage.error_rate < 0.1 and stage.backoffs is not None and stage.backoffs.retry_after == 0
    assert stage.backoffs.seconds <= 2 * stage.measured_s  # two users: never more waiting than there was time
    # The users backed off, so few requests failed; the error budget judges the time the outage took.
    check = error_rate_check(stage, 0.05)
    assert check.verdict == "NotMet", check


@pytest.mark.parametrize(("down_s", "verdict"), [(2.0, "Met"), (2.5, "NotMet")])
def test_an_outage_reads_as_the_share_of_the_time_it_took(tmp_path: Path, down_s: float, verdict: str) -> None:
    """A server that answers 503 to everything for 2 s (2.5 s) of a 10 s stage, on its own clock and in its own
    record: sixteen users backing off with jittered waits, and the share of the time failing reads the outage's
    share within two points (the users' last waits, whose course the requests sent in them show). An error
    budget of 22.5% passes the 20% outage and fails the 25% one."""
    flags = ("-median", "20ms", "-sigma", "0.1", "-down-at-request", "1200", "-down-for", f"{down_s}s")
    with groundtruth(*flags) as base:
        load = {"closedLoop": {"concurrency": 16}, "warmup": "1s", "minDuration": "10s", "maxDuration": "10s"}
        process, result = run_loadgen(tmp_path, {"url": base, "request": OIP, "payload": BODY, "load": load})
        down_from, down_until = json.loads(urllib.request.urlopen(f"{base}/_truth/records", timeout=10).read())["down"]
    assert process.returncode == 0, process.stderr
    (stage,) = result.stages
    start = stage.started_at.timestamp() + stage.warmup_s
    assert start < down_from and down_until < start + stage.measured_s  # the whole outage was measured
    assert stage.measured_s == 10.0 and set(stage.errors_by_kind) == {"HTTP 503"}
    assert stage.error_time_share == pytest.approx(down_s / 10, abs=0.02)
    assert error_rate_check(stage, 0.225).verdict == verdict


def test_master_without_workers_gives_up_with_a_reason(tmp_path: Path, server: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump({"url": server, "request": OIP, "payload": BODY, "load": {"closedLoop": {"concurrency": 1}}})
    )
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "kaliper.loadgen",
            "master",
            str(path),
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{free_port()}",
            "--join-timeout",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 1
    assert "only 0 of 2 load-generator workers connected and ready within 2s" in process.stdout


# A Locust worker that connects (Locust counts it) but registers none of Kaliper's handlers, as a Kaliper worker
# is in the instant between connecting and registering them.
PLAIN_LOCUST_WORKER = """
import sys
from locust import User
from locust.env import Environment

class Nobody(User):
    pass

Environment(user_classes=[Nobody]).create_worker_runner("127.0.0.1", int(sys.argv[1])).greenlet.join()
"""


def test_the_master_sends_no_stage_before_each_worker_says_it_is_ready(tmp_path: Path, server: str) -> None:
    """Locust counts a worker once it connects, before the worker has registered the handler of Kaliper's stage
    message; a stage sent then was dropped and the users failed to start (seen once in a full run). The master
    waits for each worker's own ready message: a worker that only connects is not enough."""
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump({"url": server, "request": OIP, "payload": BODY, "load": {"closedLoop": {"concurrency": 1}}})
    )
    port = free_port()
    worker = subprocess.Popen([sys.executable, "-c", PLAIN_LOCUST_WORKER, str(port)], stderr=subprocess.DEVNULL)
    try:
        process = subprocess.run(
            [sys.executable, "-m", "kaliper.loadgen", "master", str(path), "--workers", "1",
             "--bind", f"127.0.0.1:{port}", "--join-timeout", "3"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        worker.kill()
        worker.wait()
    assert process.returncode == 1
    assert "only 0 of 1 load-generator workers connected and ready within 3s" in process.stdout


@pytest.mark.parametrize(
    ("request_spec", "processes"),
    [(OIP, 1), (OIP, 2), ({"protocol": "oip-v2-grpc", "modelName": "truth"}, 1)],
    ids=["http", "two-processes", "grpc"],
)
def test_requests_in_flight_when_measuring_ends_are_awaited_and_recorded(
    tmp_path: Path, request_spec: dict, processes: int
) -> None:
    """Every answer takes 4 s, the stage measures 2 s: nothing completes in it. The graceful stop (by default
    the 10 s request timeout) awaits the two users' requests and records them with their real latency; the
    stage is never one of zero requests, nor one whose requests are counted as beyond every bound. In this
    process, in two worker processes (each drains its own), and in the gRPC client process."""
    process, result = two_seconds_against_a_slow_server(tmp_path, "4s", "10s", request_spec, processes=processes)
    assert process.returncode == 0, process.stderr
    (stage,) = result.stages
    assert (stage.requests, stage.errors, stage.drained, stage.in_flight_at_end) == (2, 0, 2, 0)
    # The server's 4 s (sigma 0.01), sent at the start: a busy machine only adds to it (a full run on three
    # workers read 4,256 ms through the gRPC client process), and a second of room still tells it from the 10 s
    # grace or a latency beyond every bound.
    assert 3900 <= percentile(stage.latency, 50) <= 5000
    assert stage.throughput_rps == 0.0  # none was answered within the measured 2 s
    assert 0 < stage.drain_s <= 4.0  # awaited until the answers came (the 4 s answers), not the whole 10 s grace
    assert "  graceful stop: 2 requests in flight when measuring ended, awaited " in summarize(result)


def test_requests_still_in_flight_after_the_graceful_stop_are_counted(tmp_path: Path) -> None:
    """The same with gracefulStop 1s: the two requests are still unanswered when it ends, counted as in flight
    at the stage's end (beyond every bound), never as a stage of zero requests and zero errors."""
    process, result = two_seconds_against_a_slow_server(tmp_path, "4s", "10s", gracefulStop="1s")
    assert process.returncode == 0, process.stderr
    (stage,) = result.stages
    assert (stage.requests, stage.errors, stage.drained, stage.in_flight_at_end) == (0, 0, 0, 2)
    assert 2.5 <= stage.in_flight_oldest_s <= 4.5  # sent at the stage's start, 2 s + 1 s of grace before
    assert "  2 requests still in flight when the stage ended (the oldest for" in summarize(result)


class _ClosesAfterEachAnswer(socketserver.BaseRequestHandler):
    """Answers one request per connection and closes it without saying so (no Connection: close), as a
    server with a short keep-alive timeout does: the client finds its kept-alive connection dead."""

    def handle(self) -> None:
        # A connection the client closes unanswered (the run ended) ends the handler: reading on would get b""
        # forever, a thread spinning in this pytest process for the rest of its session (seen: 0.5-0.7 of a core
        # in the worker that ran this test, for its last ten minutes).
        data = b""
        while b"\r\n\r\n" not in data:
            if not (chunk := self.request.recv(65536)):
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(v) for k, _, v in (h.partition(b":") for h in head.split(b"\r\n")) if k.lower() == b"content-length"
        )
        while len(body) < length:
            if not (chunk := self.request.recv(65536)):
                return
            body += chunk
        answer = b'{"outputs":[]}'
        self.request.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer)
        )
        time.sleep(0.01)  # closed once the client has read the answer, before it sends again


def test_requests_resent_after_the_server_closed_the_connection_are_in_the_summary(tmp_path: Path) -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _ClosesAfterEachAnswer)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        load = {"closedLoop": {"concurrency": 1}, "warmup": "0s", "minDuration": "2s", "maxDuration": "2s"}
        url = f"http://127.0.0.1:{server.server_address[1]}"
        process, result = run_loadgen(tmp_path, {"url": url, "request": OIP, "payload": BODY, "load": load})
    finally:
        server.shutdown()
    assert process.returncode == 0, process.stderr
    (stage,) = result.stages
    # Every request after the first found its kept-alive connection closed and was sent again: not an error.
    assert stage.errors == 0 and stage.requests > 20 and stage.resent >= stage.requests - 1
    assert (
        f"  {stage.resent} requests sent again on a new connection: the server had closed a kept-alive one before "
        "answering (not errors)"
    ) in summarize(result).splitlines()


@pytest.mark.parametrize(
    "stall_at", [151, 451], ids=["a stall across the warm-ups end", "a stall across the measurements end"]
)
def test_each_request_counts_in_the_window_it_was_sent_in(tmp_path: Path, stall_at: int) -> None:
    """Open loop at 100 requests per second, 2 s of warm-up, 3 s measured; the server holds every request that
    arrives for 1 s from the arrival of request `stall_at` on (151: 1.5 s into the stage, so the 50 requests
    sent in the warm-up's last half second are answered in the measurement's first; 451: 4.5 s, so those sent in
    its last half second are answered after it). Each edge keeps the requests sent on its side: the stage
    counts the 300 sends of its window, as many as the server received in it (351 at the warm-up's end before),
    and its corrected percentiles are the server's own latencies of those requests, within 5%. A send the
    generator made late (a new connection while the stall holds a hundred) can cross an edge: the server's count
    is taken with the edges 50 ms (five sends) in and out."""
    with groundtruth(
        "-median", "100ms", "-sigma", "0.1", "-stall-at-request", str(stall_at), "-stall-for", "1s"
    ) as base:
        load = {"openLoop": {"rate": 100, "maxConnections": 300}, **SHORT, "warmup": "2s"}
        process, result = run_loadgen(tmp_path, {"url": base, "request": OIP, "payload": BODY, "load": load})
        assert process.returncode == 0, process.stderr
        (stage,) = result.stages
        start = stage.started_at.timestamp() + stage.warmup_s
        arrived = [(done - ms / 1000, ms) for done, ms in records(base)[1]]

    def received(margin_s: float) -> list[float]:
        return sorted(ms for at, ms in arrived if start - margin_s <= at < start + stage.measured_s + margin_s)

    assert 295 <= stage.requests <= 305 and (stage.errors, stage.in_flight_at_end) == (0, 0)
    assert len(received(-0.05)) <= stage.requests <= len(received(0.05))
    truth = received(0.0)
    for p in (50, 90, 99):
        rank = math.ceil(len(truth) * p / 100) - 1
        assert percentile(stage.latency, p) == pytest.approx(truth[rank], rel=0.05), p
