"""Which trials of a ProfileRun to start now, given the outcomes of those already finished.

The operator keeps no search state in memory: on every step it replays the search (grid, knee or optuna,
see search.py) from the outcomes recorded in the run's status, which gives the same decisions as an
uninterrupted run would (optuna's sampler is seeded and told the same values in the same order). A restarted
operator therefore continues a run where it stopped. Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kaliper.api.profilerun import ProfileRunSpec, TrialSummary
from kaliper.profiling.plan import Configuration
from kaliper.profiling.search import ConfigurationSearch, Outcome, order_for_search
from kaliper.profiling.tiebreak import first_index, next_tie_break
from kaliper.profiling.trials import configuration_cost_per_hour
from kaliper.report.schema import TrialReport


@dataclass(frozen=True)
class PlannedTrial:
    """One configuration at one load level."""

    index: int
    configuration: Configuration
    level: float

    @property
    def parameters(self) -> dict[str, str]:
        return {**self.configuration.parameters, self.configuration.level_name: f"{self.level:g}"}


def trial_index(config: Configuration, level: float) -> int:
    return config.index * len(config.levels) + config.levels.index(level)


def planned_trials(configurations: list[Configuration]) -> list[PlannedTrial]:
    """Every trial at a listed load level, by index."""
    return [PlannedTrial(trial_index(c, level), c, level) for c in configurations for level in c.levels]


def probe_index(configurations: list[Configuration], config: Configuration, probe: int, probes: int) -> int:
    """A capacity probe's index: after every listed trial, `probes` indexes reserved per configuration."""
    return len(configurations) * len(config.levels) + config.index * probes + probe


def planned_with_probes(
    spec: ProfileRunSpec, configurations: list[Configuration], trials: list[TrialSummary]
) -> dict[int, PlannedTrial]:
    """Every listed trial, and every capacity probe and tie-break trial a run's status lists, by index."""
    planned = {p.index: p for p in planned_trials(configurations)}
    probes = spec.search.capacity_probes()
    first_tie_break = first_index(spec, configurations)
    for t in trials:
        if t.index >= first_tie_break:
            planned[t.index] = tie_break_trial(configurations, t.index, t.parameters)
        elif t.index not in planned:
            planned[t.index] = probe_trial(configurations, t.index, t.parameters, probes)
    return planned


def next_tie_break_trial(
    spec: ProfileRunSpec, configurations: list[Configuration], trials: list[TrialReport]
) -> PlannedTrial | None:
    """Once every trial the search wanted has run (`trials`, their reports): the next tie-break trial
    (tiebreak.py), numbered after those already run; None when none is due."""
    first = first_index(spec, configurations)
    parameters = next_tie_break(spec, trials, first)
    if parameters is None:
        return None
    return tie_break_trial(configurations, first + sum(t.index >= first for t in trials), parameters)


def tie_break_trial(configurations: list[Configuration], index: int, parameters: dict[str, str]) -> PlannedTrial:
    """A tie-break trial (tiebreak.py): the configuration and load level of the trial it measures again."""
    level_name = configurations[0].level_name
    config = next(c for c in configurations if {**c.parameters, level_name: parameters[level_name]} == parameters)
    return PlannedTrial(index, config, float(parameters[level_name]))


