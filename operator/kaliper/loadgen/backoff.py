"""How long a closed-loop user waits after a failure before it sends again. Real clients back off (the OpenAI
and Google client libraries: exponential waits, the server's Retry-After honoured); a user that resent at
once would turn a 3 s outage or a rate limit into thousands of instant failures and report the flood instead
of the server. A single failure is no outage: the user sends its next request at once, as a client of
independent requests does, so a server that refuses one call in four is measured at its pace, not waited on.
Open loop keeps its schedule (requests are due when they are due) and never backs off. Pure.
"""

from __future__ import annotations

import email.utils
import time

FIRST_WAIT_S = 0.05  # after the second failure in a row
MAX_WAIT_S = 2.0  # doubling stops here
MAX_RETRY_AFTER_S = 30.0  # a longer Retry-After is honoured up to this (a stage still ends on time)


class Backoff:
    """One user's waits: none after a single failure, 50 ms after the second in a row, doubling with each more
    up to 2 s, or what the server's Retry-After asked (up to 30 s); nothing after a success."""

    def __init__(self) -> None:
        self.failures = 0

    def wait_s(self, failed: bool, retry_after_s: float | None = None) -> float:
        if not failed:
            self.failures = 0
            return 0.0
        self.failures += 1
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), MAX_RETRY_AFTER_S)
        if self.failures == 1:
            return 0.0
        return min(MAX_WAIT_S, FIRST_WAIT_S * 2 ** (self.failures - 2))


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
