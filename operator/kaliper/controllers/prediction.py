"""spec.prediction of a ModelDeployment: the profile that sized it held to production. Every `interval` the
operator reads, from its own Prometheus (the chart's prometheus.url; a namespace names no other), the requests the
deployment's pods answered over the `window` and the latency percentiles the servers' own histogram gives
(metrics/production.py, confined to the namespace), and scores the profile's figures at that load
(profiling/prediction.py). What it found is status.production and the PredictionHolds condition, written by the
ModelDeployment's status sync (controllers/modeldeployment.py), the one writer of its status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from kaliper.api.modeldeployment import ModelDeploymentSpec, PredictionCheck
from kaliper.api.units import parse_duration
from kaliper.controllers import kube
from kaliper.controllers.run_baseline import saved_report_text
from kaliper.controllers.settings import SETTINGS
from kaliper.manifests.modeldeployment import owner_reference
from kaliper.metrics.production import NotScored, score_production
from kaliper.metrics.prometheus import PrometheusMetrics
from kaliper.metrics.promql_scope import QueryScope
from kaliper.profiling.prediction import PredictionScore, ProductionWindow, ProfiledLevel, production_status
from kaliper.report.schema import ProfileReport
from kaliper.report.store import read_document
from kaliper.runtimes import runtime_of

CONDITION = "PredictionHolds"
LABEL_REPROFILE = "kaliper.dev/reprofile-of"  # on a ProfileRun the check made: the ModelDeployment it profiles
PROMETHEUS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Checked:
    """One check: status.production, and the PredictionHolds condition's status (None: Unknown) and reason."""

    production: dict[str, Any]
    holds: bool | None
    reason: str
    message: str


def due(prediction: PredictionCheck, production: dict[str, Any] | None, now: datetime) -> bool:
    """Never checked, or checked `interval` ago or more (a changed spec is checked at once by the caller)."""
    if not production or not production.get("checkedAt"):
        return True
    return (now - _time(production["checkedAt"])).total_seconds() >= parse_duration(prediction.interval)


def profile_source(prediction: PredictionCheck) -> str:
    reference = prediction.profile
    if reference.run is not None:
        return f"ProfileRun {reference.run}"
    assert reference.config_map is not None
    return f"ConfigMap {reference.config_map.name} key {reference.config_map.key}"


def checked_status(
    prediction: PredictionCheck,
    configuration: dict[str, str] | None,
    now: datetime,
    scored: PredictionScore | None,
    window: ProductionWindow | None = None,
    levels: list[ProfiledLevel] | None = None,
    unavailable: tuple[str, str] | None = None,
) -> Checked:
    status = production_status(
        scored,
        window,
        levels or [],
        profile=profile_source(prediction),
        configuration=configuration,
        window_text=prediction.window,
        checked_at=now,
        unavailable=unavailable,
    )
    # Nones kept: a merge patch's null removes what an earlier check wrote there.
    production = status.model_dump(by_alias=True, mode="json")
    return Checked(production, status.holds, status.reason, status.message)


def _report(prediction: PredictionCheck, namespace: str) -> ProfileReport | str:
    """The profile's report, or why there is none."""
    reference, source = prediction.profile, profile_source(prediction)
    if reference.run is not None:
        text = saved_report_text(namespace, reference.run)
    else:
        assert reference.config_map is not None
        configmap = kube.get("ConfigMap", namespace, reference.config_map.name)
        text = read_document(configmap, reference.config_map.key) if configmap else None
    if text is None:
        return (
            f"{source} holds no report (a ProfileRun's report is there once the run finished): spec.prediction.profile"
        )
    try:
        return ProfileReport.model_validate_json(text)
    except ValidationError:
        return f"{source} is not a Kaliper profile report: spec.prediction.profile"


