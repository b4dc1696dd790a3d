"""The pacer's nudges: a watch event hands an object's work to the pacer's pool instead of doing it in kopf's
handler, and a nudge that comes while the object's call is under way calls it once more afterwards, not twice
at once and not once per nudge."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kaliper.controllers.pacer import Pacer


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_nudges_while_a_call_is_under_way_call_it_once_more_after_it_and_never_beside_it() -> None:
    calls: list[str] = []
    running = [0]
    overlapped = [False]
    first_started, release_first = threading.Event(), threading.Event()

    def action(namespace: str, name: str) -> None:
        running[0] += 1
        overlapped[0] |= running[0] > 1
        calls.append(f"{namespace}/{name}")
        if len(calls) == 1:
            first_started.set()
            release_first.wait(10)
        running[0] -= 1

    pacer = Pacer(workers=4)
    pacer.every("step", 3600.0, action)  # no tracked object: only the nudges call it
    pacer.start()
    try:
        pacer.nudge("step", ("ns", "run"))
        assert first_started.wait(10)
        for _ in range(3):  # three events while the first call holds the object
            pacer.nudge("step", ("ns", "run"))
        assert calls == ["ns/run"]
        release_first.set()
        wait_until(lambda: len(calls) == 2 and not pacer._busy)
        assert calls == ["ns/run", "ns/run"]
        assert overlapped == [False]
        pacer.nudge("step", ("ns", "other"))  # another object is not held up by this one's history
        wait_until(lambda: len(calls) == 3 and not pacer._busy)
        assert calls[2] == "ns/other"
    finally:
        release_first.set()
        pacer.stop()


def test_a_pacer_not_started_takes_no_nudge() -> None:
    calls: list[str] = []
    pacer = Pacer(workers=1)
    pacer.every("step", 3600.0, lambda namespace, name: calls.append(name))
    pacer.nudge("step", ("ns", "run"))
    assert calls == [] and not pacer._busy
