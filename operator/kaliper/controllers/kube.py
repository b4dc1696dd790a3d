"""The Kubernetes API calls the handlers make: server-side apply, reads, and status patches."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from kubernetes import client, config

from kaliper.api.common import GROUP, VERSION

FIELD_MANAGER = "kaliper"
APPLY = {"field_manager": FIELD_MANAGER, "force": True, "_content_type": "application/apply-patch+yaml"}


@cache
def api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        # The library reads $KUBECONFIG when it is imported; read it now instead.
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    return client.ApiClient()


def apply(obj: dict[str, Any]) -> dict[str, Any]:
    """Server-side apply: idempotent, and it leaves fields other managers own alone."""
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    if obj["kind"] == "Deployment":
        result = client.AppsV1Api(api_client()).patch_namespaced_deployment(name, namespace, obj, **APPLY)
    elif obj["kind"] == "Service":
        result = client.CoreV1Api(api_client()).patch_namespaced_service(name, namespace, obj, **APPLY)
    else:
        raise ValueError(f"kaliper does not apply {obj['kind']} objects")
    return api_client().sanitize_for_serialization(result)


def read_deployment(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        result = client.AppsV1Api(api_client()).read_namespaced_deployment(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return api_client().sanitize_for_serialization(result)


def patch_status(plural: str, namespace: str, name: str, status: dict[str, Any]) -> None:
    client.CustomObjectsApi(api_client()).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, plural, name, {"status": status}
    )
