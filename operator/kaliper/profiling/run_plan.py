"""A ProfileRun's plan, whichever executor carries it out (`kaliper run`'s loop, the operator's steps): whether
it may run and with which configurations (admission), which trials to start next and which to mark skipped or
failed without running, how a trial's end is recorded, and the run's conclusion. Pure: an executor starts the
trials the plan names, collects their results, persists, and decides nothing about what runs, in which order,
or why.

Its state is the list of trial summaries a run's status holds (api.profilerun.TrialSummary), on both paths: the
search is replayed over it on every call (profiling.schedule), so a restarted operator continues where it
stopped and `kaliper run` decides from the same facts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from kaliper.api.modeldeployment import ModelDeploymentTemplate
from kaliper.api.profilerun import FittedWorkload, ProfileRunSpec, TrialSummary
from kaliper.profiling.fit import Fit, ShapeOf, fits, no_shapes
from kaliper.profiling.plan import Configuration, configurations, sweep_problem, trial_count_problem
from kaliper.profiling.quality import original_problem
from kaliper.profiling.schedule import PlannedTrial, next_trials, planned_trials, planned_with_probes, room_to_start
from kaliper.profiling.search import Outcome
from kaliper.profiling.trials import conclude, new_report, unmeasured_report
from kaliper.profiling.workload import resolve
from kaliper.report.schema import ProfileReport, TrialReport
from kaliper.report.status import trial_summary

# A trial between its start and its result (the operator's phases; `kaliper run` runs one at a time).
IN_FLIGHT = ("Deploying", "Running", "Collecting")
DONE = ("Succeeded", "Failed", "Skipped")


class NotAdmitted(ValueError):
    """The run may not start; the message names the field and the fix."""


EnvironmentCheck = Callable[[ProfileRunSpec, list[Configuration]], str | None]
Measured = Callable[[TrialSummary], TrialReport | None]  # a trial's report as the executor collected it


@dataclass(frozen=True)
class NextTrials:
    """What the plan decided on one call: every trial as it now stands, and those to start now, in order."""

    trials: list[TrialSummary]
    start: list[PlannedTrial]

    @property
    def finished(self) -> bool:
        """Nothing left to start or waiting for a result: the run may conclude."""
        return not self.start and all(t.phase in DONE for t in self.trials)


@dataclass(frozen=True)
class RunPlan:
    spec: ProfileRunSpec
    """The spec the trials run: a fitted workload (status.workload) in place of payload.prompts.fromPrometheus."""
    configurations: list[Configuration]
    run_name: str
    trial_prefix: str
    """A trial is named `<trial_prefix><index>`: `<run>-t` on Kubernetes (a namespace holds many runs' trials),
    `t` locally (a run has a folder of its own)."""
    fit: dict[int, Fit] = field(default_factory=dict)
    """Each configuration's memory estimate against its limit (profiling.fit), by index, where one was made:
    one that cannot fit is left out, never started."""

    @classmethod
    def admit(
        cls,
        spec: ProfileRunSpec,
        base: ModelDeploymentTemplate | None,
        fitted: FittedWorkload | None,
        names: tuple[str, str],
        environment: EnvironmentCheck,
        shape_of: ShapeOf = no_shapes,
    ) -> RunPlan:
        """The plan of a run whose target (`base`) and fitted workload the executor has read; NotAdmitted with
        the first problem, in one order on both paths: the trial count, each configuration of the sweep, then
        what the executor's environment cannot run (`environment`: a configuration this machine cannot serve;
        one the cluster cannot deploy, or more load than the namespace may apply). `names`: the run's name
        and its trials' prefix; `shape_of`: the model each configuration serves, for the fit check."""
        plan = cls.resumed(spec, base, fitted, names, shape_of)
        configs = plan.configurations
        problem = (
            trial_count_problem(plan.spec, configs)
            or sweep_problem(plan.spec, configs)
            or original_problem(plan.spec.quality, configs)
            or environment(plan.spec, configs)
        )
        if problem:
            raise NotAdmitted(problem)
        return plan

    @classmethod
    def resumed(
        cls,
        spec: ProfileRunSpec,
        base: ModelDeploymentTemplate | None,
        fitted: FittedWorkload | None,
        names: tuple[str, str],
        shape_of: ShapeOf = no_shapes,
    ) -> RunPlan:
        """The plan of a run admitted at an earlier step (its target snapshot and fit are in its records)."""
        spec = resolve(spec, fitted) if fitted is not None else spec
        configs = configurations(spec, base)
        return cls(spec, configs, *names, fits(configs, shape_of))

    def trial_name(self, index: int) -> str:
        return f"{self.trial_prefix}{index}"

    def listed(self) -> list[TrialSummary]:
        """Every trial at a listed load level, Pending (capacity probes and tie-break rounds join as the search
        reaches them)."""
        return [self._summary(p) for p in planned_trials(self.configurations)]

    def _summary(self, planned: PlannedTrial) -> TrialSummary:
        return TrialSummary(index=planned.index, name=self.trial_name(planned.index), parameters=planned.parameters)

    def planned(self, trials: list[TrialSummary]) -> dict[int, PlannedTrial]:
        """What each trial of the list runs (its configuration and load level), by index."""
        return planned_with_probes(self.spec, self.configurations, trials)

    def next(
        self,
        trials: list[TrialSummary],
        measured: Measured,
        now: datetime,
        at_once: int | None = None,
    ) -> NextTrials:
        """Replay the search over the trials so far: mark those it will not run Skipped (with why), those whose
        configuration never became ready at another level Failed, list the probes and tie-break rounds it has
        reached, and name the trials to start now (as many as spec.search.parallelism leaves room for, at most
        `at_once`). `measured` gives a finished trial's report, asked only once the search has nothing left and
        no trial is in flight (a tie-break round is decided from the reports)."""
        trials = [t.model_copy() for t in trials]
        outcomes = {
            t.index: Outcome(t.phase, t.slo_verdict, t.throughput_rps, t.cost_per_million_requests)
            for t in trials
            if t.phase in ("Succeeded", "Failed")
        }
        configuration_of = {i: p.configuration.index for i, p in self.planned(trials).items()}
        for trial in trials:
            if trial.phase == "Failed" and trial.failed_in == "Deploying":
                trial.message = self._never_served(configuration_of[trial.index], trial.message or "not ready")
        never_ready = {
            configuration_of[t.index]: t.message or "not ready"
            for t in trials
            if t.phase == "Failed" and t.failed_in == "Deploying"
        }

        def finished_reports() -> list[TrialReport] | None:
            if any(t.phase in IN_FLIGHT for t in trials):
                return None
            return self.reports([t for t in trials if t.phase in ("Succeeded", "Failed")], measured)

        left_out = {i: fit.left_out() for i, fit in self.fit.items() if not fit.fits}
        decided = next_trials(self.spec, self.configurations, outcomes, never_ready, finished_reports, left_out)
        by_index = {t.index: t for t in trials}
        for index, reason in decided.skipped.items():
            if by_index[index].phase == "Pending":
                by_index[index].phase, by_index[index].message = "Skipped", reason
        for index in decided.probes.keys() - by_index.keys():
            by_index[index] = self._summary(decided.probes[index])
        for index, reason in decided.failed.items():
            if by_index[index].phase == "Pending":
                trial = by_index[index]
                trial.phase, trial.message, trial.failed_in, trial.completion_time = "Failed", reason, "Deploying", now
        room = room_to_start(self.spec, sum(t.phase in IN_FLIGHT for t in by_index.values()))
        room = room if at_once is None else min(room, at_once)
        start = [p for p in decided.start if by_index[p.index].phase == "Pending"][:room]
        if self.spec.quality is not None:
            self._ask_quality(by_index, start)
        return NextTrials([by_index[i] for i in sorted(by_index)], start)

    def _ask_quality(self, trials: dict[int, TrialSummary], start: list[PlannedTrial]) -> None:
        """The first trial of a configuration to start asks the quality dataset after its load (spec.quality);
        another of the configuration asks it when that one failed."""
        planned = self.planned(list(trials.values()))
        asked = {
            planned[t.index].configuration.index for t in trials.values() if t.scores_quality and t.phase != "Failed"
        }
        for trial in start:
            if trial.configuration.index not in asked:
                trials[trial.index].scores_quality = True
                asked.add(trial.configuration.index)

    def _never_served(self, configuration: int, error: str) -> str:
        """A trial whose servers never came up: the server's error and, where the configuration fits by the
        estimate, that the estimate passed it (the run checks the estimate against the server)."""
        fit = self.fit.get(configuration)
        return fit.refused(error) if fit is not None and fit.fits else error

    def reports(self, trials: list[TrialSummary], measured: Measured, interrupted: bool = False) -> list[TrialReport]:
        """Each trial's measured report, else what its summary says (profiling.trials.unmeasured_report); its
        parameters in the sweep's order, as the plan lists them (a status read back from the API server has them
        in alphabetical order, and the words of a decision name them in order)."""
        planned = self.planned(trials)
        found = []
        for trial in trials:
            report = measured(trial) or unmeasured_report(trial, interrupted)
            if trial.failed_in == "Deploying" and trial.message:  # the words of next(): the same on both paths
                report = report.model_copy(update={"message": trial.message})
            found.append(report.model_copy(update={"parameters": planned[trial.index].parameters}))
        return found

    @staticmethod
    def ended(report: TrialReport, started: datetime | None, now: datetime, served: bool = True) -> TrialSummary:
        """A trial's summary once its report is in. `served`: False when its servers never became ready, which
        fails the configuration's other levels without deploying them again."""
        summary = trial_summary(report)
        summary.start_time, summary.completion_time = started, now
        summary.scores_quality = report.quality is not None  # it asked: no other trial of its configuration will
        if report.status == "Failed":
            summary.failed_in = "Running" if served else "Deploying"
        return summary

    def conclusion(
        self,
        namespace: str | None,
        started: datetime,
        finished: datetime,
        trials: list[TrialSummary],
        measured: Measured,
        baseline: ProfileReport | None,
        workload: FittedWorkload | None,
        warnings: list[str] | None = None,
        interrupted: bool = False,
    ) -> ProfileReport:
        """The run's report from every trial: its measured report (`measured`), else what its summary says
        (skipped, failed before it measured; a trial still Pending when the run was interrupted, not run); the
        verdict, choice, capacities, recommendation and comparison with `baseline` (profiling.trials.conclude)."""
        report = new_report(self.spec, self.run_name, namespace, started)
        report.interrupted = interrupted
        report.warnings = list(warnings or [])
        report.workload = workload
        report.trials = self.reports(trials, measured, interrupted)
        conclude(self.spec, report, self.configurations, baseline)
        report.finished_at = finished
        return report
