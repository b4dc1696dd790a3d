"""Whether the API server answers, decided once for the whole operator.

Control planes go away (upgrades, etcd stalls, a partitioned node). Without this, every object's step failed on
its own at every pacer round, each failure logged with a traceback, and the returning API server met every
object at once. Instead: the first call that fails for a reason that is the API server's (no connection, a
timeout, 502/503/504, a 500 from etcd) marks it away; steps then wait (the pacer submits none), and one
prober asks /readyz with exponential backoff until it answers (or until any call goes through: kopf's
watches reconnect on their own). While it is away, one line per LOG_EVERY_S
says for how long and how many steps wait; one line says when it is back. Failures that are the object's own
(403 from RBAC, 422 from validation, a webhook's 500) are not outages: they back off per object in the pacer.

`outage_reason` and `ExponentialBackoff` are pure; `ApiServerHealth` holds the state and its clock, probe and logger are
passed in (tests drive it with their own).
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from kaliper.controllers.step_failures import describe
from kaliper.log import get_logger

log = get_logger("kaliper.apiserver")
LOG_EVERY_S = 60.0
MAX_OUTAGES_KEPT = 100
_OUTAGE_STATUSES = {502: "502 Bad Gateway", 503: "503 Service Unavailable", 504: "504 Gateway Timeout"}
_STORAGE_WORDS = ("etcdserver", "context deadline exceeded", "storage", "the server was unable to return")


class ApiServerAway(Exception):
    """A call failed because the API server is away: the step waits for it (no step failure, no event: there is
    no API server to post one to)."""


def outage_reason(exc: BaseException) -> str | None:
    """Why this failure is the API server's, not the call's (None: it is the call's own). The kubernetes
    client raises urllib3's errors for the network and ApiException for an answer."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and hasattr(exc, "reason"):  # an ApiException: the server answered
        if status in _OUTAGE_STATUSES:
            return f"answers {_OUTAGE_STATUSES[status]}"
        body = str(getattr(exc, "body", "") or "")
        if status == 500 and any(word in body for word in _STORAGE_WORDS):
            return "answers 500: its storage (etcd) does not answer"
        if "dial tcp" in body and any(word in body for word in ("connection refused", "i/o timeout")):
            # Stopping, it refuses its own loopback calls: a Service's cluster IP "failed to allocate" (422).
            return f"answers {status}: it cannot reach itself"
        return None
    if (reason := _network_reason(f"{type(exc).__name__}: {exc}")) is not None:
        return reason
    if isinstance(exc, ConnectionError | TimeoutError):
        return "cannot be reached"
    return None


def _network_reason(text: str) -> str | None:
    """A network failure's reason from its words: urllib3's (the kubernetes client's) and aiohttp's (kopf's)."""
    if any(word in text for word in ("Connection refused", "ConnectionRefusedError")):
        return "refuses connections"
    if any(word in text for word in ("timed out", "Timeout", "TimeoutError")):
        return "does not answer in time"
    words = ("RemoteDisconnected", "Connection aborted", "Connection reset", "ProtocolError", "ServerDisconnected")
    if any(word in text for word in words):
        return "drops connections"
    if any(word in text for word in ("NewConnectionError", "MaxRetryError", "Name or service not known")):
        return "cannot be reached"
    return None


def watch_outage_reason(message: str) -> str | None:
    """Why a failure of one of kopf's own requests (a watch, mostly) is the API server's, from the line kopf logs
    for it ("Request attempt #2 failed; will retry: GET <url> -> <error>"); None for any other line."""
    if not message.startswith("Request attempt #") or " -> " not in message:
        return None
    error = message.split(" -> ", 1)[1]
    if error.startswith("APIServerError") and (code := re.search(r"'code': (\d+)", error)):
        status = int(code.group(1))
        return f"answers {_OUTAGE_STATUSES[status]}" if status in _OUTAGE_STATUSES else None
    return _network_reason(error)


@dataclass(frozen=True)
class ExponentialBackoff:
    """Exponential backoff with jitter: `first` seconds doubling to `cap`, each delay drawn from its upper
    half (so many objects failing together do not retry together)."""

    first_s: float
    cap_s: float

    def delay(self, failures: int, draw: Callable[[], float] = random.random) -> float:
        """The wait after `failures` failures in a row (1: the first)."""
        full = min(self.cap_s, self.first_s * 2 ** max(0, failures - 1))
        return full * (0.5 + 0.5 * draw())


class TokenBucket:
    """At most `rate` calls a second on average, `burst` at once (client-go's QPS and burst): `take()` waits
    for a token. Many objects stepping at once (an API server back after an outage) are spread out."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self._clock = rate, burst, clock
        self._tokens, self._at = float(burst), clock()
        self._guard = threading.Lock()

    def wait_s(self) -> float:
        """Take a token: how long to wait before the call it allows (0 while tokens are left)."""
        with self._guard:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= 1  # taken now; a negative balance is paid back by waiting
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def take(self) -> None:
        if (wait := self.wait_s()) > 0:
            time.sleep(wait)


def _readable(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    return f"{seconds / 3600:.1f} h"


class ApiServerHealth:
    """The API server's reachability: away from the first outage-kind failure until a probe succeeds."""

    def __init__(
        self,
        probe: Callable[[], None] | None = None,
        backoff: ExponentialBackoff = ExponentialBackoff(1.0, 30.0),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[threading.Event, float], bool] = lambda stop, s: stop.wait(s),
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.probe = probe
        self.backoff = backoff
        self._clock, self._sleep, self._wall = clock, sleep, wall
        self._outages: list[tuple[float, float]] = []  # (start, end) in wall-clock seconds, the latest last
        self._away_since_wall = 0.0
        self._guard = threading.Lock()
        self._away_since: float | None = None
        self._reason = ""
        self._failed_calls = 0
        self._last_line = 0.0
        self._prober: threading.Thread | None = None
        self._stop = threading.Event()
        self.waiting: Callable[[], int] = lambda: 0  # how many steps wait (the pacer tells)

    @property
    def reachable(self) -> bool:
        return self._away_since is None

    def check(self, exc: BaseException) -> bool:
        """A call failed: True when it is because the API server is away (then it is marked so and probed)."""
        reason = outage_reason(exc)
        if reason is None:
            return False
        self.away(reason, describe(exc))
        return True

    def away(self, reason: str, error: str) -> None:
        """A call failed because the API server is away: marked so (and probed) unless it already is."""
        with self._guard:
            self._failed_calls += 1
            if self._away_since is not None:
                return
            self._away_since = self._last_line = self._clock()
            self._away_since_wall = self._wall()
            self._reason, self._failed_calls = reason, 1
            # One prober at a time: one from an outage that a call ended early probes on for this one.
            start = self.probe is not None and (self._prober is None or not self._prober.is_alive())
        log.warning(f"API server {reason}: steps wait for it; probing /readyz with backoff up to "
                    f"{self.backoff.cap_s:g} s", error=error[:300])  # fmt: skip
        if start:
            self._start_prober()

    def _start_prober(self) -> None:
        self._stop.clear()
        self._prober = threading.Thread(target=self._probe_until_back, name="kaliper-apiserver-probe", daemon=True)
        self._prober.start()

    def _probe_until_back(self) -> None:
        assert self.probe is not None
        failures = 0
        while not self._sleep(self._stop, self.backoff.delay(failures + 1)) and not self.reachable:
            try:
                self.probe()
            except Exception as exc:
                if (reason := outage_reason(exc)) is not None:
                    failures += 1
                    self._still_away(reason)
                    continue
                # Any other answer (403 where /readyz is not public, 404 behind a proxy) is an API server that
                # answers: its calls will tell the rest.
            self.back()
            return

    def _still_away(self, reason: str) -> None:
        with self._guard:
            if self._away_since is None:
                return
            self._reason = reason
            now = self._clock()
            if now - self._last_line < LOG_EVERY_S:
                return
            self._last_line = now
            away, calls = now - self._away_since, self._failed_calls
        log.warning(f"API server {reason} for {_readable(away)}: {self.waiting()} steps waiting, "
                    f"{calls} calls failed meanwhile")  # fmt: skip

    def back(self) -> None:
        """The API server answers again (a probe succeeded)."""
        with self._guard:
            if self._away_since is None:
                return
            away, calls = self._clock() - self._away_since, self._failed_calls
            self._away_since, self._failed_calls = None, 0
            self._outages = [*self._outages[-(MAX_OUTAGES_KEPT - 1) :], (self._away_since_wall, self._wall())]
        log.warning(f"API server back after {_readable(away)}: {self.waiting()} steps resume; "
                    f"{calls} calls failed while it was away")  # fmt: skip

    def away_s(self, since: float) -> float:
        """Seconds the API server was away since this wall-clock time (in this process's memory): time a trial
        could not be moved on, which its readyTimeout and trialTimeout do not count."""
        with self._guard:
            outages = list(self._outages)
            if self._away_since is not None:
                outages.append((self._away_since_wall, self._wall()))
        return sum(max(0.0, end - max(start, since)) for start, end in outages)

    def stop(self) -> None:
        self._stop.set()
        if self._prober is not None:
            self._prober.join(timeout=10)
        self._prober = None
        with self._guard:
            self._away_since, self._failed_calls = None, 0


class WatchFailures(logging.Filter):
    """Tells the API server's health of kopf's own requests that failed because it is away. An operator whose
    runs all wait on their load generators makes no call of its own for minutes: without this, an outage then
    went unnoticed, and counted against the trials' timeouts (moving_s). Attached to kopf's watching logger;
    lets every line through (kaliper.log.RepeatedRetries thins them)."""

    def __init__(self, health: ApiServerHealth) -> None:
        super().__init__()
        self.health = health

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (reason := watch_outage_reason(message)) is not None:
            self.health.away(reason, message.split(" -> ", 1)[1])
        return True


API_SERVER = ApiServerHealth()  # kube sets its probe; the pacer tells how many steps wait


def moving_s(start: datetime | None, now: datetime) -> float:
    """Seconds since `start` that the operator could move things on: the API server's absences (as this
    process saw them) taken out, so a ten-minute outage does not time a trial out the moment it ends."""
    if start is None:
        return 0.0
    return max(0.0, (now - start).total_seconds() - API_SERVER.away_s(start.timestamp()))
