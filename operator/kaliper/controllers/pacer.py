"""Work that recurs, without kopf timers.

kopf puts its finalizer on every object that has a timer or a daemon, so with the operator gone
(uninstalled, crash-looping) deleting a ProfileRun, a ModelDeployment or their namespace would hang until
someone removed the finalizer by hand. Nothing Kaliper does on deletion needs the operator (owner references
take every child away), so no object gets a finalizer: the controllers tell the pacer which objects need
recurring work from their watch events (which add none), and one thread calls that work at its interval, on
a small pool. A call still running from the last round is skipped, not queued, so a slow dependency (a
Prometheus that never answers) cannot pile up calls.

A watch event that calls for work now (a run's Job ended) nudges the pacer instead of doing the work in
the handler: kopf's worker of that object holds the event's whole body until the handler returns, and
while handlers did steps inline (seconds each, on kopf's executor) every object's events piled up behind
them, each a full copy with managedFields. A nudge puts the call on a pool of its own at once (behind no
round of every object); one arriving while the object's call is under way runs it once more when it ends
(the event may have come after the call read the store), never more than once.

A call that fails is retried with exponential backoff per object (from the interval, doubling up to
`retry_cap_s`, with jitter), as controller-runtime's work queue does, and its failure is logged through the
failure log (one line per kind of failure and interval, no traceback for the API server's answers). While
the API server is away (api_health) nothing is submitted: one prober waits for it instead of every object.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kaliper.controllers.api_health import API_SERVER, ApiServerAway, ExponentialBackoff
from kaliper.controllers.failure_log import FailureLog
from kaliper.log import get_logger

Key = tuple[str, str]  # namespace, name
log = get_logger("kaliper.pacer")


@dataclass
class _Recurring:
    interval_s: float
    action: Callable[[str, str], None]
    keys: set[Key] = field(default_factory=set)
    next_due: float = 0.0
    failures: dict[Key, int] = field(default_factory=dict)  # failed calls in a row
    not_before: dict[Key, float] = field(default_factory=dict)  # backing off until (monotonic)


# Threads of each of the two pools (rounds, nudges), where every object's work runs; KALIPER_WORKERS gives
# many runs more room.
PACER_WORKERS = int(os.environ.get("KALIPER_WORKERS", "8"))
HANDLER_WORKERS = 4  # kopf's executor: the handlers only store an event and nudge the pacer
RETRY_CAP_S = 300.0


class Pacer:
    def __init__(self, workers: int = PACER_WORKERS) -> None:
        self.retry_cap_s = RETRY_CAP_S
        self.failure_log = FailureLog(log)
        self._work: dict[str, _Recurring] = {}
        self._busy: set[tuple[str, Key]] = set()
        self._again: set[tuple[str, Key]] = set()  # nudged while busy: called once more when it ends
        self._guard = threading.Lock()
        self._workers = workers
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None  # the rounds' calls
        self._hurried: ThreadPoolExecutor | None = None  # the nudges' calls
        self._context = contextvars.Context()

    def every(self, name: str, interval_s: float, action: Callable[[str, str], None]) -> None:
        """Call action(namespace, name) every interval for each object tracked under this name."""
        self._work[name] = _Recurring(interval_s, action)

    def set_interval(self, name: str, interval_s: float) -> None:
        self._work[name].interval_s = interval_s

    def interval(self, name: str) -> float:
        return self._work[name].interval_s

    def track(self, name: str, key: Key, wanted: bool) -> None:
        """Called from kopf's handlers: the calls run in a copy of the latest handler's context, where kopf's
        own context variables (its settings, its event queue for kopf.info/kopf.warn) are set."""
        self._context = contextvars.copy_context()
        with self._guard:
            work = self._work[name]
            (work.keys.add if wanted else work.keys.discard)(key)
            if not wanted:
                work.failures.pop(key, None)
                work.not_before.pop(key, None)

    def nudge(self, name: str, key: Key) -> None:
        """Called from kopf's handlers: the work for this object now, on the pool, not in the handler."""
        self._context = contextvars.copy_context()
        if self._hurried is None or not API_SERVER.reachable:
            return  # the first round after the start, or after the API server is back, calls every tracked one
        self._submit(name, self._work[name], key, hurried=True, again_if_busy=True)

    def tracked(self, name: str) -> set[Key]:
        with self._guard:
            return set(self._work[name].keys)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="kaliper-pacer")
        self._hurried = ThreadPoolExecutor(self._workers, thread_name_prefix="kaliper-hurried")
        self._thread = threading.Thread(target=self._loop, name="kaliper-pacer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop calling; calls in flight finish. Tracked objects are forgotten (a new start re-learns them
        from the watch's initial listing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for pool in (self._pool, self._hurried):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self._thread = self._pool = self._hurried = None
        with self._guard:
            for work in self._work.values():
                work.keys.clear()
                work.failures.clear()
                work.not_before.clear()
                work.next_due = 0.0
            self._busy.clear()
            self._again.clear()

    def waiting(self) -> int:
        """How many objects have work waiting (what an API server outage holds up)."""
        with self._guard:
            return sum(len(work.keys) for work in self._work.values())

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for name, work in list(self._work.items()):
                if now >= work.next_due and API_SERVER.reachable:
                    work.next_due = now + work.interval_s
                    for key in self.tracked(name):
                        if now >= work.not_before.get(key, 0.0):
                            self._submit(name, work, key, hurried=False)
            self.failure_log.flush()
            self._stop.wait(0.2)

    def _submit(self, name: str, work: _Recurring, key: Key, hurried: bool, again_if_busy: bool = False) -> None:
        with self._guard:  # one check and one mark, so a nudge cannot fall between a call's end and the next
            if (name, key) in self._busy:
                if again_if_busy:
                    self._again.add((name, key))
                return
            self._busy.add((name, key))
        pool = self._hurried if hurried else self._pool
        assert pool is not None
        pool.submit(self._call, name, work, key)

    def _call(self, name: str, work: _Recurring, key: Key) -> None:
        try:
            self._context.copy().run(work.action, *key)
        except ApiServerAway:
            pass  # not the object's failure: its work waits for the API server with everyone's
        except Exception as exc:
            with self._guard:
                failures = work.failures[key] = work.failures.get(key, 0) + 1
                delay = ExponentialBackoff(work.interval_s, max(work.interval_s, self.retry_cap_s)).delay(failures)
                work.not_before[key] = time.monotonic() + delay
            self.failure_log.failed(name, "/".join(key), exc, f"retried in {delay:.0f} s ({failures} in a row)")
        else:
            with self._guard:
                work.failures.pop(key, None)
                work.not_before.pop(key, None)
        finally:
            with self._guard:
                self._busy.discard((name, key))
                again = (name, key) in self._again
                self._again.discard((name, key))
            if again and not self._stop.is_set() and API_SERVER.reachable:
                self._submit(name, work, key, hurried=True)


PACER = Pacer()
API_SERVER.waiting = PACER.waiting