def check(namespace: str, name: str, spec: ModelDeploymentSpec, now: datetime) -> Checked:
    """Read production and score the profile's prediction against it; what could not be read is said."""
    prediction = spec.prediction
    assert prediction is not None

    def not_scored(reason: str, message: str, configuration: dict[str, str] | None = None) -> Checked:
        return checked_status(prediction, configuration, now, None, unavailable=(reason, message))

    report = _report(prediction, namespace)
    if isinstance(report, str):
        return not_scored("ProfileUnavailable", report)
    runtime = runtime_of(spec)
    if runtime.latency_histogram is None:
        return not_scored(
            "ProductionUnavailable",
            f"{runtime.display_name} exports no latency histogram Kaliper reads (the built-in server and vLLM do)",
        )
    if SETTINGS.prometheus_url is None:
        return not_scored("ProductionUnavailable", "the operator has no Prometheus: set the chart's prometheus.url")
    client = PrometheusMetrics(
        SETTINGS.prometheus_url, PROMETHEUS_TIMEOUT_S, QueryScope(namespace, SETTINGS.tenancy.query_namespaces)
    )
    # A Deployment's pods: <deployment>-<its pod-template-hash>-<five characters>; a StatefulSet's "<name>-x-0" of
    # another object of the namespace does not match.
    selector = f'namespace="{namespace}",pod=~"{name}-[a-z0-9]+-[a-z0-9]{{5}}"'
    query = (selector, runtime.latency_histogram, parse_duration(prediction.window), now.timestamp())
    try:
        found = score_production(
            report, prediction.configuration, client, query, prediction.tolerance, "spec.prediction.configuration"
        )
    except NotScored as exc:
        return not_scored(exc.reason, exc.message, exc.configuration)
    return checked_status(prediction, found.configuration, now, found.score, found.window, found.levels)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def reprofile_due(
    prediction: PredictionCheck, condition: dict[str, Any], before: dict[str, Any] | None, now: datetime
) -> bool:
    """spec.prediction.reprofile asks for a run now: PredictionHolds has been False for `after` or longer, and
    the last re-profile was made `minInterval` ago or more (pure)."""
    policy = prediction.reprofile
    if policy is None or condition.get("status") != "False":
        return False
    if (now - _time(condition["lastTransitionTime"])).total_seconds() < parse_duration(policy.after):
        return False
    last = (before or {}).get("reprofiledAt")
    return last is None or (now - _time(last)).total_seconds() >= parse_duration(policy.min_interval)


def reprofile(owner: dict[str, Any], spec: ModelDeploymentSpec, now: datetime) -> tuple[str | None, str | None]:
    """Make the ProfileRun that profiles again: (its name, what to say); (None, None) while one it made still
    runs; (None, why not) when it cannot. Its spec is the source run's, targeting this deployment."""
    policy = spec.prediction.reprofile if spec.prediction else None
    assert policy is not None and spec.prediction is not None
    namespace, name = owner["metadata"]["namespace"], owner["metadata"]["name"]
    running = [
        r["metadata"]["name"]
        for r in kube.list_objects("ProfileRun", namespace, f"{LABEL_REPROFILE}={name}")
        if (r.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    if running:
        return None, None
    source = policy.run or spec.prediction.profile.run
    assert source is not None  # the spec's rule
    found = kube.get("ProfileRun", namespace, source)
    if found is None:
        return None, f"spec.prediction.reprofile: ProfileRun {source} is not there to copy"
    run_spec = {**found["spec"], "target": {"deploymentRef": {"name": name}}}
    made = f"{name[:40]}-r{now:%m%d%H%M}"
    kube.apply(
        {
            "apiVersion": "kaliper.dev/v1alpha1",
            "kind": "ProfileRun",
            "metadata": {
                "name": made,
                "namespace": namespace,
                "labels": {LABEL_REPROFILE: name},
                "ownerReferences": [owner_reference("ModelDeployment", name, owner["metadata"]["uid"])],
            },
            "spec": run_spec,
        }
    )
    return made, f"ProfileRun {made} profiles {name} again, a copy of ProfileRun {source}: the prediction has not held"
