"""What every step controller shares (ProfileRun, ModelOptimization, and the kinds to come).

A step controller moves an object along in steps: each step reads the object and its children from the
store of what the watch streams delivered, does what is due, and writes the status once. Steps come from
the pacer (while the object is unfinished), and sooner when the object's own events or its Jobs ending
hurry them (also on the pacer's pool, so a handler returns at once); the pacer keeps one object's steps one at a
time. This module holds the parts that are the same for every kind: the status being written (conditions,
phase, observedGeneration, the failure), steps that keep failing told as events (step_failures), and the
handling of the object's and its Jobs' watch events.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import kopf

from kaliper.api.common import KStatus, ObjectStatus, readiness_of_phase, with_condition, with_readiness
from kaliper.controllers import expiry, kube, metrics
from kaliper.controllers.api_health import ApiServerAway
from kaliper.controllers.diagnosis import job_ended
from kaliper.controllers.pacer import PACER, Key
from kaliper.controllers.step_failures import StepFailures, describe
from kaliper.controllers.store import STORE
from kaliper.lifecycle.gc import FINISHED
from kaliper.log import get_logger

log = get_logger("kaliper.step")
Status = TypeVar("Status", bound=ObjectStatus)
MESSAGE_LIMIT = 4096  # the maxLength of status.message


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def finished(body: dict[str, Any]) -> bool:
    return (body.get("status") or {}).get("phase") in FINISHED


class StatusStep(Generic[Status]):
    """The status one step writes: read typed from the object, changed in place, patched once at the end
    (and not at all when nothing changed)."""

    kind: str  # the resource's kind, as kube and STORE name it

    def __init__(self, body: dict[str, Any], model: type[Status]) -> None:
        self.body = body
        self.namespace: str = body["metadata"]["namespace"]
        self.name: str = body["metadata"]["name"]
        self.generation: int | None = body["metadata"].get("generation")
        self.before: dict[str, Any] = body.get("status") or {}
        self.status: Status = model.model_validate(self.before)
        self.now = utcnow()

    def condition(self, kind: str, ok: bool, reason: str, message: str) -> None:
        conditions = self.status.conditions
        self.status.conditions = with_condition(conditions, kind, ok, reason, message, self.now, self.generation)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        (kopf.warn if warning else kopf.info)(self.body, reason=reason, message=message)
        log.info(message, object=f"{self.kind}/{self.namespace}/{self.name}", reason=reason)

    def fail(self, reason: str, message: str) -> None:
        """The object failed for good: phase, message, both conditions and a warning event."""
        status: Any = self.status
        status.phase = "Failed"
        status.message = message[:MESSAGE_LIMIT]
        status.completion_time = status.completion_time or self.now
        metrics.FINISHED.labels(self.kind, "Failed").inc()
        self.condition("Progressing", False, reason, message)
        self.condition("Complete", False, reason, message)
        self.event(reason, f"{self.kind} failed: {message}", warning=True)

    def readiness(self) -> KStatus:
        """Ready, Reconciling or Stalled, as kstatus and Argo CD read them: from the phase by default."""
        return readiness_of_phase(self.status.phase, self.status.conditions)

    def write(self) -> None:
        status: Any = self.status
        status.observed_generation = self.generation
        status.conditions = with_readiness(status.conditions, self.readiness(), self.now, self.generation)
        manifest = status.to_manifest()
        if manifest != {k: self.before.get(k) for k in manifest}:
            kube.patch_status(self.kind, self.namespace, self.name, manifest)


class Stepper:
    """One kind's stepping: its lock per object, its pacer work, and what to forget when an object is done."""

    def __init__(self, kind: str, step: Callable[[str, str], None], interval_s: float) -> None:
        self.kind = kind
        self.work = f"{kind.lower()}-step"
        self._step = step
        self.failures = StepFailures()
        # The interval may be changed before the operator starts (controllers.main sets the configured one).
        # Every step is the pacer's call, and the pacer never calls one object's work twice at once.
        PACER.every(self.work, interval_s, self.step)

    def step(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        with metrics.reconciling(self.kind):
            try:
                self._step(namespace, name)
            except ApiServerAway:
                raise  # not this object's failure: every step waits for the API server (api_health)
            except Exception as exc:
                reason = describe(exc)
                count = self.failures.failed(key, reason)
                if count is not None:
                    first, cap = PACER.interval(self.work), PACER.retry_cap_s
                    retried = f"retried with backoff from {first:g}s to {cap:g}s"
                    self._tell(key, "StepFailed", f"step failed ({count} in a row; {retried}): {reason}")
                raise
        failed_before = self.failures.succeeded(key)
        if failed_before:
            self._tell(key, "StepRecovered", f"a step went through after {failed_before} failed in a row", False)

    def _tell(self, key: Key, reason: str, message: str, warning: bool = True) -> None:
        """An event on the object (as the watch last delivered it); no event when it is not known yet."""
        body = STORE.get(self.kind, *key)
        if body is not None:
            (kopf.warn if warning else kopf.info)(body, reason=reason, message=message)

    def hurry(self, namespace: str, name: str) -> None:
        """An event calls for a step now: the pacer's pool takes it (the handler returns at once), and its
        failures are the pacer's to retry."""
        PACER.nudge(self.work, (namespace, name))

    def object_changed(self, body: Any, type: str | None) -> bool:
        """A watch event of the object itself: store it, have the pacer step it while it is unfinished and
        expire it once finished (spec.ttl). True while it still needs steps."""
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        gone = type == "DELETED" or bool(body["metadata"].get("deletionTimestamp"))
        STORE.seen(self.kind, body, deleted=type == "DELETED")
        done = finished(body)
        PACER.track(self.work, (namespace, name), not gone and not done)
        expiry.track(self.kind, body, gone)
        if gone or done:
            self.failures.forget((namespace, name))
        return not gone and not done

    def job_changed(self, body: Any, type: str | None, owner_label: str) -> None:
        """A watch event of one of its Jobs: a Job that ended steps its owner now instead of at the next
        pacer round."""
        STORE.seen("Job", body, deleted=type == "DELETED")
        if job_ended(body):
            self.hurry(body["metadata"]["namespace"], body["metadata"]["labels"][owner_label])

    def forget_all(self) -> None:
        self.failures.clear()
