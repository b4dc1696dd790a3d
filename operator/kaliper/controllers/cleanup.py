"""Cleanup handlers: each pass lists the Kaliper kinds a Cleanup names, decides what goes
(kaliper.lifecycle.cleanup), deletes it (or, in a dry run, only lists it) and writes the status. A Cleanup
without a schedule runs once per generation; with one, the pacer checks every few seconds whether its next
run time has come.

A Cleanup reaches beyond its own namespace (spec.namespaces naming others, or allNamespaces) only when it
lives in the operator's own namespace: otherwise anyone allowed to create a Cleanup in one namespace could
delete runs in every other, with the operator's rights.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes.client import ApiException
from pydantic import ValidationError

from kaliper.api.cleanup import CleanupSpec, CleanupStatus, RemovedObject
from kaliper.api.common import GROUP, VERSION, KStatus, readiness_of_phase, with_condition, with_readiness
from kaliper.api.loader import problems_from
from kaliper.api.resources import Cleanup
from kaliper.controllers import kube, metrics
from kaliper.controllers.pacer import PACER
from kaliper.controllers.settings import SETTINGS
from kaliper.controllers.store import STORE
from kaliper.lifecycle.cleanup import CleanupPlan, Found, describe_age, kept_reason, next_run, plan_cleanup
from kaliper.log import get_logger

PLURAL = "cleanups"
PASS = "cleanup-pass"
MAX_LISTED = 500  # status.removed holds the first 500; the counts hold them all
log = get_logger("kaliper.cleanup")


class CannotRun(Exception):
    """The Cleanup cannot run as written; the message says what to change."""


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@kopf.on.event(GROUP, VERSION, PLURAL)
def cleanup_changed(body: Any, type: str | None, namespace: str, name: str, **_: Any) -> None:
    gone = type == "DELETED" or bool(body["metadata"].get("deletionTimestamp"))
    STORE.seen("Cleanup", body, deleted=type == "DELETED")
    PACER.track(PASS, (namespace, name), not gone and not _done(body))
    if not gone and not _done(body):
        PACER.nudge(PASS, (namespace, name))


def _done(body: Any) -> bool:
    """A one-off Cleanup whose current generation has run needs nothing more."""
    status = body.get("status") or {}
    return (
        not (body.get("spec") or {}).get("schedule")
        and status.get("observedGeneration") == body["metadata"].get("generation")
        and status.get("phase") in ("Succeeded", "Failed")
    )


def tick(namespace: str, name: str) -> None:
    """Run a pass if one is due: the pacer's call every few seconds and when a watch event hurries it (never
    two of one Cleanup at once)."""
    body = STORE.get("Cleanup", namespace, name)
    if body is not None and not body["metadata"].get("deletionTimestamp") and not _done(body):
        with metrics.reconciling("Cleanup"):
            Pass(body).advance()


PACER.every(PASS, 5, tick)


class Pass:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.namespace, self.name = body["metadata"]["namespace"], body["metadata"]["name"]
        self.generation = body["metadata"].get("generation")
        self.before = body.get("status") or {}
        self.status = CleanupStatus.model_validate(self.before)
        self.now = utcnow()

    def advance(self) -> None:
        try:
            spec = Cleanup.model_validate(self.body).spec
        except ValidationError as exc:
            return self.failed("; ".join(str(p) for p in problems_from(exc, Cleanup)), "InvalidSpec")
        current = self.status.observed_generation == self.generation
        if spec.schedule:
            due = self.status.next_run_time if current else None
            if due is None:  # new, or its spec changed: (re)schedule
                self.status.phase = "Scheduled"
                self.status.next_run_time = next_run(spec.schedule, self.now)
                self.condition("Scheduled", True, "Scheduled", f"next pass at {self.next_pass()}")
                return self.write()
            if self.now < due:
                return
        try:
            namespaces = self.namespaces(spec)
            plan = plan_cleanup(spec, self.find(spec, namespaces), self.now)
            removed = plan.remove if spec.dry_run else self.delete(plan, spec)
        except CannotRun as exc:
            return self.failed(str(exc), "CannotRun")
        except ApiException as exc:
            return self.failed(f"the API server refused: {exc.status} {exc.reason}", "ApiError")
        self.report(spec, plan, removed)
        if spec.schedule:
            self.status.phase = "Scheduled"
            self.status.next_run_time = next_run(spec.schedule, self.now)
        else:
            self.status.phase = "Succeeded"
        self.write()

    # -- finding and deleting

    def namespaces(self, spec: CleanupSpec) -> list[str] | None:
        """The namespaces to look in; None: every namespace (the operator watches them all)."""
        wanted = None if spec.all_namespaces else (spec.namespaces or [self.namespace])
        if wanted != [self.namespace] and self.namespace != SETTINGS.operator_namespace:
            where = "every namespace" if wanted is None else ", ".join(n for n in wanted if n != self.namespace)
            raise CannotRun(
                f"a Cleanup in namespace {self.namespace} may only remove objects there, not in {where}: "
                "create it in the operator's namespace"
                + (f" ({SETTINGS.operator_namespace})" if SETTINGS.operator_namespace else "")
                + ", or drop spec.namespaces / spec.allNamespaces"
            )
        if wanted is None and SETTINGS.watch_namespaces:
            return list(SETTINGS.watch_namespaces)
        return wanted

    def find(self, spec: CleanupSpec, namespaces: list[str] | None) -> list[Found]:
        found = []
        for kind in spec.kinds:
            for namespace in namespaces or [None]:
                found += [Found.from_object(kind, o) for o in kube.list_objects(kind, namespace)]
        return found

    def delete(self, plan: CleanupPlan, spec: CleanupSpec) -> list[Found]:
        removed = []
        for item in plan.remove:
            # The uid precondition: an object deleted and created again under the same name since it was
            # listed is a different object, and not the one this pass decided on.
            if kube.delete_exactly(item.kind, item.namespace, item.name, item.uid, spec.propagation_policy):
                removed.append(item)
        return removed

    # -- status

    def report(self, spec: CleanupSpec, plan: CleanupPlan, removed: list[Found]) -> None:
        self.status.last_run_time = self.now
        self.status.matched = plan.matched
        self.status.removed_count = 0 if spec.dry_run else len(removed)
        self.status.removed = [
            RemovedObject(
                kind=f.kind, namespace=f.namespace, name=f.name, phase=f.phase, age=describe_age(f.age_s(self.now))
            )
            for f in removed[:MAX_LISTED]
        ]
        verb = "would remove" if spec.dry_run else "removed"
        message = f"{verb} {len(removed)} of {plan.matched} matching objects"
        reasons: dict[str, int] = {}
        for _, reason in plan.kept:
            reasons[kept_reason(reason)] = reasons.get(kept_reason(reason), 0) + 1
        if reasons:
            message += " (" + ", ".join(f"{n} {why}" for why, n in reasons.items()) + ")"
        if len(removed) > MAX_LISTED:
            message += f"; status.removed lists the first {MAX_LISTED}"
        if len(removed) < len(plan.remove) and not spec.dry_run:
            message += f"; {len(plan.remove) - len(removed)} were already gone or replaced"
        self.status.message = message
        self.condition("Complete", True, "DryRun" if spec.dry_run else "Removed", message)
        metrics.FINISHED.labels("Cleanup", "Succeeded").inc()
        kopf.info(self.body, reason="DryRun" if spec.dry_run else "Removed", message=message)
        log.info(message, cleanup=f"{self.namespace}/{self.name}")

    def failed(self, message: str, reason: str) -> None:
        self.status.phase = "Failed"
        self.status.message = message
        metrics.FINISHED.labels("Cleanup", "Failed").inc()
        self.status.next_run_time = None
        self.condition("Complete", False, reason, message)
        kopf.warn(self.body, reason=reason, message=message)
        self.write()

    def condition(self, kind: str, ok: bool, reason: str, message: str) -> None:
        self.status.conditions = with_condition(
            self.status.conditions, kind, ok, reason, message, self.now, self.generation
        )

    def next_pass(self) -> str:
        """The next pass's time as the status shows it (RFC 3339, UTC)."""
        return self.status.next_run_time.strftime("%Y-%m-%dT%H:%M:%SZ") if self.status.next_run_time else "none"

    def readiness(self) -> KStatus:
        """A scheduled Cleanup is Ready between passes: waiting for the next one is what it is for."""
        if self.status.phase == "Scheduled":
            last = f"; last pass: {self.status.message}" if self.status.message else ""
            return KStatus("Ready", "Scheduled", f"next pass at {self.next_pass()}{last}")
        return readiness_of_phase(self.status.phase, self.status.conditions)

    def write(self) -> None:
        self.status.observed_generation = self.generation
        self.status.conditions = with_readiness(self.status.conditions, self.readiness(), self.now, self.generation)
        status = self.status.to_manifest()
        # A merge patch leaves out what it does not name: clear what this status no longer has.
        status.update({k: None for k in self.before if k not in status})
        if status != {k: self.before.get(k) for k in status}:
            kube.patch_status("Cleanup", self.namespace, self.name, status)
