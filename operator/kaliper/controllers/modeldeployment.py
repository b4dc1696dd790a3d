"""ModelDeployment handlers: apply the Deployment and Service the builders make; mirror their state."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes import client
from pydantic import ValidationError

from kaliper.api.common import GROUP, VERSION
from kaliper.api.loader import problems_from
from kaliper.api.resources import ModelDeployment
from kaliper.controllers import kube
from kaliper.controllers.pacer import PACER
from kaliper.controllers.settings import SETTINGS
from kaliper.manifests.modeldeployment import (
    LABEL_DEPLOYMENT,
    LABEL_MANAGED,
    BuildError,
    build_deployment,
    build_service,
    failed_status,
    observed_status,
)

PLURAL = "modeldeployments"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(body: Any) -> ModelDeployment:
    try:
        return ModelDeployment.model_validate(dict(body))
    except ValidationError as exc:
        raise BuildError("; ".join(str(p) for p in problems_from(exc, ModelDeployment))) from exc


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def reconcile(
    body: Any, name: str, namespace: str, uid: str, meta: Any, status: Any, patch: Any, logger: Any, **_: Any
) -> None:
    generation = meta.get("generation", 1)
    previous = list((status or {}).get("conditions") or [])
    try:
        resource = parse(body)
        deployment = build_deployment(name, namespace, uid, resource.spec, SETTINGS.image)
        service = build_service(name, namespace, uid, resource.spec)
    except BuildError as exc:
        patch.status.update(failed_status(generation, str(exc), previous, now()))
        raise kopf.PermanentError(str(exc)) from exc
    kube.apply(deployment)
    kube.apply(service)
    logger.info(f"applied Deployment and Service {name}")
    sync_status(namespace, name)


def sync_status(namespace: str, name: str) -> None:
    """Write the ModelDeployment's status from fresh reads of it and its Deployment. Every path that touches
    the status goes through here, so a late writer never puts back an older view."""
    try:
        owner = client.CustomObjectsApi(kube.api_client()).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return  # being deleted; the garbage collector takes the Deployment and Service too
        raise
    try:
        resource = parse(owner)
    except BuildError:
        return  # reconcile has reported it
    current = owner.get("status") or {}
    if current.get("phase") == "Failed" and current.get("observedGeneration") == owner["metadata"].get("generation"):
        return
    status = observed_status(
        name,
        namespace,
        owner["metadata"].get("generation", 1),
        resource.spec,
        kube.read_deployment(namespace, name),
        list(current.get("conditions") or []),
        now(),
    )
    # Transition times only move when a condition's status does, so an unchanged rollout compares equal.
    if status != {key: current.get(key) for key in status}:
        kube.patch_status(PLURAL, namespace, name, status)


@kopf.on.event("apps", "v1", "deployments", labels={LABEL_MANAGED: "kaliper", LABEL_DEPLOYMENT: kopf.PRESENT})
def deployment_changed(body: Any, namespace: str, **_: Any) -> None:
    """Mirror the Deployment's rollout into its ModelDeployment's status as it happens."""
    sync_status(namespace, body["metadata"]["labels"][LABEL_DEPLOYMENT])


RESYNC = "modeldeployment-resync"
# A safety net: an event missed while the operator was down is caught up within 30 s.
PACER.every(RESYNC, 30, sync_status)


@kopf.on.event(GROUP, VERSION, PLURAL)
def deployment_seen(body: Any, type: str | None, namespace: str, name: str, **_: Any) -> None:
    """Track ModelDeployments for the resync (a watch event adds no finalizer; deletes never wait for us)."""
    gone = type == "DELETED" or bool(body["metadata"].get("deletionTimestamp"))
    PACER.track(RESYNC, (namespace, name), not gone)
