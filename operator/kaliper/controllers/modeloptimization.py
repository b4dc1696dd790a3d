"""ModelOptimization handlers: start the optimizer Job, follow it, write its report into the status, create
the follow-ups.

Steps are driven by watch events (the object, its Job) and by the pacer while the optimization runs (it
also reads the optimizer's latest progress line into status.message); no finalizer, as for ProfileRuns.
Each step works out what to do from what exists: no Job yet -> create it; a results ConfigMap -> finish;
a failed Job without results -> fail with the pod's reason; otherwise report progress."""

from __future__ import annotations

from typing import Any

import kopf
from kubernetes.client import ApiException
from pydantic import ValidationError

from kaliper.api.common import GROUP, VERSION
from kaliper.api.loader import problems_from
from kaliper.api.modeloptimization import ModelOptimizationStatus
from kaliper.api.resources import ModelOptimization
from kaliper.controllers import kube, metrics
from kaliper.controllers.diagnosis import job_ended, job_failure
from kaliper.controllers.settings import SETTINGS
from kaliper.controllers.stepper import StatusStep, Stepper, finished
from kaliper.controllers.store import STORE
from kaliper.manifests.modeldeployment import BuildError
from kaliper.manifests.modeloptimization import (
    LABEL_OPTIMIZATION,
    build_follow_up,
    build_optimizer,
    optimizer_name,
    results_name,
)
from kaliper.optimize.followups import follow_ups
from kaliper.report.optimization import OptimizationReport
from kaliper.report.publish import RESULT_KEY
from kaliper.report.status import optimization_status
from kaliper.report.store import read_document

PLURAL = "modeloptimizations"
STEP_INTERVAL_S = 10


class OptimizationStep(StatusStep[ModelOptimizationStatus]):
    kind = "ModelOptimization"


def _step(namespace: str, name: str) -> None:
    body = STORE.get("ModelOptimization", namespace, name) or kube.get("ModelOptimization", namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp") or finished(body):
        return
    state = OptimizationStep(body, ModelOptimizationStatus)
    try:
        resource = ModelOptimization.model_validate(dict(body))
        objects = build_optimizer(body, resource.spec, SETTINGS.image)
    except (ValidationError, BuildError) as exc:
        message = (
            str(exc) if isinstance(exc, BuildError) else "; ".join(map(str, problems_from(exc, ModelOptimization)))
        )
        state.fail("InvalidSpec", message)
        state.write()
        return
    job = kube.get("Job", namespace, optimizer_name(name))
    if job is None:
        for obj in objects:
            kube.apply(obj)
        state.status.phase = "Running"
        state.status.start_time = state.status.start_time or state.now
        message = f"optimizer Job {optimizer_name(name)} started"
        state.status.message = message
        state.condition("Progressing", True, "JobCreated", message)
        state.event("JobCreated", message)
        state.write()
        return
    results = kube.get("ConfigMap", namespace, results_name(name))
    if results is not None:
        text = read_document(results, RESULT_KEY)
        if text is not None:
            _finish(state, body, resource, OptimizationReport.model_validate_json(text))
            state.write()
            return
    failure = _job_failure(job)
    if failure is not None:
        state.fail("OptimizerFailed", failure)
        state.write()
        return
    line = _progress_line(namespace, name)
    if line and line != state.status.message:
        state.status.message = line[:4096]
        state.write()


STEPPER = Stepper("ModelOptimization", _step, STEP_INTERVAL_S)
forget_all = STEPPER.forget_all


@kopf.on.event(GROUP, VERSION, PLURAL)
def optimization_changed(body: Any, type: str | None, namespace: str, name: str, **_: Any) -> None:
    if STEPPER.object_changed(body, type):
        STEPPER.hurry(namespace, name)


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_OPTIMIZATION: kopf.PRESENT})
def optimizer_job_changed(body: Any, type: str | None, **_: Any) -> None:
    STEPPER.job_changed(body, type, LABEL_OPTIMIZATION)


def _finish(
    state: OptimizationStep, body: dict[str, Any], resource: ModelOptimization, report: OptimizationReport
) -> None:
    """The report into the status; on success the follow-ups, created before the status says Succeeded so a
    failure to create them is retried by the next step."""
    decided = optimization_status(report)
    status = state.status
    for field in decided.model_fields_set:
        setattr(status, field, getattr(decided, field))
    status.start_time = state.status.start_time or report.started_at
    if report.phase != "Succeeded" or report.chosen is None:
        state.fail(report.reason or "OptimizationFailed", report.message or "the optimization failed")
        return
    made = follow_ups(resource.spec, report.chosen)
    if made.deployment is not None:
        name, deployment = made.deployment
        kube.apply(build_follow_up(body, "ModelDeployment", name, deployment.to_manifest()))
        if made.profile_run is not None:
            name, run = made.profile_run
            kube.apply(build_follow_up(body, "ProfileRun", name, run.to_manifest()))
        status.follow_up = made.status()
        state.event("FollowUpsCreated", f"created {made.described()} for {report.chosen.candidate_id}")
    status.phase = "Succeeded"
    status.message = (report.message or "")[:4096]
    status.completion_time = report.finished_at or state.now
    state.condition("Complete", True, "Succeeded", status.message)
    state.condition("Progressing", False, "Succeeded", status.message)
    metrics.FINISHED.labels("ModelOptimization", "Succeeded").inc()
    state.event("Optimized", status.message)


def _job_failure(job: dict[str, Any]) -> str | None:
    """Why the optimizer Job failed without a report, or None while it has not: its condition and its
    container's exit while the pod is still there, with the optimizer's last lines."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["labels"][LABEL_OPTIMIZATION]
    pods = kube.list_objects("Pod", namespace, f"{LABEL_OPTIMIZATION}={name}") if job_ended(job) else []
    failure = job_failure(job, pods, "optimizer Job")
    if failure is None:
        return None
    tail = next((t for t in (_log_tail(namespace, p["metadata"]["name"], 5) for p in pods) if t), "")
    return f"{failure}; it wrote no report" + (f"; its last lines: {tail}" if tail else "")


def _progress_line(namespace: str, name: str) -> str | None:
    """The optimizer's latest progress line (it prints one per step on stderr)."""
    pods = kube.list_objects("Pod", namespace, f"{LABEL_OPTIMIZATION}={name}")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if not running:
        return None
    tail = _log_tail(namespace, running[0]["metadata"]["name"], 1)
    return tail or None


def _log_tail(namespace: str, pod: str, lines: int) -> str:
    from kubernetes import client

    try:
        text = client.CoreV1Api(kube.api_client()).read_namespaced_pod_log(
            pod, namespace, container="optimizer", tail_lines=lines, _request_timeout=kube.REQUEST_TIMEOUT
        )
    except ApiException:
        return ""
    return " | ".join(line.strip() for line in str(text).splitlines() if line.strip())[-2000:]
