"""Work that recurs, without kopf timers.

kopf puts its finalizer on every object that has a timer or a daemon, so with the operator gone
(uninstalled, crash-looping) deleting a ProfileRun, a ModelDeployment or their namespace would hang until
someone removed the finalizer by hand. Nothing Kaliper does on deletion needs the operator (owner references
take every child away), so no object gets a finalizer: the controllers tell the pacer which objects need
recurring work from their watch events (which add none), and one thread calls that work at its interval, on
a small pool. A call still running from the last round is skipped, not queued, so a slow dependency (a
Prometheus that never answers) cannot pile up calls.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kaliper.log import get_logger

Key = tuple[str, str]  # namespace, name
log = get_logger("kaliper.pacer")


@dataclass
class _Recurring:
    interval_s: float
    action: Callable[[str, str], None]
    keys: set[Key] = field(default_factory=set)
    next_due: float = 0.0


PACER_WORKERS = 8


class Pacer:
    def __init__(self, workers: int = PACER_WORKERS) -> None:
        self._work: dict[str, _Recurring] = {}
        self._busy: set[tuple[str, Key]] = set()
        self._guard = threading.Lock()
        self._workers = workers
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
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
            (self._work[name].keys.add if wanted else self._work[name].keys.discard)(key)

    def tracked(self, name: str) -> set[Key]:
        with self._guard:
            return set(self._work[name].keys)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="kaliper-pacer")
        self._thread = threading.Thread(target=self._loop, name="kaliper-pacer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop calling; calls in flight finish. Tracked objects are forgotten (a new start re-learns them
        from the watch's initial listing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._thread = self._pool = None
        with self._guard:
            for work in self._work.values():
                work.keys.clear()
                work.next_due = 0.0
            self._busy.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for name, work in list(self._work.items()):
                if now >= work.next_due:
                    work.next_due = now + work.interval_s
                    for key in self.tracked(name):
                        self._submit(name, work, key)
            self._stop.wait(0.2)

    def _submit(self, name: str, work: _Recurring, key: Key) -> None:
        with self._guard:
            if (name, key) in self._busy:
                return
            self._busy.add((name, key))
        assert self._pool is not None
        self._pool.submit(self._call, name, work.action, key)

    def _call(self, name: str, action: Callable[[str, str], None], key: Key) -> None:
        try:
            self._context.copy().run(action, *key)
        except Exception as exc:  # the next round tries again
            log.warning(
                "recurring work failed; retrying at its next interval",
                work=name,
                object="/".join(key),
                error=str(exc),
                exc_info=True,
            )
        finally:
            with self._guard:
                self._busy.discard((name, key))


PACER = Pacer()
