"""Finished runs (ProfileRuns, ModelOptimizations) deleted once their spec.ttl has passed, with everything
they own. The rule is kaliper.lifecycle.gc.ttl_expired, which `kaliper gc` applies too when no operator runs."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

from kaliper.api.common import Condition, with_condition
from kaliper.controllers import kube
from kaliper.controllers.pacer import PACER
from kaliper.controllers.store import STORE
from kaliper.lifecycle.gc import FINISHED, ttl_expired, ttl_held_by_gitops
from kaliper.log import get_logger

KINDS = ("ProfileRun", "ModelOptimization")
log = get_logger("kaliper.expiry")


def _work(kind: str) -> str:
    return f"{kind.lower()}-expire"


def track(kind: str, body: Any, gone: bool) -> None:
    """Called with every watch event of a run: the pacer checks finished runs that have a ttl."""
    meta = body["metadata"]
    finished = (body.get("status") or {}).get("phase") in FINISHED
    wanted = not gone and finished and bool((body.get("spec") or {}).get("ttl"))
    PACER.track(_work(kind), (meta["namespace"], meta["name"]), wanted)


def expire(kind: str, namespace: str, name: str) -> None:
    run = STORE.get(kind, namespace, name)
    now = datetime.now(UTC).replace(microsecond=0)
    why = ttl_expired(run, now) if run is not None else None
    if why is None:
        return
    held = ttl_held_by_gitops(run)
    if held is not None:
        _say_retained(kind, run, f"{why}, but {held}", now)
        return
    log.info(f"deleting {kind} {name}: {why}", object=f"{namespace}/{name}")
    kube.delete(kind, namespace, name)


def _say_retained(kind: str, run: dict[str, Any], message: str, now: datetime) -> None:
    """The Retained condition, written once: the run stays past its ttl, and why."""
    status = run.get("status") or {}
    conditions = [Condition.model_validate(c) for c in status.get("conditions") or []]
    if any(c.type == "Retained" for c in conditions):
        return
    generation = run["metadata"].get("generation")
    conditions = with_condition(conditions, "Retained", True, "ManagedByGitOps", message, now, generation)
    meta = run["metadata"]
    kube.patch_status(kind, meta["namespace"], meta["name"], {"conditions": [c.to_manifest() for c in conditions]})
    log.info(f"keeping {kind} {meta['name']}: {message}", object=f"{meta['namespace']}/{meta['name']}")


WORKS = tuple(_work(kind) for kind in KINDS)
for _kind in KINDS:  # every 30 s until the operator starts and sets SETTINGS.expiry_interval_s
    PACER.every(_work(_kind), 30, partial(expire, _kind))
