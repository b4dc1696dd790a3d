"""ModelDeployment handlers: apply the Deployment and Service the builders make; mirror their state."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from kaliper.api.common import GROUP, VERSION
from kaliper.api.loader import problems_from
from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.resources import ModelDeployment
from kaliper.controllers import kube, metrics, prediction
from kaliper.controllers.pacer import PACER
from kaliper.controllers.settings import SETTINGS
from kaliper.controllers.store import STORE
from kaliper.log import get_logger
from kaliper.manifests.autoscaler import build_autoscaler
from kaliper.manifests.modeldeployment import (
    LABEL_DEPLOYMENT,
    LABEL_MANAGED,
    BuildError,
    build_deployment,
    build_service,
    failed_status,
    observed_status,
    status_condition,
)

PLURAL = "modeldeployments"
log = get_logger("kaliper.modeldeployment")


def now() -> str:
    return stamp(datetime.now(UTC))


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(body: Any) -> ModelDeployment:
    try:
        return ModelDeployment.model_validate(dict(body))
    except ValidationError as exc:
        raise BuildError("; ".join(str(p) for p in problems_from(exc, ModelDeployment))) from exc


# The generation of each ModelDeployment (by uid) whose Deployment and Service this process has applied.
_applied: dict[str, int] = {}
_applied_guard = threading.Lock()


@metrics.reconciling("ModelDeployment")
def reconcile(namespace: str, name: str) -> None:
    """Apply the Deployment and Service of the stored ModelDeployment unless this process already applied its
    current generation (a status change is an event too, and needs no apply); then mirror the status.

    Driven by watch events and the resync, with the generation as the record of what was done, rather than
    by kopf's change handlers: those keep their record in annotations (two patches per object) and post an
    Event per handler, which made up a tenth of a ProfileRun's API requests."""
    owner = STORE.get("ModelDeployment", namespace, name)
    if owner is None or owner["metadata"].get("deletionTimestamp"):
        return
    uid, generation = owner["metadata"]["uid"], owner["metadata"].get("generation", 1)
    with _applied_guard:
        done = _applied.get(uid) == generation
    if not done:
        try:
            resource = parse(owner)
            deployment = build_deployment(name, namespace, uid, resource.spec, SETTINGS.image)
            service = build_service(name, namespace, uid, resource.spec)
            autoscaler = build_autoscaler(name, namespace, uid, resource.spec)
        except BuildError as exc:
            previous = list((owner.get("status") or {}).get("conditions") or [])
            kube.patch_status("ModelDeployment", namespace, name, failed_status(generation, str(exc), previous, now()))
            kopf.warn(owner, reason="InvalidSpec", message=str(exc))
            log.warning(f"ModelDeployment {name} cannot be deployed: {exc}", object=f"{namespace}/{name}")
        else:
            kube.apply(deployment)
            kube.apply(service)
            if autoscaler is not None:
                kube.apply(autoscaler)
            elif (owner.get("status") or {}).get("autoscalerName"):
                kube.delete("HorizontalPodAutoscaler", namespace, name)  # autoscaling removed from the spec
            made = "Deployment, Service and HorizontalPodAutoscaler" if autoscaler else "Deployment and Service"
            log.info(f"applied {made} {name}", object=f"{namespace}/{name}", generation=generation)
        with _applied_guard:
            _applied[uid] = generation
    sync_status(namespace, name)


def sync_status(namespace: str, name: str) -> None:
    """Write the ModelDeployment's status from the latest views of it and its Deployment. Every path that
    touches the status goes through here, and only when the derived status differs from the stored one."""
    owner = STORE.get("ModelDeployment", namespace, name)
    if owner is None or owner["metadata"].get("deletionTimestamp"):
        return  # being deleted; the garbage collector takes the Deployment and Service too
    try:
        resource = parse(owner)
    except BuildError:
        return  # reconcile has reported it
    current = owner.get("status") or {}
    if current.get("phase") == "Failed" and current.get("observedGeneration") == owner["metadata"].get("generation"):
        return
    generation, moment = owner["metadata"].get("generation", 1), datetime.now(UTC)
    previous = list(current.get("conditions") or [])
    deployment = STORE.get("Deployment", namespace, name)
    status = observed_status(name, namespace, generation, resource.spec, deployment, previous, stamp(moment))
    with_prediction(status, owner, resource.spec, current, moment)
    # Transition times only move when a condition's status does, so an unchanged rollout compares equal.
    if status != {key: current.get(key) for key in status}:
        kube.patch_status("ModelDeployment", namespace, name, status)


