"""What a trial's server pods, and the autoscaler they ran under, recorded in the API server: restarts and OOM
kills, how long each took to become ready, and an autoscaled target's rehearsal (worked out by
profiling.rehearsal from the pods and the HorizontalPodAutoscaler's Events read here)."""

from __future__ import annotations

from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentTemplate
from kaliper.controllers import kube
from kaliper.controllers.diagnosis import (
    autoscaler_warnings,
    pod_timelines,
    rescales,
    restarts_and_oom_kills,
    server_startup,
)
from kaliper.profiling import trials
from kaliper.profiling.rehearsal import rehearse
from kaliper.report.schema import Rehearsal, StageResult, TrialReport, TrialResources


def with_pod_figures(
    report: TrialReport,
    resources: TrialResources,
    namespace: str,
    deployment: ModelDeploymentTemplate | None,
    servers: list[dict[str, Any]],
) -> TrialReport:
    """The trial's report with its resources and what its server pods say."""
    resources.restarts, resources.oom_kills = restarts_and_oom_kills(servers)
    rehearsal = trial_rehearsal(namespace, report.name, deployment, report.stage, servers)
    return trials.with_resources(report, resources, server_startup(servers), rehearsal)


def trial_rehearsal(
    namespace: str,
    trial_name: str,
    deployment: ModelDeploymentTemplate | None,
    stage: StageResult | None,
    servers: list[dict[str, Any]],
) -> Rehearsal | None:
    """The rehearsal of a trial whose servers ran under an autoscaler (its ModelDeployment's, named as the trial);
    None for fixed replicas."""
    if deployment is None or deployment.autoscaling is None or stage is None:
        return None
    events = kube.events_about(namespace, "HorizontalPodAutoscaler", trial_name)
    warnings = autoscaler_warnings(events, stage.started_at)
    return rehearse(trial_name, stage, pod_timelines(servers), rescales(events), warnings)
