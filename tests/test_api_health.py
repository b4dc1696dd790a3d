"""The operator's handling of an API server that goes away, decided on scripted failures: what counts as an
outage, the backoff, the rate of calls, the lines logged. tests/outage/test_api_server_outage.py stops a real
API server."""

from __future__ import annotations

import io
import json
import logging
import threading

import urllib3
from kubernetes.client import ApiException

from kaliper.controllers.api_health import (
    ApiServerHealth,
    ExponentialBackoff,
    TokenBucket,
    WatchFailures,
    outage_reason,
    watch_outage_reason,
)
from kaliper.controllers.failure_log import FailureLog, failure_kind
from kaliper.log import RepeatedRetries, configure_logging, get_logger
from kaliper.report.publish import retryable


def api_exception(status: int, message: str = "") -> ApiException:
    exc = ApiException(status=status, reason="reason")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


def refused() -> urllib3.exceptions.MaxRetryError:
    cause = urllib3.exceptions.NewConnectionError(
        None, "Failed to establish a new connection: [Errno 111] Connection refused"
    )
    return urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces", cause)  # type: ignore[arg-type]


def test_an_outage_is_the_api_servers_failure_not_the_calls() -> None:
    assert outage_reason(refused()) == "refuses connections"
    timed_out = urllib3.exceptions.ReadTimeoutError(None, "/api", "Read timed out. (read timeout=60)")  # type: ignore[arg-type]
    assert outage_reason(timed_out) == "does not answer in time"
    assert outage_reason(api_exception(503)) == "answers 503 Service Unavailable"
    assert outage_reason(api_exception(504)) == "answers 504 Gateway Timeout"
    assert outage_reason(api_exception(500, "etcdserver: request timed out")) == (
        "answers 500: its storage (etcd) does not answer"
    )
    stopping = 'Service "t0" is invalid: failed to allocate IP: Post "https://127.0.0.1:6443/apis/networking.k8s.io/v1/ipaddresses": dial tcp 127.0.0.1:6443: connect: connection refused'  # noqa: E501
    assert outage_reason(api_exception(422, stopping)) == "answers 422: it cannot reach itself"
    # The object's own failures: the pacer backs off on them per object.
    assert outage_reason(api_exception(403, 'configmaps "x" is forbidden: exceeded quota')) is None
    assert outage_reason(api_exception(500, "Internal error occurred: failed calling webhook")) is None
    assert outage_reason(api_exception(422)) is None
    assert outage_reason(ValueError("a bug")) is None
    # The load generator's publish waits for the same failures, and gives up on a refusal at once.
    assert (retryable(refused()), retryable(api_exception(503)), retryable(api_exception(429))) == (True, True, True)
    assert (retryable(api_exception(403)), retryable(api_exception(422))) == (False, False)


def test_backoff_doubles_to_its_cap_with_jitter_from_the_upper_half() -> None:
    backoff = ExponentialBackoff(5.0, 300.0)
    assert [backoff.delay(n, lambda: 1.0) for n in (1, 2, 3, 4, 7, 8, 20)] == [5, 10, 20, 40, 300, 300, 300]
    assert [backoff.delay(n, lambda: 0.0) for n in (1, 2, 7)] == [2.5, 5.0, 150.0]


def test_the_token_bucket_lets_a_burst_through_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=10.0, burst=3, clock=lambda: now[0])
    assert [bucket.wait_s() for _ in range(5)] == [0.0, 0.0, 0.0, 0.1, 0.2]
    now[0] = 1.0  # a second later: the balance of -2 paid back, 8 tokens earned, at most the burst kept
    assert [bucket.wait_s() for _ in range(4)] == [0.0, 0.0, 0.0, 0.1]


def captured() -> io.StringIO:
    stream = io.StringIO()
    configure_logging("info", fmt="json", stream=stream)
    return stream


