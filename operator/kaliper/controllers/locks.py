"""One lock per object, so that two steps of the same object never run at once: a step that finds its
object's lock taken is skipped, not queued (the next event or pacer round steps again)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class StepLocks:
    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def of(self, namespace: str, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((namespace, name), threading.Lock())

    def run_alone(self, namespace: str, name: str, step: Callable[[str, str], None]) -> None:
        """step(namespace, name) unless a step of the same object is under way (then nothing: not queued)."""
        lock = self.of(namespace, name)
        if not lock.acquire(blocking=False):
            return
        try:
            step(namespace, name)
        finally:
            lock.release()

    def forget(self, namespace: str, name: str) -> None:
        """For an object that is done or gone."""
        with self._guard:
            self._locks.pop((namespace, name), None)

    def clear(self) -> None:
        with self._guard:
            self._locks.clear()
