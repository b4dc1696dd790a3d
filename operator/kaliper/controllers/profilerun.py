"""ProfileRun handlers. A run advances in steps; every step reads the run and its trial objects from the
store of what the watch streams delivered (no request unless something changed), moves each trial along
(Pending -> Deploying -> Running -> Collecting -> Succeeded/Failed), starts the trials the search wants
next, and writes the status. All state lives in the run's status and in the objects it owns, so a step is
idempotent and an operator restarted at any point continues where it stopped.

Steps are triggered by the pacer (every step interval, for each unfinished run) and by the events of its
children (a trial ModelDeployment turning Ready, a load-generator Job finishing); a per-run lock keeps them
one at a time, and a step that finds another under way returns at once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from kaliper.api.common import GROUP, VERSION, with_condition
from kaliper.api.loader import problems_from
from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunStatus, Progress, ReportReference, ResourceUsage, TrialSummary
from kaliper.api.resources import ProfileRun
from kaliper.api.units import parse_duration
from kaliper.controllers import expiry, kube, metrics
from kaliper.controllers.diagnosis import job_complete, job_problem, pod_problem, restarts_and_oom_kills
from kaliper.controllers.locks import StepLocks
from kaliper.controllers.pacer import PACER
from kaliper.controllers.settings import SETTINGS, Settings
from kaliper.controllers.store import STORE
from kaliper.loadgen.publish import RESULT_KEY
from kaliper.log import get_logger
from kaliper.manifests.modeldeployment import BuildError, build_deployment, endpoint
from kaliper.manifests.profilerun import (
    LABEL_ROLE,
    LABEL_RUN,
    LABEL_TRIAL,
    build_loadgen,
    build_report_configmap,
    build_trial_deployment,
    loadgen_rbac,
    report_name,
    results_name,
    trial_name,
)
from kaliper.metrics.prometheus import PrometheusMetrics, Window, trial_resources
from kaliper.profiling.plan import configurations, trial_count_problem
from kaliper.profiling.schedule import PlannedTrial, planned_trials, schedule
from kaliper.profiling.search import Outcome
from kaliper.profiling.trials import (
    conclude,
    describe,
    from_load_test,
    hourly_cost,
    judge,
    median_stage,
    new_report,
    with_resources,
)
from kaliper.report.schema import LoadTestResult, ProfileReport, TrialReport, TrialResources
from kaliper.report.status import status_from_report, trial_summary
from kaliper.report.store import DocumentTooLarge, configmap_content, read_document

PLURAL = "profileruns"
TRIAL_KEY, TARGET_KEY, REPORT_KEY = "trial.json", "target.json", "report.json"  # beside the Job's RESULT_KEY
IN_FLIGHT = ("Deploying", "Running", "Collecting")
FINISHED = ("Succeeded", "Failed")
log = get_logger("kaliper.profilerun")


LOCKS = StepLocks()


def _forget(namespace: str, name: str) -> None:
    """Drop what the operator keeps in memory for a run that is done or gone."""
    LOCKS.forget(namespace, name)
    for memo in (_snapshots, _trial_reports, _result_texts):
        for key in [k for k in memo if k[:2] == (namespace, name)]:
            memo.pop(key, None)
    STORE.drop_group(namespace, name)


def forget_all() -> None:
    LOCKS.clear()
    for memo in (_snapshots, _trial_reports, _result_texts):
        memo.clear()


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class RunFailed(Exception):
    """The run cannot go on; the message tells the user why and what to do."""


# --- handlers ------------------------------------------------------------------------------------------


STEP = "profilerun-step"


@kopf.on.event(GROUP, VERSION, PLURAL)
def run_changed(body: Any, type: str | None, namespace: str, name: str, **_: Any) -> None:
    """Track which runs the pacer steps (unfinished ones) and which it may expire (finished, with a TTL). A
    watch event adds no finalizer: deleting a run never waits for the operator."""
    gone = type == "DELETED" or bool(body["metadata"].get("deletionTimestamp"))
    STORE.seen("ProfileRun", body, deleted=type == "DELETED")
    finished = _finished(body.get("status"))
    PACER.track(STEP, (namespace, name), not gone and not finished)
    expiry.track("ProfileRun", body, gone)
    if gone or finished:
        _forget(namespace, name)


# The interval is the default until the operator starts and sets KALIPER_STEP_INTERVAL's (controllers.main).
PACER.every(STEP, Settings.step_interval_s, lambda namespace, name: step(namespace, name))


@kopf.on.event(GROUP, VERSION, "modeldeployments", labels={LABEL_RUN: kopf.PRESENT})
def trial_deployment_changed(body: Any, type: str | None, namespace: str, **_: Any) -> None:
    # The ModelDeployment controller stores it too; whichever handler kopf calls first, the step sees it.
    STORE.seen("ModelDeployment", body, deleted=type == "DELETED")
    if (body.get("status") or {}).get("phase") in ("Ready", "Degraded", "Failed"):
        _step_quietly(namespace, body["metadata"]["labels"][LABEL_RUN])


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_RUN: kopf.PRESENT})
def loadgen_job_changed(body: Any, type: str | None, namespace: str, **_: Any) -> None:
    STORE.seen("Job", body, deleted=type == "DELETED")
    conditions = (body.get("status") or {}).get("conditions") or []
    if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions):
        _step_quietly(namespace, body["metadata"]["labels"][LABEL_RUN])


@kopf.on.event("v1", "pods", labels={LABEL_RUN: kopf.PRESENT})
def trial_pod_changed(body: Any, type: str | None, **_: Any) -> None:
    """Server and load-generator pods: why a trial is not ready, and its restarts and OOM kills."""
    STORE.seen("Pod", body, deleted=type == "DELETED")


def _step_quietly(namespace: str, name: str) -> None:
    # A child's event only hurries the next step; if it fails, the pacer tries again.
    try:
        step(namespace, name)
    except Exception as exc:
        log.warning("step failed; the pacer retries", run=f"{namespace}/{name}", error=str(exc), exc_info=True)


def _finished(status: Any) -> bool:
    return (status or {}).get("phase") in FINISHED


# --- one step ------------------------------------------------------------------------------------------


def step(namespace: str, name: str) -> None:
    """One step of a run. A step of the same run already under way makes this a no-op (it is not queued
    behind it): the next event or pacer round steps again."""
    LOCKS.run_alone(namespace, name, _step)


def _step(namespace: str, name: str) -> None:
    with metrics.STEP_SECONDS.time():
        metrics.STEPS.inc()
        run = STORE.get("ProfileRun", namespace, name)
        if run is None or run["metadata"].get("deletionTimestamp") or _finished(run.get("status")):
            return
        try:
            Step(run).advance()
        except Exception:
            metrics.STEP_ERRORS.inc()
            raise


class Step:
    def __init__(self, run: dict[str, Any]) -> None:
        self.run = run
        self.namespace = run["metadata"]["namespace"]
        self.name = run["metadata"]["name"]
        self.before = run.get("status") or {}
        self.status = ProfileRunStatus.model_validate(self.before)
        self.now = utcnow()

    # -- the step as a whole

    def advance(self) -> None:
        try:
            resource = ProfileRun.model_validate(self.run)
        except ValidationError as exc:
            self.fail("; ".join(str(p) for p in problems_from(exc, ProfileRun)), reason="InvalidSpec")
            return self.write()
        self.spec = resource.spec
        try:
            if not self.status.trials and not self.plan():
                return self.write()
            self.configurations = configurations(self.spec, self.base())
            self.planned_by_index = {p.index: p for p in planned_trials(self.configurations)}
            self.trials = {t.index: t for t in self.status.trials or []}
            self.move_trials()
            self.start_trials()
            if not any(t.phase in IN_FLIGHT or t.phase == "Pending" for t in self.trials.values()):
                self.finish()
        except RunFailed as exc:
            self.teardown_all()
            self.fail(str(exc))
        self.write()

    def write(self) -> None:
        self.status.observed_generation = self.run["metadata"].get("generation")
        status = self.status.to_manifest()
        if status != {k: self.before.get(k) for k in status}:
            kube.patch_status("ProfileRun", self.namespace, self.name, status)

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        (kopf.warn if warning else kopf.info)(self.run, reason=reason, message=message)
        log.info(message, run=f"{self.namespace}/{self.name}", reason=reason)

    def condition(self, kind: str, ok: bool, reason: str, message: str) -> None:
        self.status.conditions = with_condition(
            self.status.conditions, kind, ok, reason, message, self.now, self.run["metadata"].get("generation")
        )

    def fail(self, message: str, reason: str = "RunFailed") -> None:
        metrics.RUNS.labels("Failed").inc()
        self.status.phase = "Failed"
        self.status.message = message
        self.status.completion_time = self.now
        self.condition("Progressing", False, reason, message)
        self.condition("Complete", False, reason, message)
        self.event(reason, f"ProfileRun failed: {message}", warning=True)

    # -- planning, once

    def plan(self) -> bool:
        """Check what the run needs, snapshot its target and list its trials. False: not yet (the target
        ModelDeployment does not exist yet)."""
        spec = self.spec
        if spec.payload.dataset is not None and spec.payload.dataset.file is not None:
            raise RunFailed(
                "spec.payload.dataset.file is a path on one machine; on Kubernetes put the lines in a ConfigMap "
                "and use payload.dataset.configMap"
            )
        base = None
        if spec.target.deployment_ref is not None:
            ref = spec.target.deployment_ref.name
            target = STORE.get("ModelDeployment", self.namespace, ref)
            target = target or kube.get("ModelDeployment", self.namespace, ref)  # not seen yet after a start
            if target is None:
                waited = (self.now - _created(self.run)).total_seconds()
                message = f"waiting for ModelDeployment {spec.target.deployment_ref.name} (spec.target.deploymentRef)"
                if waited > parse_duration(spec.ready_timeout):
                    raise RunFailed(
                        f"ModelDeployment {spec.target.deployment_ref.name} does not exist; create it "
                        "or fix spec.target.deploymentRef"
                    )
                self.status.phase, self.status.message = "Pending", message
                self.condition("Progressing", False, "WaitingForTarget", message)
                return False
            base = ModelDeploymentSpec.model_validate(target["spec"])
        planned = configurations(spec, base)
        trials = planned_trials(planned)
        problem = trial_count_problem(spec, len(trials))
        if problem:
            raise RunFailed(problem)
        for config in planned:
            if config.deployment is not None:
                try:
                    build_deployment("check", self.namespace, "", config.deployment, SETTINGS.image)
                except BuildError as exc:
                    raise RunFailed(f"the target cannot be deployed on Kubernetes: {exc}") from exc
        # The target as it is now is what every trial starts from, even if someone edits it mid-run.
        kube.apply(build_report_configmap(self.run, configmap_content(TARGET_KEY, _target_text(base))))
        _snapshots[(self.namespace, self.name, self.run["metadata"]["uid"])] = base
        for obj in loadgen_rbac(self.run):
            kube.apply(obj)
        self.status.phase = "Running"
        self.status.message = None
        self.status.start_time = self.now
        self.status.trials = [
            TrialSummary(index=t.index, name=trial_name(self.name, t.index), parameters=t.parameters) for t in trials
        ]
        self.condition("Progressing", True, "TrialsRunning", f"{len(trials)} trials planned")
        self.event("Started", f"planned {len(trials)} trials ({spec.search.strategy} search)")
        return True

    def base(self) -> ModelDeploymentSpec | None:
        if self.spec.target.deployment_ref is None:
            return None
        return _target_snapshot(self.namespace, self.name, self.run["metadata"]["uid"])

    # -- trials in flight

    def move_trials(self) -> None:
        in_flight = [t for t in self.trials.values() if t.phase in IN_FLIGHT]
        if not in_flight:
            return
        for kind in ("ModelDeployment", "Job", "Pod"):  # what existed before this process's watches caught up
            STORE.prime(kind, self.namespace, lambda kind=kind: kube.list_objects(kind, self.namespace, LABEL_RUN))
        deployments = {d["metadata"]["name"]: d for d in STORE.group("ModelDeployment", self.namespace, self.name)}
        jobs = STORE.group("Job", self.namespace, self.name)
        pods = STORE.group("Pod", self.namespace, self.name)
        for trial in in_flight:
            mine = str(trial.index)
            trial_pods = [p for p in pods if p["metadata"]["labels"].get(LABEL_TRIAL) == mine]
            trial_jobs = [j for j in jobs if j["metadata"]["labels"].get(LABEL_TRIAL) == mine]
            # One move per phase and step: the lists read above predate what this step creates.
            if trial.phase == "Deploying":
                self.deploying(trial, deployments.get(trial.name), trial_pods)
            elif trial.phase == "Running":
                self.running(trial, trial_jobs, trial_pods)
            if trial.phase == "Collecting":
                self.collecting(trial, trial_pods)

    def planned(self, trial: TrialSummary) -> PlannedTrial:
        return self.planned_by_index[trial.index]

    def elapsed(self, trial: TrialSummary) -> float:
        return (self.now - trial.start_time).total_seconds() if trial.start_time else 0.0

    def deploying(self, trial: TrialSummary, deployment: dict[str, Any] | None, pods: list[dict[str, Any]]) -> None:
        planned = self.planned(trial)
        if deployment is None:  # created before a restart and lost, or never created: (re)apply
            kube.apply(build_trial_deployment(self.run, trial.index, planned.configuration.deployment))
            return
        status = deployment.get("status") or {}
        if status.get("phase") == "Ready":
            self.start_load(trial, planned, status.get("endpoint"), status.get("modelName"))
            return
        server_pods = _server_pods(pods)
        problem = pod_problem(server_pods)
        if status.get("phase") == "Failed":
            self.trial_failed(trial, f"the trial's ModelDeployment failed: {status.get('message')}")
        elif problem is not None and problem.definitive:
            restarts, oom_kills = restarts_and_oom_kills(server_pods)
            trial.resources = ResourceUsage(restarts=restarts, oom_kills=oom_kills)
            self.trial_failed(trial, str(problem))
        elif self.elapsed(trial) > parse_duration(self.spec.ready_timeout):
            why = str(problem) if problem else status.get("message") or "no pod became ready"
            self.trial_failed(trial, f"not ready after readyTimeout ({self.spec.ready_timeout}): {why}")

    def results(self, index: int) -> dict[str, Any] | None:
        """The trial's results ConfigMap, if this run owns it. A run deleted and created again under the same
        name can find the old run's still there (the garbage collector removes it in the background)."""
        stored = kube.get("ConfigMap", self.namespace, results_name(self.name, index))
        if stored is None or not _owned_by(stored, self.run["metadata"]["uid"]):
            return None
        return stored

    def memo_key(self, index: int) -> tuple[str, str, str, int]:
        return (self.namespace, self.name, self.run["metadata"]["uid"], index)

    def result_text(self, index: int) -> str | None:
        """The load generator's results document, read once (a trial waits in Collecting for the final
        scrape over several steps)."""
        key = self.memo_key(index)
        if key not in _result_texts:
            text = read_document(self.results(index) or {}, RESULT_KEY)
            if text is None:
                return None
            _result_texts[key] = text
        return _result_texts[key]

    def start_load(self, trial: TrialSummary, planned: PlannedTrial, url: str | None, model_name: str | None) -> None:
        # A results ConfigMap of an earlier run of this name would keep the load generator from publishing.
        stale = kube.get("ConfigMap", self.namespace, results_name(self.name, trial.index))
        if stale is not None and not _owned_by(stale, self.run["metadata"]["uid"]):
            kube.delete("ConfigMap", self.namespace, results_name(self.name, trial.index))
        config = planned.configuration
        if url is None:  # a trial deployment: its Service
            assert config.deployment is not None
            url = endpoint(trial.name, self.namespace, config.deployment)
        for obj in build_loadgen(
            self.run,
            trial.index,
            self.spec,
            url,
            model_name or self.model_name(),
            planned.level,
            SETTINGS.loadgen,
        ):
            kube.apply(obj)
        trial.phase = "Running"
        self.event("TrialRunning", f"trial {trial.name}: load generator started ({describe(trial.parameters)})")

    def model_name(self) -> str:
        base = self.base()
        if base is not None and base.model.name:
            return base.model.name
        return self.spec.target.deployment_ref.name if self.spec.target.deployment_ref else "model"

    def running(self, trial: TrialSummary, jobs: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        # The results are read once the load generator has ended (its Job's event steps the run at once),
        # not polled while it runs.
        loadgen_pods = [p for p in pods if p["metadata"]["labels"].get(LABEL_ROLE, "").startswith("loadgen")]
        problems = [p for p in (job_problem(job, loadgen_pods) for job in jobs) if p is not None]
        if problems or any(job_complete(j) for j in jobs):
            if self.result_text(trial.index) is not None:
                trial.phase = "Collecting"
            elif problems:
                self.trial_failed(trial, problems[0])
            else:
                self.trial_failed(trial, "the load generator finished without writing its results")
            return
        if not jobs:  # applied before a restart and lost: apply again
            planned = self.planned(trial)
            url = None if planned.configuration.deployment is not None else str(self.spec.target.url)
            self.start_load(trial, planned, url, None)
        elif self.elapsed(trial) > parse_duration(self.spec.trial_timeout):
            self.trial_failed(trial, f"no results within trialTimeout ({self.spec.trial_timeout})")

    def collecting(self, trial: TrialSummary, pods: list[dict[str, Any]]) -> None:
        """Turn the results document into the trial's report, with resource figures from Prometheus once its
        final scrape after the load window is in."""
        text = self.result_text(trial.index)
        if text is None:
            return self.trial_failed(trial, f"ConfigMap {results_name(self.name, trial.index)} holds no {RESULT_KEY}")
        planned = self.planned(trial)
        report = from_load_test(
            trial.index, trial.name, trial.parameters, LoadTestResult.model_validate_json(text), self.spec.slo
        )
        if report.stage is not None:
            server_pods = _server_pods(pods)
            resources = self.resources(trial, report, server_pods)
            if resources is None:
                return  # the final scrape is not in yet: the next step looks again
            resources.restarts, resources.oom_kills = restarts_and_oom_kills(server_pods)
            report = with_resources(report, resources)
        report = judge(report, self.spec, planned.configuration)
        _trial_reports[self.memo_key(trial.index)] = report
        _result_texts.pop(self.memo_key(trial.index), None)
        kube.merge_patch(
            "ConfigMap",
            self.namespace,
            results_name(self.name, trial.index),
            {"data": {TRIAL_KEY: report.model_dump_json(by_alias=True, exclude={"stage"}, exclude_none=True)}},
        )
        summary = trial_summary(report)
        summary.start_time, summary.completion_time = trial.start_time, self.now
        if report.status == "Failed":
            summary.failed_in = "Running"
        self.trials[trial.index] = summary
        self.teardown(trial.index)
        metrics.TRIALS.labels(report.status).inc()
        if report.resources is not None and report.resources.unavailable:
            self.event("MetricsUnavailable", f"trial {trial.name}: " + "; ".join(report.resources.unavailable), True)
        verdict = {"Met": "met the SLO", "NotMet": "missed the SLO", "Inconclusive": "could not decide the SLO"}.get(
            report.slo_verdict or "", "measured"
        )
        self.event(
            f"Trial{report.status}",
            f"trial {trial.name} {verdict if report.status == 'Succeeded' else 'failed: ' + (report.message or '')}",
            warning=report.status == "Failed",
        )

    def resources(
        self, trial: TrialSummary, report: TrialReport, server_pods: list[dict[str, Any]]
    ) -> TrialResources | None:
        """Figures for the load window, None while waiting for the final scrape."""
        prometheus = self.spec.metrics.prometheus
        url = str(prometheus.url) if prometheus else SETTINGS.prometheus_url
        if self.spec.target.deployment_ref is None:
            return TrialResources(source="prometheus", unavailable=["resources: the target is a URL, not a deployment"])
        if url is None:
            return TrialResources(
                source="prometheus", unavailable=["resources: no Prometheus configured (spec.metrics.prometheus)"]
            )
        assert report.stage is not None
        pod_regex = server_pod_regex(trial.name, server_pods)
        if pod_regex is None:
            return TrialResources(source="prometheus", unavailable=[f"resources: no server pods of {trial.name} found"])
        scrape = parse_duration(prometheus.scrape_interval if prometheus else SETTINGS.prometheus_scrape_interval)
        start = report.stage.started_at.timestamp() + report.stage.warmup_s
        window = Window(
            namespace=self.namespace,
            pod_regex=pod_regex,
            end=start + report.stage.measured_s,
            seconds=max(1, round(report.stage.measured_s)),
            scrape_interval_s=scrape,
        )
        client = PrometheusMetrics(url, parse_duration(prometheus.timeout) if prometheus else 10)
        deployment = self.planned(trial).configuration.deployment
        gpus = deployment.resources.gpu.count if deployment and deployment.resources and deployment.resources.gpu else 0
        dcgm = self.spec.metrics.dcgm  # unset: the operator's defaults (the chart's dcgm values)
        return trial_resources(
            client,
            window,
            # Wait for a scrape after the window, up to three intervals (and a little slack) past its end.
            wait_for_scrape=self.now.timestamp() <= window.end + 3 * scrape + 10,
            gpu=bool(gpus and (dcgm.enabled if dcgm else SETTINGS.dcgm_enabled)),
            dcgm_pod_label=dcgm.pod_label if dcgm else SETTINGS.dcgm_pod_label,
            profiling=bool(dcgm and dcgm.profiling_metrics),
            custom_queries=self.spec.metrics.custom_queries or [],
        )

    def trial_failed(self, trial: TrialSummary, message: str) -> None:
        trial.failed_in = trial.phase if trial.phase in IN_FLIGHT else None
        trial.phase, trial.message, trial.completion_time = "Failed", message[:2048], self.now
        self.teardown(trial.index)
        metrics.TRIALS.labels("Failed").inc()
        self.event("TrialFailed", f"trial {trial.name} failed: {message}", warning=True)

    def teardown(self, index: int) -> None:
        """Remove a finished trial's deployment and load generator (its results stay, owned by the run)."""
        name = trial_name(self.name, index)
        kube.delete("ModelDeployment", self.namespace, name)
        kube.delete_labelled("Job", self.namespace, {LABEL_RUN: self.name, LABEL_TRIAL: str(index)}, group=self.name)
        if self.spec.load.workers:
            kube.delete("Service", self.namespace, f"{name}-lgm")
        kube.delete("ConfigMap", self.namespace, f"{name}-lg")

    def teardown_all(self) -> None:
        for trial in self.status.trials or []:
            if trial.phase in IN_FLIGHT:
                self.teardown(trial.index)

    # -- what next

    def start_trials(self) -> None:
        outcomes = {
            t.index: Outcome(t.phase, t.slo_verdict, t.throughput_rps, t.cost_per_million_requests)
            for t in self.trials.values()
            if t.phase in FINISHED
        }
        never_ready = {
            self.planned(t).configuration.index: t.message or "not ready"
            for t in self.trials.values()
            if t.phase == "Failed" and t.failed_in == "Deploying"
        }
        plan = schedule(self.spec, self.configurations, outcomes, lambda c: hourly_cost(self.spec, c), never_ready)
        for index, reason in plan.skipped.items():
            if self.trials[index].phase == "Pending":
                self.trials[index].phase, self.trials[index].message = "Skipped", reason
        for index, reason in plan.failed.items():
            if self.trials[index].phase == "Pending":
                trial = self.trials[index]
                trial.phase, trial.message, trial.failed_in = "Failed", reason, "Deploying"
                trial.completion_time = self.now
        busy = sum(t.phase in IN_FLIGHT for t in self.trials.values())
        sequential = self.spec.search.strategy != "grid"
        free = (0 if busy else 1) if sequential else self.spec.search.parallelism - busy
        for planned in [p for p in plan.start if self.trials[p.index].phase == "Pending"][: max(0, free)]:
            self.start_trial(self.trials[planned.index], planned)
        self.status.trials = [self.trials[i] for i in sorted(self.trials)]
        self.update_progress()

    def start_trial(self, trial: TrialSummary, planned: PlannedTrial) -> None:
        trial.start_time = self.now
        if planned.configuration.deployment is None:
            self.start_load(trial, planned, str(self.spec.target.url), None)
            return
        kube.apply(build_trial_deployment(self.run, trial.index, planned.configuration.deployment))
        trial.phase = "Deploying"
        self.event("TrialStarted", f"trial {trial.name}: deploying ({describe(trial.parameters)})")

    def update_progress(self) -> None:
        trials = self.status.trials or []
        current = next((t.name for t in trials if t.phase in IN_FLIGHT), None)
        self.status.progress = Progress.of(trials, len(trials), current)

    # -- the end

    def finish(self) -> None:
        """Every trial is done: write the full report, then the status from it."""
        report = new_report(self.spec, self.name, self.namespace, self.status.start_time or self.now)
        report.finished_at = self.now
        report.trials = [self.trial_report(t) for t in self.status.trials or []]
        conclude(self.spec, report, self.configurations)
        reference = ReportReference(config_map={"name": report_name(self.name), "key": REPORT_KEY})
        self.store_report(report)
        final = status_from_report(report, reference)
        times = {t.index: t for t in self.status.trials or []}
        for summary in final.trials or []:
            summary.start_time = times[summary.index].start_time
            summary.completion_time = times[summary.index].completion_time
            summary.failed_in = times[summary.index].failed_in
        final.conditions, final.start_time = self.status.conditions, self.status.start_time
        self.status = final
        unavailable = sorted({u for t in report.trials if t.resources for u in t.resources.unavailable})
        if unavailable:
            self.condition("Degraded", True, "MetricsUnavailable", "; ".join(unavailable))
        else:
            self.condition("Degraded", False, "MetricsAvailable", "every resource figure was measured")
        if report.error:
            self.fail(report.error, reason="TrialsFailed")
            return
        summary = f"verdict {report.verdict}" + (
            f", best trial t{report.best_trial}" if report.best_trial is not None else ""
        )
        self.condition("Progressing", False, "Finished", summary)
        self.condition("Complete", True, "Succeeded", summary)
        metrics.RUNS.labels("Succeeded").inc()
        self.event("Succeeded", f"ProfileRun finished: {summary}; report in ConfigMap {report_name(self.name)}")

    def trial_report(self, trial: TrialSummary) -> TrialReport:
        measured = _trial_reports.get(self.memo_key(trial.index))
        if measured is not None:
            return measured
        if trial.phase in FINISHED:
            stored = self.results(trial.index) or {}
            text = read_document(stored, TRIAL_KEY)
            if text is not None:
                report = TrialReport.model_validate_json(text)
                result = read_document(stored, RESULT_KEY)
                if result is not None and report.stage is None:
                    stages = LoadTestResult.model_validate_json(result).stages
                    report.stage = median_stage(stages) if stages else None
                return report
        status = "Skipped" if trial.phase == "Skipped" else "Failed"
        resources = None
        if trial.resources is not None:  # restarts and OOM kills of a trial that never served
            resources = TrialResources(source="pod-status", **trial.resources.model_dump(exclude_none=True))
        return TrialReport(
            index=trial.index,
            name=trial.name,
            parameters=trial.parameters,
            status=status,
            message=trial.message,
            resources=resources,
        )

    def store_report(self, report: ProfileReport) -> None:
        text = report.model_dump_json(by_alias=True, exclude_none=True, indent=2)
        try:
            content = configmap_content(REPORT_KEY, text)
        except DocumentTooLarge:
            # Drop the time series (the per-trial documents keep them) so the report fits.
            report.drop_time_series()
            report.warnings.append("time series left out to fit the 1 MiB ConfigMap limit; see the *-result ConfigMaps")
            content = configmap_content(REPORT_KEY, report.model_dump_json(by_alias=True, exclude_none=True))
        # Keep the snapshot beside the report (an apply replaces the whole data map).
        content.setdefault("data", {})[TARGET_KEY] = _target_text(self.base())
        kube.apply(build_report_configmap(self.run, content))


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


def _server_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["metadata"]["labels"].get(LABEL_ROLE) == "server"]


