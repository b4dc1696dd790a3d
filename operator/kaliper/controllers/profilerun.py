"""ProfileRun handlers. A run advances in steps; every step reads the run and its trial objects from the
store of what the watches delivered (no request unless something changed), moves each trial along as
trial_moves decides (Pending -> Deploying -> Running -> Collecting -> Succeeded/Failed), starts the trials the
run's plan names (profiling.run_plan, which `kaliper run` carries out too), and writes the status. All state
lives in the run's status and in the objects it owns (run_records), so a step is idempotent and an operator
restarted at any point continues where it stopped.

Steps are called by the pacer (every step interval for each unfinished run, and at once when a child's event
nudges it: a trial ModelDeployment turning Ready, a load-generator Job ending), never two of one run at once.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import kopf
from pydantic import ValidationError

from kaliper.api.common import GROUP, VERSION, KStatus
from kaliper.api.loader import problems_from
from kaliper.api.profilerun import (
    ProfileRunStatus,
    Progress,
    ReportReference,
    ResourceUsage,
    TrialSummary,
)
from kaliper.api.resources import ProfileRun
from kaliper.controllers import kube, metrics, run_network, run_records
from kaliper.controllers import trial_moves as moves
from kaliper.controllers.admission import admission_problem, trials_problem
from kaliper.controllers.api_health import moving_s
from kaliper.controllers.diagnosis import template_hashes
from kaliper.controllers.recommendation import apply_recommendation
from kaliper.controllers.run_baseline import baseline_report
from kaliper.controllers.run_headers import RunHeaders
from kaliper.controllers.run_records import REPORT_KEY, RunFailed, RunRecords
from kaliper.controllers.run_target import RunTarget
from kaliper.controllers.run_workload import run_fit
from kaliper.controllers.settings import SETTINGS, Settings
from kaliper.controllers.stepper import StatusStep, Stepper, finished
from kaliper.controllers.store import STORE
from kaliper.controllers.trial_moves import Move, TrialObjectsSeen
from kaliper.controllers.trial_pods import with_pod_figures
from kaliper.manifests.profilerun import (
    LABEL_RUN,
    LABEL_TRIAL,
    TrialLoad,
    build_loadgen,
    report_name,
    trial_objects,
    trial_prefix,
)
from kaliper.metrics.trial_window import TrialMeasurement
from kaliper.profiling import trials as run_trials
from kaliper.profiling.fit import ShapeOf
from kaliper.profiling.outcome import gated_readiness
from kaliper.profiling.plan import describe, trial_protocol
from kaliper.profiling.run_plan import IN_FLIGHT, NotAdmitted, RunPlan
from kaliper.profiling.schedule import PlannedTrial
from kaliper.report.schema import LoadTestResult
from kaliper.report.status import degraded_condition, final_status

PLURAL = "profileruns"


def _step(namespace: str, name: str) -> None:
    run = STORE.get("ProfileRun", namespace, name)
    if run is not None and not run["metadata"].get("deletionTimestamp") and not finished(run):
        RunStep(run).advance()


# The interval is the default until the operator starts and sets KALIPER_STEP_INTERVAL's (controllers.main).
STEPPER = Stepper("ProfileRun", _step, Settings.step_interval_s)


def forget_all() -> None:
    STEPPER.forget_all()
    run_records.release_all()


# --- handlers ------------------------------------------------------------------------------------------


@kopf.on.event(GROUP, VERSION, PLURAL)
def run_changed(body: Any, type: str | None, **_: Any) -> None:
    """Track which runs the pacer steps (unfinished ones) and which it may expire (finished, with a TTL). A
    watch event adds no finalizer: deleting a run never waits for the operator."""
    if not STEPPER.object_changed(body, type):
        run_records.release(body["metadata"]["uid"])
        STORE.drop_group(body["metadata"]["namespace"], body["metadata"]["name"])


@kopf.on.event(GROUP, VERSION, "modeldeployments", labels={LABEL_RUN: kopf.PRESENT})
def trial_deployment_changed(body: Any, type: str | None, namespace: str, **_: Any) -> None:
    # The ModelDeployment controller stores it too; whichever handler kopf calls first, the step sees it.
    STORE.seen("ModelDeployment", body, deleted=type == "DELETED")
    if (body.get("status") or {}).get("phase") in ("Ready", "Degraded", "Failed"):
        STEPPER.hurry(namespace, body["metadata"]["labels"][LABEL_RUN])


@kopf.on.event("apps", "v1", "deployments", labels={LABEL_RUN: kopf.PRESENT})
def trial_workload_changed(body: Any, type: str | None, namespace: str, **_: Any) -> None:
    """A trial's copy of a workload target (only those carry the run label; a ModelDeployment's do not)."""
    STORE.seen("Deployment", body, deleted=type == "DELETED")
    STEPPER.hurry(namespace, body["metadata"]["labels"][LABEL_RUN])


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_RUN: kopf.PRESENT})
def loadgen_job_changed(body: Any, type: str | None, **_: Any) -> None:
    STEPPER.job_changed(body, type, LABEL_RUN)


@kopf.on.event("v1", "pods", labels={LABEL_RUN: kopf.PRESENT})
def trial_pod_changed(body: Any, type: str | None, **_: Any) -> None:
    """Server and load-generator pods: why a trial is not ready, and its restarts and OOM kills."""
    STORE.seen("Pod", body, deleted=type == "DELETED")


# --- one step ------------------------------------------------------------------------------------------


class RunStep(StatusStep[ProfileRunStatus]):
    kind = "ProfileRun"

    def __init__(self, run: dict[str, Any]) -> None:
        super().__init__(run, ProfileRunStatus)
        self.records = RunRecords(run)

    def advance(self) -> None:
        try:
            self.spec = ProfileRun.model_validate(self.body).spec
        except ValidationError as exc:
            self.fail("InvalidSpec", "; ".join(str(p) for p in problems_from(exc, ProfileRun)))
            return self.write()
        self.target = RunTarget(self.body, self.spec, self.records)
        try:
            plan = self.resumed() if self.status.trials else self.admitted()
            if plan is not None:
                self.carry_out_plan(plan)
        except RunFailed as exc:
            for trial in self.status.trials or []:
                if trial.phase in IN_FLIGHT:
                    self.teardown(trial.index)
            self.fail("RunFailed", str(exc))
        self.write()

    def readiness(self) -> KStatus:  # self.spec is not there when the spec was invalid
        return gated_readiness(getattr(self, "spec", None), self.status) or super().readiness()

    # -- the plan: admitted once, then carried out step by step

    def admitted(self) -> RunPlan | None:
        """Check what the run needs, snapshot its target and list its trials (profiling.run_plan). None: not
        yet (the target does not exist yet)."""
        spec = self.spec
        if problem := admission_problem(spec, self.namespace, SETTINGS.tenancy):
            raise RunFailed(problem)  # before the run makes or sends anything: the fit's queries come after
        base, waiting = self.target.snapshot(self.now)
        if waiting is not None:
            self.status.phase, self.status.message = "Pending", waiting
            self.condition("Progressing", False, "WaitingForTarget", waiting)
            return None
        fitted = run_fit(spec, self.status, self.namespace)

        deployable = partial(trials_problem, namespace=self.namespace, image=SETTINGS.image, tenancy=SETTINGS.tenancy)

        def admit(shape_of: ShapeOf) -> RunPlan:
            return RunPlan.admit(spec, base, fitted, self.names(), deployable, shape_of)

        try:
            plan = RunHeaders(self.body, self.status).plan(admit, SETTINGS.image)
        except NotAdmitted as exc:
            raise RunFailed(str(exc)) from None
        if isinstance(plan, str):  # the fit check's headers are being read: planned again once they are
            self.status.phase, self.status.message = "Pending", plan
            self.condition("Progressing", False, "ReadingModelHeaders", plan)
            return None
        for obj in run_network.loadgen_objects(self.body, self.target):
            kube.apply(obj)
        self.status.phase, self.status.message, self.status.start_time = "Running", None, self.now
        self.status.trials = plan.listed()
        self.condition("Progressing", True, "TrialsRunning", f"{len(self.status.trials)} trials planned")
        self.event("Started", f"planned {len(self.status.trials)} trials ({spec.search.strategy} search)")
        return plan

    def resumed(self) -> RunPlan:
        shape_of = RunHeaders(self.body, self.status).shape_of
        return RunPlan.resumed(self.spec, self.target.base(), self.status.workload, self.names(), shape_of)

    def names(self) -> tuple[str, str]:
        return self.name, trial_prefix(self.name)

    def carry_out_plan(self, plan: RunPlan) -> None:
        self.plan = plan
        self.trials = {t.index: t for t in self.status.trials or []}
        self.planned = plan.planned(list(self.trials.values()))
        self.move_trials()
        if self.start_trials():
            self.finish()

    # -- trials in flight

    def move_trials(self) -> None:
        in_flight = [t for t in self.trials.values() if t.phase in IN_FLIGHT]
        if not in_flight:
            return
        kinds = ("ModelDeployment", "Deployment", "Job", "Pod")
        for kind in kinds:  # what existed before this process's watches caught up
            STORE.prime(kind, self.namespace, lambda kind=kind: kube.list_objects(kind, self.namespace, LABEL_RUN))
        objects = {kind: STORE.group(kind, self.namespace, self.name) for kind in kinds}
        timeouts = moves.Timeouts.of(self.plan.spec)
        for trial in in_flight:
            seen = TrialObjectsSeen.of_trial(trial.index, trial.name, objects)
            if trial.phase == "Collecting" or (trial.phase == "Running" and moves.results_due(seen)):
                seen = replace(seen, results_written=self.records.result_text(trial.index) is not None)
            elapsed = moving_s(trial.start_time, self.now)
            self.carry_out(trial, moves.next_move(trial.phase, seen, elapsed, timeouts, self.target.url()), seen)

    def carry_out(self, trial: TrialSummary, move: Move, seen: TrialObjectsSeen) -> None:
        planned = self.planned[trial.index]
        for action in move.actions:
            if isinstance(action, moves.ApplyDeployment):
                assert planned.configuration.deployment is not None
                self.target.apply_trial(trial.index, planned.configuration.deployment)
            elif isinstance(action, moves.StartLoad):
                self.start_load(trial, planned, action)
            elif isinstance(action, moves.TearDown):
                self.teardown(trial.index)
        if move.phase == "Failed" and trial.phase != "Failed":
            if move.restarts_and_oom_kills is not None:
                restarts, oom_kills = move.restarts_and_oom_kills
                trial.resources = ResourceUsage(restarts=restarts, oom_kills=oom_kills)
            trial.failed_in = trial.phase if trial.phase in IN_FLIGHT else None
            trial.phase, trial.message, trial.completion_time = "Failed", move.message, self.now
            metrics.TRIALS.labels("Failed").inc()
            self.event("TrialFailed", f"trial {trial.name} failed: {move.message}", warning=True)
            return
        trial.phase, trial.message = move.phase, move.message  # what an in-flight trial waits on, if anything
        if any(isinstance(action, moves.Collect) for action in move.actions):
            self.collect(trial, seen)

    def start_load(self, trial: TrialSummary, planned: PlannedTrial, action: moves.StartLoad) -> None:
        self.records.remove_stale_results(trial.index)
        url = action.url
        protocol = trial_protocol(self.plan.spec, trial.parameters)
        if url is None:  # a trial deployment: its Service
            assert planned.configuration.deployment is not None
            url = self.target.trial_url(trial.index, planned.configuration.deployment, protocol)
        model = action.model_name or run_trials.target_model_name(self.plan.spec, self.target.base())
        deployment = planned.configuration.deployment
        replicas = deployment.replicas_at_most() if deployment is not None else 1
        load = TrialLoad(url, model, planned.level, replicas, protocol, trial.scores_quality)
        for obj in build_loadgen(self.body, trial.index, self.plan.spec, load, SETTINGS.loadgen):
            kube.apply(obj)
        self.event("TrialRunning", f"trial {trial.name}: load generator started ({describe(trial.parameters)})")

    def collect(self, trial: TrialSummary, seen: TrialObjectsSeen) -> None:
        """Turn the results document into the trial's report, with resource figures from Prometheus once its
        final scrape after the load window is in."""
        text = self.records.result_text(trial.index)
        assert text is not None  # trial_moves collects only when it is there
        planned = self.planned[trial.index]
        result = LoadTestResult.model_validate_json(text)
        report = run_trials.from_load_test(trial.index, trial.name, planned.parameters, result, self.plan.spec.slo)
        if report.stage is not None:
            servers = seen.pods_of("server")
            measured = TrialMeasurement(
                self.plan.spec.metrics,
                SETTINGS.metrics_defaults(),
                planned.configuration.deployment,
                self.namespace,
                trial.name,
                trial_objects(self.name, trial.index).server_pod_regex(template_hashes(servers)),
                report.stage,
                self.now,
            )
            resources = measured.resources()
            if resources is None:
                return  # the final scrape is not in yet: the next step looks again
            report = with_pod_figures(report, resources, self.namespace, planned.configuration.deployment, servers)
            if run_trials.needs_server_load_from_prometheus(report, planned.configuration.deployment):
                load = measured.server_load()
                if load is None:
                    return  # the server pods' final scrape is not in yet
                report = run_trials.with_server_load(report, load)
        report = run_trials.judge_trial(report, self.plan.spec, planned.configuration)
        self.records.save_trial_report(report)
        self.trials[trial.index] = self.plan.ended(report, trial.start_time, self.now)
        self.teardown(trial.index)
        metrics.TRIALS.labels(report.status).inc()
        if report.resources is not None and report.resources.unavailable:
            self.event("MetricsUnavailable", f"trial {trial.name}: " + "; ".join(report.resources.unavailable), True)
        failed = report.status == "Failed"
        reason = "TrialFailed" if failed else "TrialSkipped" if report.status == "Skipped" else "TrialSucceeded"
        self.event(reason, f"trial {trial.name} {run_trials.outcome_words(report)}", failed)

    def teardown(self, index: int) -> None:
        """Remove a finished trial's deployment and load generator (its results stay, owned by the run)."""
        names = trial_objects(self.name, index, self.spec.load.workers)
        self.target.delete_trial(index)
        kube.delete_labelled("Job", self.namespace, {LABEL_RUN: self.name, LABEL_TRIAL: str(index)}, group=self.name)
        if names.master_service is not None:
            kube.delete("Service", self.namespace, names.master_service)
        kube.delete("ConfigMap", self.namespace, names.loadgen_config)

    # -- what next

    def start_trials(self) -> bool:
        """Start what the plan wants now; True when it has nothing left to run or wait for."""
        step = self.plan.next(list(self.trials.values()), self.records.measured, self.now)
        self.trials = {t.index: t for t in step.trials}
        self.planned = self.plan.planned(step.trials)  # with the probes and tie-break rounds it reached
        for planned in step.start:
            trial = self.trials[planned.index]
            trial.start_time = self.now
            self.carry_out(trial, moves.start(self.target.url()), TrialObjectsSeen())
            if trial.phase == "Deploying":
                self.event("TrialStarted", f"trial {trial.name}: deploying ({describe(trial.parameters)})")
        self.status.trials = [self.trials[i] for i in sorted(self.trials)]
        current = next((t.name for t in self.status.trials if t.phase in IN_FLIGHT), None)
        self.status.progress = Progress.of(self.status.trials, len(self.status.trials), current)
        return step.finished

    # -- the end

    def finish(self) -> None:
        """Every trial is done: write the full report, then the status from it."""
        start, baseline = self.status.start_time or self.now, baseline_report(self.spec, self.namespace)
        trials, workload = self.status.trials or [], self.status.workload
        measured = self.records.measured
        report = self.plan.conclusion(self.namespace, start, self.now, trials, measured, baseline, workload)
        report.target_container = self.target.container()
        self.records.save_report(report)
        apply_recommendation(self.plan.spec, self.namespace, report, self.event)
        reference = ReportReference(config_map={"name": report_name(self.name), "key": REPORT_KEY})
        self.status = final_status(report, reference, self.status)
        self.condition("Degraded", *degraded_condition(report))
        if report.error:
            self.fail("TrialsFailed", report.error)
            return
        best = f", best trial t{report.best_trial}" if report.best_trial is not None else ""
        summary = f"verdict {report.verdict}{best}"
        self.condition("Progressing", False, "Finished", summary)
        self.condition("Complete", True, "Succeeded", summary)
        metrics.FINISHED.labels("ProfileRun", "Succeeded").inc()
        self.event("Succeeded", f"ProfileRun finished: {summary}; report in ConfigMap {report_name(self.name)}")
