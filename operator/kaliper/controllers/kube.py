"""The Kubernetes API calls the handlers make: server-side apply, reads, lists, deletes and status patches,
on plain dicts. The handful of kinds Kaliper touches are listed here; nothing else is reachable. What a write
returns of a watched kind goes into the store at once, so the next step sees the operator's own writes."""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from kubernetes import client, config

from kaliper.api.common import GROUP, VERSION
from kaliper.controllers.pacer import PACER_WORKERS
from kaliper.controllers.store import STORE, WATCHED

FIELD_MANAGER = "kaliper"
APPLY = {"field_manager": FIELD_MANAGER, "force": True, "_content_type": "application/apply-patch+yaml"}
CUSTOM_PLURALS = {
    "ModelDeployment": "modeldeployments",
    "ProfileRun": "profileruns",
    "ModelOptimization": "modeloptimizations",
    "Cleanup": "cleanups",
}
# kind -> (API class, the suffix of its *_namespaced_<suffix> methods)
TYPED = {
    "ConfigMap": (client.CoreV1Api, "config_map"),
    "Service": (client.CoreV1Api, "service"),
    "ServiceAccount": (client.CoreV1Api, "service_account"),
    "Pod": (client.CoreV1Api, "pod"),
    "Deployment": (client.AppsV1Api, "deployment"),
    "Job": (client.BatchV1Api, "job"),
    "Role": (client.RbacAuthorizationV1Api, "role"),
    "RoleBinding": (client.RbacAuthorizationV1Api, "role_binding"),
}


@cache
def api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        # The library reads $KUBECONFIG when it is imported; read it now instead.
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    configuration = client.Configuration.get_default_copy()
    # One connection per thread that calls the API (kopf's executor, KALIPER_WORKERS, and the pacer's pool), so
    # none is thrown away.
    configuration.connection_pool_maxsize = int(os.environ.get("KALIPER_WORKERS", "16")) + PACER_WORKERS + 4
    return client.ApiClient(configuration)


def _plain(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) else api_client().sanitize_for_serialization(result)


def _typed(kind: str, verb: str) -> Any:
    if kind not in TYPED:
        raise ValueError(f"kaliper does not handle {kind} objects")
    api_class, suffix = TYPED[kind]
    return getattr(api_class(api_client()), f"{verb}_namespaced_{suffix}")


def _custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client())


def apply(obj: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply: idempotent, and it leaves fields other managers own alone."""
    kind, namespace, name = obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"]
    if kind in CUSTOM_PLURALS:
        # The client returns None for an apply of a custom object (it does not deserialize the answer): read
        # the answer as it came.
        response = _custom().patch_namespaced_custom_object(
            GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, obj, _preload_content=False, **APPLY
        )
        result = json.loads(response.data)
    else:
        result = _typed(kind, "patch")(name, namespace, obj, **APPLY)
    return _remember(kind, _plain(result))


def _remember(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    if kind in WATCHED:
        STORE.seen(kind, obj)
    return obj


def get(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        if kind in CUSTOM_PLURALS:
            return _plain(_custom().get_namespaced_custom_object(GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name))
        return _plain(_typed(kind, "read")(name, namespace))
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def list_objects(kind: str, namespace: str | None, selector: str = "") -> list[dict[str, Any]]:
    """Objects of a kind with these labels (a label selector; empty: all), in a namespace or in all of them
    (None)."""
    if kind in CUSTOM_PLURALS:
        custom, plural = _custom(), CUSTOM_PLURALS[kind]
        if namespace is None:
            result = custom.list_cluster_custom_object(GROUP, VERSION, plural, label_selector=selector)
        else:
            result = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural, label_selector=selector)
        return list(result.get("items") or [])
    if namespace is None:
        api_class, suffix = TYPED[kind]
        result = getattr(api_class(api_client()), f"list_{suffix}_for_all_namespaces")(label_selector=selector)
    else:
        result = _typed(kind, "list")(namespace, label_selector=selector)
    return list(_plain(result).get("items") or [])


def delete_exactly(kind: str, namespace: str, name: str, uid: str, propagation: str) -> bool:
    """Delete this object and no other: the uid must still match. False when it is already gone, or replaced
    by another of the same name."""
    options = client.V1DeleteOptions(propagation_policy=propagation, preconditions=client.V1Preconditions(uid=uid))
    try:
        if kind in CUSTOM_PLURALS:
            _custom().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, body=options
            )
        else:
            _typed(kind, "delete")(name, namespace, body=options)
    except client.ApiException as exc:
        if exc.status in (404, 409):
            return False
        raise
    STORE.gone(kind, namespace, name)
    return True


def delete(kind: str, namespace: str, name: str) -> None:
    """Delete, with its dependents (a Job's pods) in the background; an object already gone is fine."""
    try:
        if kind in CUSTOM_PLURALS:
            _custom().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, propagation_policy="Background"
            )
        else:
            _typed(kind, "delete")(name, namespace, propagation_policy="Background")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    STORE.gone(kind, namespace, name)


def delete_labelled(kind: str, namespace: str, labels: dict[str, str], group: str) -> None:
    """Delete every object of a kind with these labels, in one request (dependents in the background); group
    is their value of the store's group label."""
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    _typed(kind, "delete_collection")(namespace, label_selector=selector, propagation_policy="Background")
    for obj in STORE.group(kind, namespace, group):
        if all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items()):
            STORE.gone(kind, namespace, obj["metadata"]["name"])


def merge_patch(kind: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    if kind in CUSTOM_PLURALS:
        result = _custom().patch_namespaced_custom_object(
            GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, patch, _content_type="application/merge-patch+json"
        )
        return _remember(kind, result)
    result = _typed(kind, "patch")(name, namespace, patch, _content_type="application/merge-patch+json")
    return _remember(kind, _plain(result))


def strategic_merge_patch(kind: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    """Built-in kinds only: lists such as a pod template's containers merge by their keys (name)."""
    result = _typed(kind, "patch")(name, namespace, patch, _content_type="application/strategic-merge-patch+json")
    return _remember(kind, _plain(result))


def patch_status(kind: str, namespace: str, name: str, status: dict[str, Any]) -> None:
    result = _custom().patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, {"status": status}
    )
    _remember(kind, _plain(result))
