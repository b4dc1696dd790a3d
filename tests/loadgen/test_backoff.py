"""The closed loop's waits after failures, and when a target counts as down (pure)."""

from __future__ import annotations

from collections import Counter

import pytest

from kaliper.loadgen.backoff import Backoff, Recoveries, parse_retry_after
from kaliper.loadgen.recorder import Window
from kaliper.loadgen.stopping import target_down


def test_waits_grow_after_failures_in_a_row_up_to_two_seconds_and_reset_on_success() -> None:
    backoff = Backoff(jitter=lambda: 1.0)  # the longest each wait can be: three times the one before
    waits = [backoff.wait_s(True) for _ in range(7)]
    assert waits == pytest.approx([0.0, 0.15, 0.45, 1.35, 2.0, 2.0, 2.0])  # a single failure is no outage: no wait
    assert backoff.wait_s(False) == 0.0
    assert backoff.wait_s(True) == 0.0
    assert backoff.wait_s(True) == pytest.approx(0.15)


def test_each_wait_is_drawn_between_fifty_milliseconds_and_three_times_the_one_before() -> None:
    shortest = Backoff(jitter=lambda: 0.0)
    assert [shortest.wait_s(True) for _ in range(4)] == [0.0, 0.05, 0.05, 0.05]
    middle = Backoff(jitter=lambda: 0.5)
    assert [middle.wait_s(True) for _ in range(4)] == pytest.approx([0.0, 0.1, 0.175, 0.2875])
    assert middle.wait_s(True, retry_after_s=3.0) == 3.0  # what the server asked, as asked


def test_the_server_came_back_between_the_last_failed_and_the_first_answered_request_sent_in_a_wait() -> None:
    recoveries = Recoveries()
    recoveries.seen(9.0, 9.01, failed=False)  # long before any failure: not kept
    recoveries.seen(10.0, 10.01, failed=True)  # the failure the wait [10.1, 12.1] follows
    recoveries.seen(10.5, 10.51, failed=True)  # another user's, failed
    recoveries.seen(10.9, 10.91, failed=True)
    recoveries.seen(11.1, 11.12, failed=False)  # answered: the server is back by 11.1
    recoveries.seen(11.3, 11.31, failed=False)
    assert recoveries.failing_part(10.1, 12.1) == pytest.approx(0.9)  # back at 11.0, the middle of 10.9 and 11.1
    assert recoveries.failing_part(11.5, 12.0) == pytest.approx(0.25)  # nothing sent in it: its middle
    # Only requests sent during the wait bound it: one failed before it began tells nothing of its course.
    assert recoveries.failing_part(10.95, 11.05) == pytest.approx(0.05)


def test_retry_after_is_honoured_up_to_thirty_seconds() -> None:
    backoff = Backoff()
    assert backoff.wait_s(True, retry_after_s=3.0) == 3.0
    assert backoff.wait_s(True, retry_after_s=600.0) == 30.0
    assert parse_retry_after("120") == 120.0
    # An HTTP-date, 90 s after "now".
    assert parse_retry_after("Wed, 25 Nov 2026 12:01:30 GMT", now=1795608000.0) == 90.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def window(index: int, requests: int, **errors: int) -> Window:
    """A window of `requests`, the failures by kind; refused connections are the ones the target did not answer."""
    kinds = Counter({k.replace("_", " "): n for k, n in errors.items()})
    return Window(0, index, requests=requests, errors=kinds, unanswered=kinds["ConnectionRefusedError"])


def test_a_target_is_down_after_ten_seconds_of_nothing_but_refused_connections() -> None:
    answered = [window(i, 50) for i in range(5)]
    refused = [window(5 + i, 3, ConnectionRefusedError=3) for i in range(10)]
    assert target_down(answered + refused[:9], 1.0) is None  # nine seconds: an outage, measured through
    assert target_down(answered + refused, 1.0) == (
        "the target answered nothing for 10 s: every request of the last 10 windows failed "
        "(ConnectionRefusedError x30); is it down?"
    )
    # Windows where no request ended (users backing off) neither break the span nor start one.
    gappy = [window(5 + i, 0) if i % 2 else window(5 + i, 2, ConnectionRefusedError=2) for i in range(10)]
    assert target_down(answered + gappy, 1.0) is not None
    # HTTP errors and timeouts are answers: a server that answers 503 to everything is measured, not down.
    assert target_down([window(i, 4, HTTP_503=4) for i in range(20)], 1.0) is None
