"""Why a trial's pods are not serving, or why its load generator failed, in words a user can act on.
Pure functions over the objects as the API returns them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kaliper.profiling.rehearsal import PodTimeline, Rescale
from kaliper.report.schema import ReplicaStartup, Startup

IMAGE_PULL = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
# Waiting reasons that will not fix themselves: fail the trial now instead of at its timeout.
CONFIG_ERRORS = {"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}
# A container killed by SIGKILL (exit code 137) that its runtime gave no reason for: containerd sometimes reports
# a kill by the kernel's OOM killer right after start as Error (containerd#8180: the OOM event arrives after the
# exit). Its next start tells; past this many restarts the crash loop is reported as it is.
UNEXPLAINED_KILL_RESTARTS = 2


@dataclass(frozen=True)
class PodProblem:
    reason: str  # ImagePullBackOff, CrashLoopBackOff, OOMKilled, Unschedulable, ...
    message: str
    definitive: bool  # False: it may still resolve (an unschedulable pod may fit once nodes are added)

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


def _statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])


def pod_problem(pods: list[dict[str, Any]]) -> PodProblem | None:
    """The most telling problem among the pods: a definitive one first (image pull, crash loop, OOM kill,
    bad container config), then an unschedulable pod."""
    pending: PodProblem | None = None
    for pod in pods:
        name = pod["metadata"]["name"]
        for container in _statuses(pod):
            waiting = (container.get("state") or {}).get("waiting") or {}
            last = (container.get("lastState") or {}).get("terminated") or {}
            terminated = (container.get("state") or {}).get("terminated") or {}
            reason = waiting.get("reason", "")
            where = f"container {container.get('name')} of pod {name}"
            if reason in IMAGE_PULL:
                # The kubelet alternates between ErrImagePull (a pull failed) and ImagePullBackOff (waiting to
                # try again) for one and the same failure: report it under one reason, whichever is showing.
                image = container.get("image", "")
                reason = "ErrImagePull" if reason == "ImagePullBackOff" else reason
                return PodProblem(
                    reason, f"{where} cannot pull image {image}: {waiting.get('message', '')}".strip(), True
                )
            if "OOMKilled" in (last.get("reason"), terminated.get("reason")):
                return PodProblem(
                    "OOMKilled",
                    f"{where} exceeded its memory limit; raise the memory limit of this configuration",
                    True,
                )
            if reason == "CrashLoopBackOff":
                if _killed_without_reason(last) and int(container.get("restartCount") or 0) < UNEXPLAINED_KILL_RESTARTS:
                    pending = pending or PodProblem(
                        "Killed",
                        f"{where} was killed (exit code 137) without a reason from its runtime; waiting for its next "
                        "start to tell whether its memory limit did it",
                        False,
                    )
                    continue
                detail = f"exit code {last.get('exitCode')}" if last else waiting.get("message", "")
                if last.get("message"):  # what the container wrote to its termination log
                    detail += f": {last['message'].strip()}"
                return PodProblem(reason, f"{where} keeps crashing ({detail}); see `kubectl logs {name}`", True)
            if reason in CONFIG_ERRORS:
                return PodProblem(reason, f"{where}: {waiting.get('message', '')}", True)
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
                pending = pending or PodProblem("Unschedulable", f"pod {name}: {condition.get('message', '')}", False)
    return pending


def _killed_without_reason(terminated: dict[str, Any]) -> bool:
    return terminated.get("exitCode") == 137 and terminated.get("reason") in (None, "", "Error")


def restarts_and_oom_kills(pods: list[dict[str, Any]]) -> tuple[int, int]:
    """(container restarts, containers killed for exceeding their memory limit) of the pods, from their own
    status: exact, and needing no exporter (kube-state-metrics only has a series after a termination)."""
    restarts = oom_kills = 0
    for pod in pods:
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            restarts += int(container.get("restartCount") or 0)
            last = (container.get("lastState") or {}).get("terminated") or {}
            terminated = (container.get("state") or {}).get("terminated") or {}
            oom_kills += "OOMKilled" in (last.get("reason"), terminated.get("reason"))
    return restarts, oom_kills


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (job.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind and c.get("status") == "True"), None)


def job_complete(job: dict[str, Any]) -> bool:
    return _condition(job, "Complete") is not None


def job_ended(job: dict[str, Any]) -> bool:
    """Complete or Failed: the Job runs no more pods."""
    return job_complete(job) or _condition(job, "Failed") is not None


def job_failure(job: dict[str, Any], pods: list[dict[str, Any]], what: str) -> str | None:
    """Why a Job failed, or None while it has not: its Failed condition, and the last of its pods' containers
    that exited with an error (exit code, reason, termination message) while the pod is still there."""
    failed = _condition(job, "Failed")
    if failed is None:
        return None
    detail = ""
    for pod in pods:
        for container in _statuses(pod):
            terminated = (container.get("state") or {}).get("terminated") or {}
            if terminated and terminated.get("exitCode", 0) != 0:
                detail = (
                    f"; pod {pod['metadata']['name']} exited with code {terminated.get('exitCode')}"
                    f" ({terminated.get('reason', 'Error')}): {terminated.get('message', '')}".rstrip(": ")
                )
    return f"{what} {job['metadata']['name']} failed: {failed.get('reason', '')} {failed.get('message', '')}{detail}"


def job_problem(job: dict[str, Any], pods: list[dict[str, Any]]) -> str | None:
    """Why a load-generator Job failed, or None while it has not."""
    return job_failure(job, pods, "load-generator Job")


def template_hashes(pods: list[dict[str, Any]]) -> list[str]:
    """The pod-template-hash of each pod: which ReplicaSet, so which revision of its Deployment, it belongs to."""
    return [p["metadata"].get("labels", {}).get("pod-template-hash", "") for p in pods]


def _at(timestamp: str | None) -> datetime | None:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")) if timestamp else None


def pod_timelines(pods: list[dict[str, Any]]) -> list[PodTimeline]:
    """Each pod's instants from its own status: creation, PodScheduled's transition, the first container's
    start, Ready's transition while it is ready (the last, for a pod that restarted), its deletion."""
    timelines = []
    for pod in pods:
        status, meta = pod.get("status") or {}, pod["metadata"]
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        created, ready = _at(meta.get("creationTimestamp")), conditions.get("Ready") or {}
        if created is None:
            continue
        running = [(c.get("state") or {}).get("running") or {} for c in status.get("containerStatuses") or []]
        timelines.append(
            PodTimeline(
                name=meta["name"],
                created=created,
                scheduled=_at((conditions.get("PodScheduled") or {}).get("lastTransitionTime")),
                started=_at(next((r["startedAt"] for r in running if r.get("startedAt")), None)),
                ready=_at(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None,
                deleted=_at(meta.get("deletionTimestamp")),
            )
        )
    return timelines


def server_startup(pods: list[dict[str, Any]]) -> Startup | None:
    """How long the server pods took from creation to ready, each stage from their own status. None while no
    pod is ready."""
    replicas = [
        ReplicaStartup(
            replica=pod.name,
            scheduled_s=_since(pod.created, pod.scheduled),
            started_s=_since(pod.created, pod.started),
            ready_s=(pod.ready - pod.created).total_seconds(),
        )
        for pod in pod_timelines(pods)
        if pod.ready is not None
    ]
    if not replicas:
        return None
    replicas.sort(key=lambda r: r.replica)
    return Startup(ready_s=max(r.ready_s for r in replicas), source="pods", replicas=replicas)


def _since(origin: datetime, moment: datetime | None) -> float | None:
    return (moment - origin).total_seconds() if moment is not None else None


RESCALED = re.compile(r"New size: (\d+);")


def rescales(events: list[dict[str, Any]]) -> list[Rescale]:
    """The HorizontalPodAutoscaler's decisions, from its SuccessfulRescale events ("New size: 3; reason: cpu
    resource utilization (percentage of request) above target"): when each was first made, and the size."""
    found = []
    for event in events:
        size = RESCALED.match(event.get("message") or "")
        at = _at(event.get("firstTimestamp") or event.get("eventTime"))
        if event.get("reason") == "SuccessfulRescale" and size is not None and at is not None:
            found.append(Rescale(at=at, size=int(size.group(1))))
    return sorted(found, key=lambda r: r.at)


def autoscaler_warnings(events: list[dict[str, Any]], since: datetime) -> list[str]:
    """What the autoscaler warned of from `since` (the load's start: a new pod's metrics are missing until
    metrics-server first scrapes it, which says nothing of the load), once each in its own words ("failed to get
    cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API": no
    metrics-server)."""
    found = [
        f"{e.get('reason')}: {e.get('message')}"
        for e in events
        if e.get("type") == "Warning" and (_at(e.get("lastTimestamp") or e.get("eventTime")) or since) >= since
    ]
    return list(dict.fromkeys(found))