def with_prediction(
    status: dict[str, Any], owner: dict[str, Any], spec: ModelDeploymentSpec, current: dict[str, Any], moment: datetime
) -> None:
    """status.production and the PredictionHolds condition (spec.prediction): checked anew when due or when the
    spec changed, else kept as they stand; gone with spec.prediction. An Event when the condition's status or
    reason changes."""
    if spec.prediction is None:
        status["production"] = None  # a merge patch's null removes it
        return
    metadata, previous = owner["metadata"], list(current.get("conditions") or [])
    generation = metadata.get("generation", 1)
    held = next((c for c in previous if c.get("type") == prediction.CONDITION), None)
    changed = held is None or held.get("observedGeneration") != generation
    if not changed and not prediction.due(spec.prediction, current.get("production"), moment):
        status["production"] = current.get("production")
        status["conditions"].append(held)
        return
    checked = prediction.check(metadata["namespace"], metadata["name"], spec, moment)
    reason = checked.reason
    message = checked.message
    condition = status_condition(
        prediction.CONDITION, checked.holds, reason, message, previous, generation, stamp(moment)
    )
    before = current.get("production") or {}
    production = {
        **checked.production,
        "reprofiled": before.get("reprofiled"),
        "reprofiledAt": before.get("reprofiledAt"),
    }
    status["production"], status["conditions"] = production, [*status["conditions"], condition]
    if held is None or (held.get("status"), held.get("reason")) != (condition["status"], reason):
        (kopf.warn if checked.holds is False else kopf.info)(owner, reason=reason, message=message)
    if prediction.reprofile_due(spec.prediction, condition, before, moment):
        made, said = prediction.reprofile(owner, spec, moment)
        if made is not None:
            production["reprofiled"], production["reprofiledAt"] = made, stamp(moment)
            kopf.info(owner, reason="Reprofiling", message=said)
        elif said is not None:
            kopf.warn(owner, reason="ReprofileRefused", message=said)


@kopf.on.event("apps", "v1", "deployments", labels={LABEL_MANAGED: "kaliper", LABEL_DEPLOYMENT: kopf.PRESENT})
def deployment_changed(body: Any, type: str | None, namespace: str, **_: Any) -> None:
    """Mirror the Deployment's rollout into its ModelDeployment's status as it happens."""
    STORE.seen("Deployment", body, deleted=type == "DELETED")
    PACER.nudge(RESYNC, (namespace, body["metadata"]["labels"][LABEL_DEPLOYMENT]))


RESYNC = "modeldeployment-resync"
# Events hurry a reconcile onto the pacer's pool, where one object's calls never overlap (two handlers
# syncing the same status at once each patched it); the round every 30 s is a safety net: an event missed
# while the operator was down, or an apply that failed, is caught up.
PACER.every(RESYNC, 30, reconcile)


@kopf.on.event(GROUP, VERSION, PLURAL)
def deployment_seen(body: Any, type: str | None, namespace: str, name: str, uid: str, **_: Any) -> None:
    """Every event of a ModelDeployment: a new generation (or the first sight after a start) is applied. A
    watch event adds no finalizer, so deletes never wait for the operator."""
    gone = type == "DELETED" or bool(body["metadata"].get("deletionTimestamp"))
    STORE.seen("ModelDeployment", body, deleted=type == "DELETED")
    PACER.track(RESYNC, (namespace, name), not gone)
    if gone:
        with _applied_guard:
            _applied.pop(uid, None)
        return
    PACER.nudge(RESYNC, (namespace, name))


def forget_all() -> None:
    """A stopped operator remembers nothing: the next start applies every ModelDeployment once, as kopf's
    resume handlers did."""
    with _applied_guard:
        _applied.clear()
