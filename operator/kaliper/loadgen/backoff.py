"""How long a closed-loop user waits after a failure before it sends again. Real clients back off (the OpenAI
and Google client libraries: exponential waits, the server's Retry-After honoured); a user that resent at
once would turn a 3 s outage or a rate limit into thousands of instant failures and report the flood instead
of the server. A single failure is no outage: the user sends its next request at once, as a client of
independent requests does, so a server that refuses one call in four is measured at its pace, not waited on.
Open loop keeps its schedule (requests are due when they are due) and never backs off.

A wait hides when the server came back. Waits are drawn with decorrelated jitter (AWS's: each between 50 ms
and three times the one before, up to 2 s), so users that failed together soon wake at unrelated moments, and
a wait the next request found the server back after is split where the requests sent during it (every
user's) show the server came back (`Recoveries`), not guessed at half: with waits that doubled in step, a
2 s outage read as 1.6 s of failing when its end fell early in the users' last wait. Pure (the clock and the
draws are the caller's).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections import deque
from collections.abc import Callable

FIRST_WAIT_S = 0.05  # the shortest wait
MAX_WAIT_S = 2.0  # the longest, unless the server asked for more (Retry-After)
MAX_RETRY_AFTER_S = 30.0  # a longer Retry-After is honoured up to this (a stage still ends on time)


class Backoff:
    """One user's waits: none after a single failure; after the second in a row and each more, a draw between
    50 ms and three times the wait before (the first: up to 150 ms), up to 2 s; or what the server's
    Retry-After asked (up to 30 s). Nothing after a success. `jitter` draws from [0, 1)."""

    def __init__(self, jitter: Callable[[], float] = random.random) -> None:
        self.failures = 0
        self.jitter = jitter
        self._last_s = FIRST_WAIT_S

    def wait_s(self, failed: bool, retry_after_s: float | None = None) -> float:
        if not failed:
            self.failures, self._last_s = 0, FIRST_WAIT_S
            return 0.0
        self.failures += 1
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), MAX_RETRY_AFTER_S)
        if self.failures == 1:
            return 0.0
        self._last_s = min(MAX_WAIT_S, FIRST_WAIT_S + (3 * self._last_s - FIRST_WAIT_S) * self.jitter())
        return self._last_s


class Recoveries:
    """What one process's closed-loop users sent near failures: each request's send and end (wall clock) and
    whether it failed; answered ones only within `horizon_s` of a failure (a healthy stage keeps nothing),
    at most `keep` in all."""

    def __init__(self, horizon_s: float = MAX_RETRY_AFTER_S, keep: int = 50_000) -> None:
        self.horizon_s = horizon_s
        self._requests: deque[tuple[float, float, bool]] = deque(maxlen=keep)  # in the order they ended
        self._failed_at = -math.inf  # the latest send of a failed request

    def seen(self, sent_wall: float, ended_wall: float, failed: bool) -> None:
        if failed:
            self._failed_at = max(self._failed_at, sent_wall)
        elif sent_wall - self._failed_at > self.horizon_s:
            return
        self._requests.append((sent_wall, ended_wall, failed))

    def failing_part(self, waited_from: float, waited_until: float) -> float:
        """Of a wait [from, until] after a failure whose next request (sent at its end) was answered: the
        seconds the server was still failing. It came back between the last request sent during the wait
        that failed and the first sent after that which was answered (the wait's own next request at the
        latest): the middle of the two."""
        down, answered = waited_from, []
        for sent, ended, failed in reversed(self._requests):
            if ended < waited_from:
                break  # ended before the wait began, so sent before it too
            if not waited_from <= sent <= waited_until:
                continue
            if failed:
                down = max(down, sent)
            else:
                answered.append(sent)
        up = min((sent for sent in answered if sent >= down), default=waited_until)
        return (down + up) / 2 - waited_from


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header (RFC 9110: delay-seconds or an HTTP-date) in seconds from now; None when absent
    or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
