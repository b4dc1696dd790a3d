"""The headers of the models a ProfileRun's configurations serve, read in the cluster for the fit check
(profiling.fit) before any trial starts, and kept in status.modelHeaders so that every later step, and an
operator restarted halfway, plans with the same estimates.

The operator cannot open a model on a volume itself: a Job per model file reads it where it is
(manifests.model_header) and leaves its shape in the pod's termination message. The plan is admitted again at
each step until every header it asked for is read (or could not be: its configurations then go without an
estimate, and the status says why)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kaliper.api.model_shape import ModelHeader, ModelShape
from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunStatus
from kaliper.controllers import kube
from kaliper.controllers.diagnosis import job_complete, job_failure
from kaliper.controllers.store import STORE
from kaliper.manifests.model_header import HEADER_ROLE, build_header_job, header_job_name, header_source
from kaliper.manifests.profilerun import LABEL_ROLE, LABEL_RUN
from kaliper.profiling.fit import ShapeOf
from kaliper.profiling.plan import Configuration
from kaliper.profiling.run_plan import RunPlan


class RunHeaders:
    """The fit check's reader of a run's models, from its status; it notes the models whose header is not read
    yet, for `read` to read."""

    def __init__(self, run: dict[str, Any], status: ProfileRunStatus) -> None:
        self.run, self.status = run, status
        self.wanted: dict[str, ModelDeploymentSpec] = {}

    def shape_of(self, config: Configuration) -> ModelShape | None:
        source = header_source(config.deployment) if config.deployment is not None else None
        if source is None:
            return None
        for header in self.status.model_headers or []:
            if header.model == source:
                return header.shape
        assert isinstance(config.deployment, ModelDeploymentSpec)  # header_source names only models it serves
        self.wanted.setdefault(source, config.deployment)
        return None

    def plan(self, admit: Callable[[ShapeOf], RunPlan], image: str) -> RunPlan | str:
        """The run's plan, admitted with the headers of every model its fit check asks for; while some are
        still being read, what the run waits for (then it is admitted again at a later step)."""
        plan = admit(self.shape_of)
        if not self.wanted:
            return plan
        waiting = self.read(image)
        return admit(self.shape_of) if waiting is None else waiting

    def read(self, image: str) -> str | None:
        """Read the headers the plan asked for and not read yet: start their Jobs, keep what the finished ones
        found. None once every one is read; else what the run waits for."""
        namespace, name = self.run["metadata"]["namespace"], self.run["metadata"]["name"]
        for kind in ("Job", "Pod"):  # what existed before this process's watches caught up
            STORE.prime(kind, namespace, lambda kind=kind: kube.list_objects(kind, namespace, LABEL_RUN))
        jobs = {j["metadata"]["name"]: j for j in STORE.group("Job", namespace, name)}
        pods = STORE.group("Pod", namespace, name)
        waiting = []
        for source, template in self.wanted.items():
            job_name = header_job_name(name, source)
            job = jobs.get(job_name)
            if job is None:
                kube.apply(build_header_job(self.run, source, template, image))
                waiting.append(source)
                continue
            header = _read(source, job, [p for p in pods if _of_job(p, job_name)])
            if header is None:
                waiting.append(source)
                continue
            self.status.model_headers = [*(self.status.model_headers or []), header]
        if not waiting:  # all read: their Jobs go, in one request (the chart's role deletes Jobs by label only)
            kube.delete_labelled("Job", namespace, {LABEL_RUN: name, LABEL_ROLE: HEADER_ROLE}, group=name)
            return None
        return f"reading the header of {len(waiting)} model(s) for the fit check: {', '.join(sorted(waiting))}"


def _of_job(pod: dict[str, Any], job_name: str) -> bool:
    labels = pod["metadata"].get("labels") or {}
    return labels.get("job-name") == job_name and labels.get(LABEL_ROLE) == HEADER_ROLE


def _read(source: str, job: dict[str, Any], pods: list[dict[str, Any]]) -> ModelHeader | None:
    """What a header Job found once it ended; None while it runs."""
    if job_complete(job):
        for pod in pods:
            for container in (pod.get("status") or {}).get("containerStatuses") or []:
                terminated = (container.get("state") or {}).get("terminated")
                if terminated is None:
                    continue
                message = terminated.get("message") or ""
                try:
                    return ModelHeader(model=source, shape=ModelShape.model_validate_json(message))
                except ValueError:
                    return ModelHeader(model=source, problem=f"its reader said {message[:500]!r}, not a shape")
        return None  # its pod's final status is not in yet
    failure = job_failure(job, pods, "header Job")
    if failure is None:
        return None
    return ModelHeader(model=source, problem=f"{failure[:900]}; its configurations are not estimated")