def events(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_an_outage_is_one_line_a_minute_and_one_when_it_is_back() -> None:
    stream = captured()
    now = [100.0]
    probes: list[Exception | None] = [refused(), refused(), refused(), None]
    probed, go = threading.Event(), threading.Event()

    def probe() -> None:
        assert go.wait(10)  # the prober waits for the test's calls below
        outcome = probes.pop(0)
        if outcome is not None:
            raise outcome
        probed.set()

    def sleep(stop: threading.Event, seconds: float) -> bool:
        now[0] += 40.0  # every wait passes 40 s of the scripted clock
        return stop.is_set()

    health = ApiServerHealth(probe, ExponentialBackoff(1.0, 30.0), clock=lambda: now[0], sleep=sleep)
    health.waiting = lambda: 595
    assert health.check(ValueError("a bug")) is False and health.reachable
    assert health.check(refused()) is True
    assert not health.reachable
    for _ in range(100):  # the other objects' calls in the same outage: counted, not logged
        assert health.check(refused()) is True
    go.set()
    assert probed.wait(10)
    health.stop()
    assert health.reachable
    messages = [e["event"] for e in events(stream)]
    assert messages == [
        "API server refuses connections: steps wait for it; probing /readyz with backoff up to 30 s",
        "API server refuses connections for 80 s: 595 steps waiting, 101 calls failed meanwhile",
        "API server back after 2 min 40 s: 595 steps resume; 101 calls failed while it was away",
    ]


# kopf's lines for its watches' failures, as a real API server's outage made them (tests/outage).
WATCH_REFUSED = (
    "Request attempt #1 failed; will retry: GET https://127.0.0.1:40121/api/v1/namespaces/refused/pods?watch=true"
    "&resourceVersion=2520&timeoutSeconds=60 -> ClientConnectorError(ConnectionKey(host='127.0.0.1', port=40121, "
    "is_ssl=True, ssl=True, proxy=None, proxy_auth=None, proxy_headers_hash=None, server_hostname=None), "
    "ConnectionRefusedError(111, \"Connect call failed ('127.0.0.1', 40121)\"))"
)
WATCH_503 = (
    "Request attempt #2 failed; will retry: GET https://127.0.0.1:41011/apis/batch/v1/namespaces/u/jobs?watch=true"
    " -> APIServerError('service unavailable', {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {}, 'status': "
    "'Failure', 'message': 'service unavailable', 'reason': 'ServiceUnavailable', 'code': 503})"
)
WATCH_STARTING = (
    "Request attempt #1 failed; will retry: GET https://127.0.0.1:40121/apis/kaliper.dev/v1alpha1/namespaces/refused"
    "/profileruns -> APITooManyRequestsError('storage is (re)initializing', {'kind': 'Status', 'apiVersion': 'v1', "
    "'metadata': {}, 'status': 'Failure', 'message': 'storage is (re)initializing', 'reason': 'TooManyRequests', "
    "'details': {'retryAfterSeconds': 1}, 'code': 429}, status=429)"
)


def test_kopfs_watches_failing_on_an_absent_api_server_mark_it_away() -> None:
    assert watch_outage_reason(WATCH_REFUSED) == "refuses connections"
    assert watch_outage_reason(WATCH_503) == "answers 503 Service Unavailable"
    # An API server that answers (429 while its storage starts; a 403) is not away; nor is any other line.
    assert watch_outage_reason(WATCH_STARTING) is None
    assert watch_outage_reason(WATCH_503.replace("503", "403")) is None
    assert watch_outage_reason("Handler 'run_changed' succeeded.") is None

    stream = captured()
    health = ApiServerHealth(probe=None)
    watching = logging.getLogger("test.kopf.watching")
    watching.addFilter(WatchFailures(health))
    watching.error("Handler 'x' succeeded.")
    assert health.reachable
    watching.error(WATCH_REFUSED)
    watching.error(WATCH_REFUSED.replace("#1", "#2"))
    assert not health.reachable
    warnings = [e["event"] for e in events(stream) if e["level"] == "warning"]
    assert warnings == ["API server refuses connections: steps wait for it; probing /readyz with backoff up to 30 s"]
    health.back()
    assert health.reachable


def test_failures_of_a_kind_are_one_line_then_one_count_an_interval() -> None:
    stream = captured()
    now = [0.0]
    failures = FailureLog(get_logger("kaliper.pacer"), every_s=60.0, clock=lambda: now[0])
    quota = api_exception(403, 'configmaps "run-001-target" is forbidden: exceeded quota: q')
    for index in range(30):
        failures.failed("profilerun-step", f"ns/run-{index:03d}", quota, "retried in 5 s (1 in a row)")
    failures.flush()  # the interval has not ended: nothing more
    now[0] = 61.0
    failures.flush()
    now[0] = 200.0
    failures.flush()  # a quiet interval: the kind is forgotten, its next failure logged at once
    failures.failed("profilerun-step", "ns/run-000", quota, "retried in 10 s (2 in a row)")
    lines = events(stream)
    assert [(e["event"], e.get("object"), "exception" in e) for e in lines] == [
        ("profilerun-step failed; retried in 5 s (1 in a row)", "ns/run-000", False),
        ("profilerun-step failed 29 more times on 29 objects in 60 s", None, False),
        ("profilerun-step failed; retried in 10 s (2 in a row)", "ns/run-000", False),
    ]
    assert (
        lines[0]["error"] == 'HTTP 403 from the API server: configmaps "run-001-target" is forbidden: exceeded quota: q'
    )
    # A bug keeps its traceback; names and numbers do not make kinds of their own.
    try:
        raise KeyError("trials")
    except KeyError as exc:
        failures.failed("profilerun-step", "ns/run-000", exc, "retried in 5 s (1 in a row)")
    assert "exception" in events(stream)[-1] and "KeyError" in events(stream)[-1]["exception"]
    assert failure_kind("w", api_exception(403, 'configmaps "a-1" is forbidden')) == failure_kind(
        "w", api_exception(403, 'configmaps "b-22" is forbidden')
    )


def test_kopfs_retry_lines_pass_once_a_minute_with_a_count_of_those_held_back() -> None:
    now = [0.0]
    repeated = RepeatedRetries(every_s=60.0, clock=lambda: now[0])

    def line(message: str) -> logging.LogRecord:
        return logging.LogRecord("kopf.objects", logging.ERROR, __file__, 1, message, (), None)

    watch = "Request attempt #{}/None failed; will retry: GET https://10.0.0.1/api/v1/pods?watch=true&rv={} -> refused"
    passed = []
    for attempt in range(1, 40):
        now[0] += 5.0
        record = line(watch.format(attempt, attempt * 7))
        if repeated.filter(record):
            passed.append(record.getMessage())
    assert passed == [
        watch.format(1, 7),
        watch.format(13, 91) + " (11 more like it in the last 60 s)",
        watch.format(25, 175) + " (11 more like it in the last 60 s)",
        watch.format(37, 259) + " (11 more like it in the last 60 s)",
    ]
    assert repeated.filter(line("Handler 'run_changed' succeeded.")) is True  # other lines are not touched
    # A handler that met the outage: one line a minute, without its traceback.
    from kaliper.controllers.api_health import ApiServerAway

    def away(name: str) -> logging.LogRecord:
        try:
            raise ApiServerAway("HTTPSConnectionPool(host='10.0.0.1', port=6443): Max retries exceeded")
        except ApiServerAway as exc:
            message = f"Handler '{name}' failed with an exception and will ignore it: {exc}"
            return logging.LogRecord("kopf.objects", logging.ERROR, __file__, 1, message, (), (type(exc), exc, None))

    first = away("deployment_changed")
    assert repeated.filter(first) is True and first.exc_info is None
    assert first.getMessage() == (
        "Handler 'deployment_changed' failed with an exception and will ignore it: the API server is away"
    )
    assert [repeated.filter(away("deployment_changed")) for _ in range(3)] == [False, False, False]
    assert repeated.filter(away("run_changed")) is True


def test_the_charts_api_server_settings_reach_the_operator() -> None:
    from kaliper.controllers.settings import Settings

    settings = Settings.from_environment(
        {"KALIPER_API_QPS": "20", "KALIPER_API_BURST": "40", "KALIPER_RETRY_CAP": "2m"}
    )
    assert (settings.api_qps, settings.api_burst, settings.retry_cap_s) == (20.0, 40, 120.0)
    assert (Settings.from_environment({}).api_qps, Settings.from_environment({}).retry_cap_s) == (50.0, 300.0)


def test_the_pacer_backs_off_an_objects_failing_work_and_not_the_api_servers_absence() -> None:
    import time

    from kaliper.controllers.api_health import ApiServerAway
    from kaliper.controllers.pacer import Pacer

    outcomes: list[BaseException | None] = []

    def action(namespace: str, name: str) -> None:
        if (outcome := outcomes.pop(0)) is not None:
            raise outcome

    pacer = Pacer()
    pacer.retry_cap_s = 40.0
    pacer.every("step", 5.0, action)
    work = pacer._work["step"]
    quota = api_exception(403, "exceeded quota")
    for failures, longest in ((1, 5.0), (2, 10.0), (3, 20.0), (4, 40.0), (5, 40.0)):
        outcomes.append(quota)
        before = time.monotonic()
        pacer._call("step", work, ("ns", "run"))
        wait = work.not_before[("ns", "run")] - before
        assert work.failures[("ns", "run")] == failures and longest / 2 <= wait <= longest + 1
    outcomes.append(ApiServerAway("refused"))  # waits with every object; not this one's failure
    pacer._call("step", work, ("ns", "run"))
    assert work.failures[("ns", "run")] == 5
    outcomes.append(None)  # a step that goes through forgets the failures
    pacer._call("step", work, ("ns", "run"))
    assert ("ns", "run") not in work.failures and ("ns", "run") not in work.not_before


def test_the_time_the_api_server_was_away_is_not_a_trials_time() -> None:
    wall = [100.0]
    health = ApiServerHealth(probe=None, wall=lambda: wall[0])
    assert health.check(refused()) is True
    wall[0] = 160.0
    assert health.away_s(since=50.0) == 60.0  # still away: counted up to now
    health.back()
    wall[0] = 400.0
    assert health.check(api_exception(503)) is True
    wall[0] = 430.0
    health.back()
    # Two outages, 60 s and 30 s: a trial started before both lost 90 s, one started mid-way through the first 30.
    assert (health.away_s(since=0.0), health.away_s(since=130.0), health.away_s(since=500.0)) == (90.0, 60.0, 0.0)