def server_pod_regex(deployment: str, server_pods: list[dict[str, Any]]) -> str | None:
    """The names of a trial's server pods and of any that replace them: `<deployment>-<pod-template-hash>-`
    and five characters. A looser `<deployment>-.*` would also match the load generator's `<trial>-lg-xxxxx`."""
    hashes = sorted({p["metadata"]["labels"].get("pod-template-hash", "") for p in server_pods} - {""})
    if not hashes:
        return None
    return f"{deployment}-({'|'.join(hashes)})-[a-z0-9]{{5}}"


def _created(run: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(run["metadata"]["creationTimestamp"].replace("Z", "+00:00"))


_snapshots: dict[tuple[str, str, str], ModelDeploymentSpec | None] = {}
# Each measured trial's report (load stage and figures), by run uid and trial index, until the run finishes:
# the final report needs them all, and reading them back from their ConfigMaps would cost a request each.
_trial_reports: dict[tuple[str, str, str, int], TrialReport] = {}
_result_texts: dict[tuple[str, str, str, int], str] = {}  # results documents of trials in Collecting


def _target_text(base: ModelDeploymentSpec | None) -> str:
    return base.model_dump_json(by_alias=True, exclude_none=True) if base else "null"


def _target_snapshot(namespace: str, name: str, uid: str) -> ModelDeploymentSpec | None:
    """The target spec the run planned with (kept in its report ConfigMap), cached by the run's uid."""
    key = (namespace, name, uid)
    if key not in _snapshots:
        stored = kube.get("ConfigMap", namespace, report_name(name))
        text = read_document(stored or {}, TARGET_KEY)
        if text is None:
            raise RunFailed(f"ConfigMap {report_name(name)}, where the run keeps its target, is missing")
        _snapshots[key] = None if text == "null" else ModelDeploymentSpec.model_validate_json(text)
    return _snapshots[key]
