"""The Kubernetes API calls the handlers make: server-side apply, reads, lists, deletes and status patches,
on plain dicts. The handful of kinds Kaliper touches are listed here; nothing else is reachable. What a write
returns of a watched kind goes into the store at once, so the next step sees the operator's own writes.

Every call here is guarded: made at no more than the configured rate (client-go's QPS and burst), with a
timeout (a frozen API server must not hold a worker forever), and its failure told to api_health: a call that
fails because the API server is away raises ApiServerAway, which the pacer does not count against the object
(and while it is away the pacer starts no step); one that goes through tells it the API server is back."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from kubernetes import client, config

from kaliper.api.common import GROUP, VERSION
from kaliper.controllers.api_health import API_SERVER, ApiServerAway, TokenBucket
from kaliper.controllers.pacer import HANDLER_WORKERS, PACER_WORKERS
from kaliper.controllers.store import STORE, WATCHED

FIELD_MANAGER = "kaliper"
REQUEST_TIMEOUT = (5.0, 30.0)  # to connect, to read the answer: a frozen API server is noticed within 30 s
CALL = {"_request_timeout": REQUEST_TIMEOUT}
APPLY = {"field_manager": FIELD_MANAGER, "force": True, "_content_type": "application/apply-patch+yaml", **CALL}
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
    "NetworkPolicy": (client.NetworkingV1Api, "network_policy"),
    "EndpointSlice": (client.DiscoveryV1Api, "endpoint_slice"),
    "HorizontalPodAutoscaler": (client.AutoscalingV2Api, "horizontal_pod_autoscaler"),
}


@cache
def api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        # The library reads $KUBECONFIG when it is imported; read it now instead.
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    configuration = client.Configuration.get_default_copy()
    # One connection per thread that calls the API (kopf's executor and the pacer's two pools), so none is thrown
    # away.
    configuration.connection_pool_maxsize = HANDLER_WORKERS + 2 * PACER_WORKERS + 4
    return client.ApiClient(configuration)


RATE = TokenBucket(rate=50.0, burst=100)  # the chart's apiServer.qps and burst, set when the operator starts
Call = TypeVar("Call", bound=Callable[..., Any])


def _guarded(call: Call) -> Call:
    @functools.wraps(call)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        RATE.take()
        try:
            result = call(*args, **kwargs)
        except Exception as exc:
            if API_SERVER.check(exc):
                raise ApiServerAway(str(exc)[:300]) from exc
            raise
        if not API_SERVER.reachable:
            API_SERVER.back()  # a call went through before the prober's next try
        return result

    return guarded  # type: ignore[return-value]


def probe_readyz() -> None:
    """Raises unless the API server says it is ready (/readyz: its storage too). Any identity may read it."""
    client_ = api_client()
    request = client_.param_serialize("GET", "/readyz", auth_settings=["BearerToken"])
    client_.call_api(*request, _request_timeout=(5.0, 10.0)).read()


API_SERVER.probe = probe_readyz


def _plain(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) else api_client().sanitize_for_serialization(result)


def _typed(kind: str, verb: str) -> Any:
    if kind not in TYPED:
        raise ValueError(f"kaliper does not handle {kind} objects")
    api_class, suffix = TYPED[kind]
    return getattr(api_class(api_client()), f"{verb}_namespaced_{suffix}")


def _custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client())


@_guarded
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


@_guarded
def get(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        if kind in CUSTOM_PLURALS:
            plural = CUSTOM_PLURALS[kind]
            return _plain(_custom().get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name, **CALL))
        return _plain(_typed(kind, "read")(name, namespace, **CALL))
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


@_guarded
def list_objects(kind: str, namespace: str | None, selector: str = "") -> list[dict[str, Any]]:
    """Objects of a kind with these labels (a label selector; empty: all), in a namespace or in all of them
    (None)."""
    if kind in CUSTOM_PLURALS:
        custom, plural = _custom(), CUSTOM_PLURALS[kind]
        if namespace is None:
            result = custom.list_cluster_custom_object(GROUP, VERSION, plural, label_selector=selector, **CALL)
        else:
            result = custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, label_selector=selector, **CALL
            )
        return list(result.get("items") or [])
    if namespace is None:
        api_class, suffix = TYPED[kind]
        result = getattr(api_class(api_client()), f"list_{suffix}_for_all_namespaces")(label_selector=selector, **CALL)
    else:
        result = _typed(kind, "list")(namespace, label_selector=selector, **CALL)
    return list(_plain(result).get("items") or [])


@_guarded
def events_about(namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    """The Events recorded about one object (core/v1: what controllers such as the HPA's write)."""
    about = f"involvedObject.kind={kind},involvedObject.name={name}"
    result = client.CoreV1Api(api_client()).list_namespaced_event(namespace, field_selector=about, **CALL)
    return list(_plain(result).get("items") or [])


@_guarded
def delete_exactly(kind: str, namespace: str, name: str, uid: str, propagation: str) -> bool:
    """Delete this object and no other: the uid must still match. False when it is already gone, or replaced
    by another of the same name."""
    options = client.V1DeleteOptions(propagation_policy=propagation, preconditions=client.V1Preconditions(uid=uid))
    try:
        if kind in CUSTOM_PLURALS:
            _custom().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, body=options, **CALL
            )
        else:
            _typed(kind, "delete")(name, namespace, body=options, **CALL)
    except client.ApiException as exc:
        if exc.status in (404, 409):
            return False
        raise
    STORE.gone(kind, namespace, name)
    return True


@_guarded
def delete(kind: str, namespace: str, name: str) -> None:
    """Delete, with its dependents (a Job's pods) in the background; an object already gone is fine."""
    try:
        if kind in CUSTOM_PLURALS:
            _custom().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, propagation_policy="Background", **CALL
            )
        else:
            _typed(kind, "delete")(name, namespace, propagation_policy="Background", **CALL)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    STORE.gone(kind, namespace, name)


@_guarded
def delete_labelled(kind: str, namespace: str, labels: dict[str, str], group: str) -> None:
    """Delete every object of a kind with these labels, in one request (dependents in the background); group
    is their value of the store's group label."""
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    _typed(kind, "delete_collection")(namespace, label_selector=selector, propagation_policy="Background", **CALL)
    for obj in STORE.group(kind, namespace, group):
        if all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items()):
            STORE.gone(kind, namespace, obj["metadata"]["name"])


@_guarded
def merge_patch(kind: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    if kind in CUSTOM_PLURALS:
        result = _custom().patch_namespaced_custom_object(
            GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, patch,
            _content_type="application/merge-patch+json", **CALL,
        )  # fmt: skip
        return _remember(kind, result)
    result = _typed(kind, "patch")(name, namespace, patch, _content_type="application/merge-patch+json", **CALL)
    return _remember(kind, _plain(result))


@_guarded
def strategic_merge_patch(kind: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    """Built-in kinds only: lists such as a pod template's containers merge by their keys (name)."""
    result = _typed(kind, "patch")(
        name, namespace, patch, _content_type="application/strategic-merge-patch+json", **CALL
    )
    return _remember(kind, _plain(result))


@_guarded
def patch_status(kind: str, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Write an object's status; one deleted since it was read has none to write (seen: a trial's Deployment
    event mirrored into its ModelDeployment just after the trial's teardown deleted it)."""
    try:
        result = _custom().patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, CUSTOM_PLURALS[kind], name, {"status": status}, **CALL
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return
        raise
    _remember(kind, _plain(result))
