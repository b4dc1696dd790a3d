"""Steps that keep failing, told where users look.

A step that raises (an API call refused by RBAC or a ResourceQuota, a webhook down) is retried at the next
pacer round, which is right: most such causes pass. But the retries went only to the operator's log, so a run
whose every step failed sat in its last phase with nothing in its status or events to say why. The failures
of each object's steps are counted here, and the stepper tells them as Warning events: on the first failure,
whenever the reason changes, and every REPORT_EVERY-th failure in a row; a step that succeeds after failures
says so once. Pure bookkeeping: which failure to tell is decided here, the event is written by the stepper.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass

Key = tuple[str, str]  # namespace, name
REPORT_EVERY = 10
MESSAGE_LIMIT = 1024  # an Event's message is cut at 1 KiB by the API server's conventions


@dataclass
class _Streak:
    count: int = 0
    told: str | None = None


class StepFailures:
    def __init__(self) -> None:
        self._streaks: dict[Key, _Streak] = {}
        self._guard = threading.Lock()

    def failed(self, key: Key, reason: str) -> int | None:
        """Count a failed step; the number of failures in a row when this one should be told, else None."""
        with self._guard:
            streak = self._streaks.setdefault(key, _Streak())
            streak.count += 1
            if streak.count == 1 or reason != streak.told or streak.count % REPORT_EVERY == 0:
                streak.told = reason
                return streak.count
            return None

    def succeeded(self, key: Key) -> int:
        """A step went through: how many failed in a row before it (0 when none did)."""
        with self._guard:
            streak = self._streaks.pop(key, None)
        return streak.count if streak else 0

    def forget(self, key: Key) -> None:
        with self._guard:
            self._streaks.pop(key, None)

    def clear(self) -> None:
        with self._guard:
            self._streaks.clear()


def describe(exc: BaseException) -> str:
    """What went wrong, in the API server's words where it gave some (its Status message), short enough for an
    event. Kubernetes' ApiException carries the HTTP status and the Status object as its body."""
    status, body = getattr(exc, "status", None), getattr(exc, "body", None)
    if isinstance(status, int) and hasattr(exc, "reason"):
        message = ""
        if body:  # a Status object, usually; otherwise the reason phrase says enough
            with contextlib.suppress(ValueError, AttributeError):
                message = json.loads(body).get("message") or ""
        text = f"HTTP {status} from the API server: {message or getattr(exc, 'reason', '')}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return text[:MESSAGE_LIMIT]
