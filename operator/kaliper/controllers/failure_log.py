"""Failures of the operator's recurring work, logged so that a person can read them during an incident.

Logging each failure with its traceback wrote about 1.2 GB an hour when every object's step failed every few
seconds. Here the first failure of each kind is logged at once; the same kind again within EVERY_S is
counted, and one line per kind says how many failed on how many objects when the interval ends. A kind is
the work, the exception's type and its message with names and numbers taken out. Only failures that are
neither the API server's answers nor the network's carry a traceback (they are bugs), once per line.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaliper.controllers.api_health import outage_reason
from kaliper.controllers.step_failures import describe

EVERY_S = 60.0
_NAMES = re.compile(r"'[^']*'|\"[^\"]*\"|\b[0-9a-f-]{8,}\b|\d+")


def failure_kind(work: str, exc: BaseException) -> str:
    """The work and what failed, without the names and numbers that differ from object to object."""
    return f"{work}: {type(exc).__name__}: {_NAMES.sub('…', describe(exc))[:200]}"


def expected(exc: BaseException) -> bool:
    """An answer of the API server or a network failure: no traceback would tell more than its message."""
    return isinstance(getattr(exc, "status", None), int) or outage_reason(exc) is not None


@dataclass
class _Kind:
    since: float
    count: int = 0  # failures since the last line
    objects: set[str] = field(default_factory=set)
    last_message: str = ""


class FailureLog:
    def __init__(self, logger: Any, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._log, self._every_s, self._clock = logger, every_s, clock
        self._kinds: dict[str, _Kind] = {}
        self._guard = threading.Lock()

    def failed(self, work: str, obj: str, exc: BaseException, next_try: str) -> None:
        kind = failure_kind(work, exc)
        with self._guard:
            known = self._kinds.get(kind)
            if known is not None:
                known.count += 1
                known.objects.add(obj)
                known.last_message = describe(exc)
                return
            self._kinds[kind] = _Kind(since=self._clock())
        self._log.warning(f"{work} failed; {next_try}", object=obj, error=describe(exc), exc_info=not expected(exc))

    def flush(self) -> None:
        """One line for each kind whose interval ended with failures counted; kinds quiet for an interval are
        forgotten (the next failure is logged at once again)."""
        now = self._clock()
        lines = []
        with self._guard:
            for kind, seen in list(self._kinds.items()):
                if now - seen.since < self._every_s:
                    continue
                if seen.count:
                    lines.append((kind, seen.count, len(seen.objects), seen.last_message))
                    self._kinds[kind] = _Kind(since=now)
                else:
                    del self._kinds[kind]
        for kind, count, objects, message in lines:
            work = kind.split(":", 1)[0]
            self._log.warning(
                f"{work} failed {count} more times on {objects} objects in {self._every_s:.0f} s", error=message
            )
