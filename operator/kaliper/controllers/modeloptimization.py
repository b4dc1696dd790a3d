"""ModelOptimization handlers: start the optimizer Job, follow it, write its report into the status, create
the follow-ups.

Steps are driven by watch events (the object, its Job) and by the pacer while the optimization runs (it
also reads the optimizer's latest progress line into status.message); no finalizer, as for ProfileRuns.
Each step works out what to do from what exists: no Job yet -> create it; a results ConfigMap -> finish;
a failed Job without results -> fail with the pod's reason; otherwise report progress."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes.client import ApiException
from pydantic import ValidationError

from kaliper.api.common import GROUP, VERSION, Condition, with_condition
from kaliper.api.loader import problems_from
from kaliper.api.modeloptimization import FollowUpStatus, ModelOptimizationStatus
from kaliper.api.resources import ModelOptimization
from kaliper.controllers import expiry, kube
from kaliper.controllers.locks import StepLocks
from kaliper.controllers.pacer import PACER
from kaliper.controllers.settings import SETTINGS
from kaliper.controllers.store import STORE
from kaliper.lifecycle.gc import FINISHED
from kaliper.loadgen.publish import RESULT_KEY
from kaliper.log import get_logger
from kaliper.manifests.modeldeployment import BuildError
from kaliper.manifests.modeloptimization import (
    LABEL_OPTIMIZATION,
    build_follow_up,
    build_optimizer,
    optimizer_name,
    results_name,
)
from kaliper.optimize.followups import chosen_source, deployment_spec, profile_run_spec
from kaliper.report.optimization import OptimizationReport
from kaliper.report.status import optimization_status
from kaliper.report.store import read_document

PLURAL = "modeloptimizations"
STEP = "modeloptimization-step"
STEP_INTERVAL_S = 10
log = get_logger("kaliper.modeloptimization")

LOCKS = StepLocks()


def forget_all() -> None:
    LOCKS.clear()


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@kopf.on.event(GROUP, VERSION, PLURAL)
def optimization_changed(body: Any, type: str | None, namespace: str, name: str, **_: Any) -> None:
    gone = type == "DELETED" or bool(body["metadata"].get("deletionTimestamp"))
    STORE.seen("ModelOptimization", body, deleted=type == "DELETED")
    finished = (body.get("status") or {}).get("phase") in FINISHED
    PACER.track(STEP, (namespace, name), not gone and not finished)
    expiry.track("ModelOptimization", body, gone)
    if gone or finished:
        LOCKS.forget(namespace, name)
    else:
        _step_quietly(namespace, name)


PACER.every(STEP, STEP_INTERVAL_S, lambda namespace, name: step(namespace, name))


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_OPTIMIZATION: kopf.PRESENT})
def optimizer_job_changed(body: Any, type: str | None, namespace: str, **_: Any) -> None:
    STORE.seen("Job", body, deleted=type == "DELETED")
    conditions = (body.get("status") or {}).get("conditions") or []
    if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions):
        _step_quietly(namespace, body["metadata"]["labels"][LABEL_OPTIMIZATION])


def _step_quietly(namespace: str, name: str) -> None:
    try:
        step(namespace, name)
    except Exception as exc:  # the pacer steps again
        log.warning("step failed; the pacer retries", object=f"{namespace}/{name}", error=str(exc), exc_info=True)


def step(namespace: str, name: str) -> None:
    LOCKS.run_alone(namespace, name, _step)


class _Status:
    """The status being written in this step: typed, patched once."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.generation = body["metadata"].get("generation", 1)
        current = body.get("status") or {}
        self.status = ModelOptimizationStatus.model_validate(current) if current else ModelOptimizationStatus()

    def condition(self, kind: str, ok: bool, reason: str, message: str) -> None:
        conditions: list[Condition] = self.status.conditions
        self.status.conditions = with_condition(conditions, kind, ok, reason, message, utcnow(), self.generation)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        (kopf.warn if warning else kopf.info)(self.body, reason=reason, message=message)

    def fail(self, reason: str, message: str) -> None:
        self.status.phase = "Failed"
        self.status.message = message[:4096]
        self.status.completion_time = self.status.completion_time or utcnow()
        self.condition("Complete", False, reason, message)
        self.condition("Progressing", False, reason, message)
        self.event(reason, message, warning=True)

    def write(self) -> None:
        self.status.observed_generation = self.generation
        meta = self.body["metadata"]
        kube.patch_status("ModelOptimization", meta["namespace"], meta["name"], self.status.to_manifest())


def _step(namespace: str, name: str) -> None:
    body = STORE.get("ModelOptimization", namespace, name) or kube.get("ModelOptimization", namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return
    if (body.get("status") or {}).get("phase") in FINISHED:
        return
    state = _Status(body)
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
        state.status.start_time = state.status.start_time or utcnow()
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
        state.fail("OptimizerFailed", f"optimizer Job {optimizer_name(name)} failed without a report: {failure}")
        state.write()
        return
    line = _progress_line(namespace, name)
    if line and line != state.status.message:
        state.status.message = line[:4096]
        state.write()


def _finish(state: _Status, body: dict[str, Any], resource: ModelOptimization, report: OptimizationReport) -> None:
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
    follow = resource.spec.follow_up
    if follow is not None and follow.deployment is not None:
        deployment = deployment_spec(follow.deployment, chosen_source(resource.spec), report.chosen)
        kube.apply(build_follow_up(body, "ModelDeployment", follow.deployment.name, deployment.to_manifest()))
        status.follow_up = FollowUpStatus(deployment_name=follow.deployment.name)
        if follow.profile_run is not None:
            run = profile_run_spec(follow.profile_run, follow.deployment.name)
            kube.apply(build_follow_up(body, "ProfileRun", follow.profile_run.name, run.to_manifest()))
            status.follow_up.profile_run_name = follow.profile_run.name
        created = ", ".join(n for n in (status.follow_up.deployment_name, status.follow_up.profile_run_name) if n)
        state.event("FollowUpsCreated", f"created {created} for {report.chosen.candidate_id}")
    status.phase = "Succeeded"
    status.message = (report.message or "")[:4096]
    status.completion_time = report.finished_at or utcnow()
    state.condition("Complete", True, "Succeeded", status.message)
    state.condition("Progressing", False, "Succeeded", status.message)
    state.event("Optimized", status.message)


def _job_failure(job: dict[str, Any]) -> str | None:
    """Why the Job failed, or None while it has not: the container's termination (OOMKilled, exit code) when
    its pod is still there, else the Job's own condition (deadline exceeded)."""
    conditions = (job.get("status") or {}).get("conditions") or []
    failed = next((c for c in conditions if c.get("type") == "Failed" and c.get("status") == "True"), None)
    if failed is None:
        return None
    namespace, name = job["metadata"]["namespace"], job["metadata"]["labels"][LABEL_OPTIMIZATION]
    for pod in kube.list_objects("Pod", namespace, f"{LABEL_OPTIMIZATION}={name}"):
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (container.get("state") or {}).get("terminated")
            if terminated:
                tail = _log_tail(namespace, pod["metadata"]["name"], 5)
                found = f"{terminated.get('reason', 'Error')} (exit code {terminated.get('exitCode')})"
                return found + (f"; its last lines: {tail}" if tail else "")
    return f"{failed.get('reason', 'Failed')}: {failed.get('message', '')}".strip()


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
            pod, namespace, container="optimizer", tail_lines=lines
        )
    except ApiException:
        return ""
    return " | ".join(line.strip() for line in str(text).splitlines() if line.strip())[-2000:]
