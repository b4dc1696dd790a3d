"""The Kubernetes API calls the handlers make: server-side apply, reads, lists, deletes and status patches,
on plain dicts. The handful of kinds Kaliper touches are listed here; nothing else is reachable."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from kubernetes import client, config

from kaliper.api.common import GROUP, VERSION

FIELD_MANAGER = "kaliper"
APPLY = {"field_manager": FIELD_MANAGER, "force": True, "_content_type": "application/apply-patch+yaml"}
CUSTOM_PLURALS = {"ModelDeployment": "modeldeployments", "ProfileRun": "profileruns"}
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
    # One connection per handler thread (kopf's executor, KALIPER_WORKERS), so none is thrown away.
    configuration.connection_pool_maxsize = int(os.environ.get("KALIPER_WORKERS", "16")) + 4
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
        result = _custom().patch_namespaced_custom_object(
            GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, obj, **APPLY
        )
    else:
        result = _typed(kind, "patch")(name, namespace, obj, **APPLY)
    return _plain(result)


def get(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        if kind in CUSTOM_PLURALS:
            return _plain(_custom().get_namespaced_custom_object(GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name))
        return _plain(_typed(kind, "read")(name, namespace))
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def read_deployment(namespace: str, name: str) -> dict[str, Any] | None:
    return get("Deployment", namespace, name)


def list_labelled(kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
    if kind in CUSTOM_PLURALS:
        result = _custom().list_namespaced_custom_object(
            GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], label_selector=selector
        )
        return list(result.get("items") or [])
    return list(_plain(_typed(kind, "list")(namespace, label_selector=selector)).get("items") or [])


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


def delete_labelled(kind: str, namespace: str, selector: str) -> None:
    """Delete every object of a kind with these labels, in one request (dependents in the background)."""
    _typed(kind, "delete_collection")(namespace, label_selector=selector, propagation_policy="Background")


def merge_patch(kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
    _typed(kind, "patch")(name, namespace, patch, _content_type="application/merge-patch+json")


def patch_status(plural: str, namespace: str, name: str, status: dict[str, Any]) -> None:
    _custom().patch_namespaced_custom_object_status(GROUP, VERSION, namespace, plural, name, {"status": status})
