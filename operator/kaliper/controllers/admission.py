"""Whether a ProfileRun may run at all, decided before the operator sends anything on its behalf (no query to
a Prometheus, no fit of a workload, no load): what its spec names (kaliper.profiling.tenancy), the PromQL it
writes (kaliper.metrics.written_queries), the Service its URL names as the API holds it, its baseline; and,
once its trials are listed, whether the cluster can deploy them and their load stays within the namespace's
caps. A refusal ends the run Failed with a message naming the field; so does a check that raises (a
malformed input must not retry forever). Only the API server failing is retried."""

from __future__ import annotations

import base64
from typing import Any

from kubernetes.client import ApiException
from pydantic import ValidationError

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_duration
from kaliper.controllers import kube
from kaliper.controllers.run_baseline import baseline_text
from kaliper.controllers.run_records import RunFailed
from kaliper.loadgen.traces import Replay, TraceError, parse_trace, play
from kaliper.metrics.promql_scope import QueryScope
from kaliper.metrics.written_queries import written_queries_problem
from kaliper.profiling.plan import Configuration, deploy_problem, machine_paths_problem
from kaliper.profiling.tenancy import TargetHost, TenancyPolicy, caps_problem, service_problem, tenancy_problem
from kaliper.report.schema import ProfileReport


def _refused_on_error(check: Any, what: str) -> Any:
    """A check's answer; an exception (not the API server's) as a refusal, naming what was checked."""
    try:
        return check()
    except ApiException:
        raise
    except Exception as exc:  # malformed input the checks did not foresee: said once, never retried
        return f"{what} could not be checked: {exc.__class__.__name__}: {exc}"


def admission_problem(spec: ProfileRunSpec, namespace: str, tenancy: TenancyPolicy) -> str | None:
    """Why the run may not start at all, from its spec, before it makes or sends anything: a path on a machine,
    something outside what its namespace may reach, PromQL reading another namespace's series, a baseline that
    cannot be read."""

    def problem() -> str | None:
        return (
            machine_paths_problem(spec)
            or tenancy_problem(spec, namespace, tenancy)
            or written_queries_problem(spec, query_scope(namespace, tenancy))
            or baseline_problem(spec, namespace)
        )

    return _refused_on_error(problem, "the run's spec")


def url_service(target: TargetHost, tenancy: TenancyPolicy) -> dict[str, Any] | None:
    """The Service a target URL names, as the API holds it (None: not there, yet); RunFailed when it may not be
    loaded (kaliper.profiling.tenancy.service_problem) or the operator may not read it."""
    assert target.service is not None and target.namespace is not None
    try:
        service = kube.get("Service", target.namespace, target.service)
    except ApiException as exc:
        if exc.status != 403:
            raise
        raise RunFailed(
            f"spec.target.url: the operator may not read Services of namespace {target.namespace} (the chart's "
            "watchNamespaces), so it cannot check where the load would go"
        ) from None
    if service is not None and (problem := service_problem(service, target, tenancy)):
        raise RunFailed(problem)
    return service


def query_scope(namespace: str, tenancy: TenancyPolicy) -> QueryScope:
    """What the PromQL a run of `namespace` writes may read: its namespace, and those the admin allowed."""
    return QueryScope(namespace, tenancy.query_namespaces)


def trials_problem(
    spec: ProfileRunSpec, configs: list[Configuration], namespace: str, image: str, tenancy: TenancyPolicy
) -> str | None:
    """Why the planned trials cannot run on this cluster (after profiling.run_plan's own checks): one it cannot
    deploy, or more load than the namespace may apply (its caps, a trace's busiest second read from its
    ConfigMap)."""

    def problem() -> str | None:
        if found := deploy_problem(configs, namespace, image):
            return found
        if spec.load.trace is None:
            return caps_problem(spec, configs, namespace, tenancy)
        peak, found = trace_peak_per_s(spec, namespace)
        return found or caps_problem(spec, configs, namespace, tenancy, peak)

    return _refused_on_error(problem, "the run's trials")


def trace_peak_per_s(spec: ProfileRunSpec, namespace: str) -> tuple[float | None, str | None]:
    """The most requests a trace replay's window sends in one second at speed 1, read from the trace's
    ConfigMap; or why it cannot be read."""
    replay, prompts = spec.load.trace, spec.payload.prompts
    assert replay is not None
    source = prompts.trace if prompts is not None else None
    if source is None or source.config_map is None:
        return None, None  # a file: refused on a cluster by machine_paths_problem
    field, reference = "spec.payload.prompts.trace.configMap", source.config_map
    configmap = kube.get("ConfigMap", namespace, reference.name) or {}
    text = (configmap.get("data") or {}).get(reference.key)
    if text is None and reference.key in (configmap.get("binaryData") or {}):
        text = base64.b64decode(configmap["binaryData"][reference.key]).decode()
    if text is None:
        return None, f"{field}: ConfigMap {reference.name} has no key {reference.key} in namespace {namespace}"
    duration = parse_duration(replay.duration) if replay.duration else None
    window = Replay(1.0, parse_duration(replay.start), duration, replay.loop, replay.conversations)
    try:
        played = play(parse_trace(text, source.format, f"ConfigMap {reference.name}"), window)
    except TraceError as exc:
        return None, f"{field}: {exc}"
    return float(played.peak_per_second()), None


def baseline_problem(spec: ProfileRunSpec, namespace: str) -> str | None:
    """Why spec.baseline cannot be read on Kubernetes (checked before any trial runs), or None."""
    if spec.baseline is None:
        return None
    if spec.baseline.report is not None:
        return (
            "spec.baseline.report is a file for `kaliper run`; on Kubernetes name a finished ProfileRun "
            "(baseline.run) or a ConfigMap holding a report (baseline.configMap)"
        )
    field, text = baseline_text(spec, namespace)
    if text is None:
        return f"{field}: {spec.baseline.describe()} has no report in namespace {namespace} (not finished, or absent)"
    try:
        ProfileReport.model_validate_json(text)
    except ValidationError as exc:
        return f"{field}: {spec.baseline.describe()} is not a Kaliper profile report: {exc.errors()[0]['msg']}"
    return None