def probe_trial(
    configurations: list[Configuration], index: int, parameters: dict[str, str], probes: int
) -> PlannedTrial:
    """A capacity probe from its index and the parameters recorded for it (a run's status lists probes only
    once they start)."""
    config = configurations[(index - len(configurations) * len(configurations[0].levels)) // probes]
    return PlannedTrial(index, config, float(parameters[config.level_name]))


@dataclass
class Schedule:
    start: list[PlannedTrial] = field(default_factory=list)
    """Trials the search wants measured now (not yet finished), in order."""
    skipped: dict[int, str] = field(default_factory=dict)
    """Trials the search will not run, with the reason."""
    failed: dict[int, str] = field(default_factory=dict)
    """Trials failed without running: their configuration's deployment never came up at another level."""
    probes: dict[int, PlannedTrial] = field(default_factory=dict)
    """The capacity probes the search has reached so far (to start, finished or failed), by index."""

    @property
    def finished(self) -> bool:
        return not self.start


def room_to_start(spec: ProfileRunSpec, in_flight: int) -> int:
    """How many more trials may start now: a grid search fills spec.search.parallelism; knee and optuna
    searches choose each trial from the last one's outcome, so they run one at a time."""
    if spec.search.strategy != "grid":
        return 0 if in_flight else 1
    return max(0, spec.search.parallelism - in_flight)


def schedule(
    spec: ProfileRunSpec,
    configurations: list[Configuration],
    outcomes: dict[int, Outcome],
    hourly_cost: Callable[[Configuration], float],
    never_ready: dict[int, str] | None = None,
    left_out: dict[int, str] | None = None,
) -> Schedule:
    """Replay the search over the recorded outcomes.

    never_ready: configuration index -> why its deployment never became ready; its other levels fail the
    same way instead of being deployed again. left_out: configuration index -> why it is not run at all (it
    cannot fit its memory limit): every level skipped with that reason. Grid searches list every unfinished
    trial (they do not depend on one another, so they may run in parallel); knee and optuna choose each trial
    from the previous outcomes, so they list one at a time.
    """
    never_ready, left_out = never_ready or {}, left_out or {}
    result = Schedule()
    sequential = spec.search.strategy != "grid"
    reached: set[int] = set()
    for search in order_for_search(spec, configurations, hourly_cost):
        config = search.configuration
        if not search.run or config.index in left_out:
            reason = left_out.get(config.index, search.reason)
            result.skipped.update({trial_index(config, lv): reason for lv in config.levels})
            continue
        verdicts: dict[float, bool] = {}
        seen: list[Outcome] = []
        waiting = False
        while (level := search.next_level(verdicts)) is not None:
            index = trial_index(config, level)
            reached.add(index)
            if config.index in never_ready and index not in outcomes:
                result.failed[index] = never_ready[config.index]
                outcome: Outcome | None = Outcome("Failed")
            else:
                outcome = outcomes.get(index)
            if outcome is None:
                result.start.append(PlannedTrial(index, config, level))
                waiting = True
                if sequential:
                    return result
                verdicts[level] = True  # grid: the next level does not depend on this one
                continue
            seen.append(outcome)
            verdicts[level] = outcome.passed
        if not waiting:
            waiting = _probe(search, configurations, verdicts, seen, outcomes, never_ready, result)
            if waiting and sequential:
                return result
        if waiting:
            continue
        for level in search.levels:
            index = trial_index(config, level)
            if index not in reached:
                result.skipped[index] = search.skip_reason(level, verdicts)
                reached.add(index)
        search.on_done(verdicts, seen)
    # Trials the search never reached (optuna explores a sample) are reported as skipped.
    for config in configurations:
        for level in config.levels:
            index = trial_index(config, level)
            if index not in reached and index not in result.skipped:
                result.skipped[index] = "not explored by the search"
    return result


def _probe(
    search: ConfigurationSearch,
    configurations: list[Configuration],
    verdicts: dict[float, bool],
    seen: list[Outcome],
    outcomes: dict[int, Outcome],
    never_ready: dict[int, str],
    result: Schedule,
) -> bool:
    """Walk a configuration's capacity probes (each depends on the last): True when one is to start now."""
    config = search.configuration
    while (level := search.next_probe(verdicts)) is not None:
        probe = sum(lv not in search.levels for lv in verdicts)
        index = probe_index(configurations, config, probe, search.probes)
        result.probes[index] = PlannedTrial(index, config, level)
        outcome = outcomes.get(index)
        if outcome is None and config.index in never_ready:
            result.failed[index] = never_ready[config.index]
            outcome = Outcome("Failed")
        if outcome is None:
            result.start.append(result.probes[index])
            return True
        seen.append(outcome)
        verdicts[level] = outcome.passed
    return False


def next_trials(
    spec: ProfileRunSpec,
    configurations: list[Configuration],
    outcomes: dict[int, Outcome],
    never_ready: dict[int, str],
    finished_reports: Callable[[], list[TrialReport] | None],
    left_out: dict[int, str] | None = None,
) -> Schedule:
    """What a run measures next, whichever executor runs it (`kaliper run`'s loop, the operator's steps): the
    search's schedule over the outcomes so far and, once the search has nothing left, the next tie-break round
    (a trial measured again, listed with the probes). `finished_reports`: the reports of every trial run so
    far, asked only then; None while some are still being collected."""
    plan = schedule(
        spec, configurations, outcomes, lambda c: configuration_cost_per_hour(spec, c), never_ready, left_out
    )
    if plan.finished and (reports := finished_reports()) is not None:
        tie_break = next_tie_break_trial(spec, configurations, reports)
        if tie_break is not None:
            plan.probes[tie_break.index] = tie_break
            plan.start = [tie_break]
    return plan
