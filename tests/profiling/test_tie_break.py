"""Measuring the tied cheapest again (profiling/tiebreak.py): which trial comes next, in which order, when it
stops, and the choice made from every measurement of each configuration."""

from __future__ import annotations

from kaliper.api.profilerun import ProfileRunSpec, TrialSummary
from kaliper.profiling import decisions
from kaliper.profiling.plan import configurations, trial_count_problem
from kaliper.profiling.schedule import PlannedTrial, next_tie_break_trial, next_trials, planned_with_probes
from kaliper.profiling.search import Outcome
from kaliper.profiling.tiebreak import first_index, next_tie_break
from kaliper.report.schema import LatencyFigures, PercentileFigure, TrialReport, WindowResult
from tests.support.reports import make_stage
from tests.support.specs import BASE, spec

A = {"cpu": "500m", "concurrency": "4"}
B = {"cpu": "1", "concurrency": "4"}
# Window throughputs alternating 400 and 600 around 500: one trial's 95% noise is 13.1%, two trials' 18.5%.
NOISY = [400.0, 600.0] * 5


def run_spec(budget: str | None = "60s", tolerance: float = 0.05, rounds: int = 2) -> ProfileRunSpec:
    return spec(
        sweep={"cpu": ["500m", "1"]},
        slo={"latency": [{"percentile": 99, "max": "50ms"}]},
        search={"tieBreak": {"rounds": rounds, **({"budget": budget} if budget else {})}},
        recommendation={"tieTolerance": tolerance},
    )


def trial(index: int, parameters: dict[str, str], cost: float, p99_ms: float, windows: list[float]) -> TrialReport:
    """A trial that met the SLO, 11 s of load (1 s warm-up, 10 measured)."""
    figures = LatencyFigures(
        count=1000,
        percentiles=[
            PercentileFigure(percentile=99, value_ms=p99_ms, ci_low_ms=p99_ms * 0.9, ci_high_ms=p99_ms, count=1000)
        ],
    )
    stage = make_stage(figures, 500.0)
    stage.windows = [
        WindowResult(index=i, start_s=i, warmup=False, requests=int(r), errors=0, throughput_rps=r)
        for i, r in enumerate(windows)
    ]
    return TrialReport(
        index=index,
        name=f"t{index}",
        parameters=parameters,
        status="Succeeded",
        stage=stage,
        slo_verdict="Met",
        cost_per_million_requests=cost,
    )


def first_two(cost_b: float = 0.22) -> list[TrialReport]:
    """A cheaper with more headroom (p99 10 ms of 50), B 10% dearer by default: a tie on noise."""
    return [trial(0, A, 0.20, 10.0, NOISY), trial(1, B, cost_b, 40.0, NOISY)]


def test_the_tie_break_trials_come_after_every_listed_trial_and_probe() -> None:
    s = run_spec()
    configs = configurations(s, BASE)
    assert first_index(s, configs) == 2
    knee = run_spec().model_copy(update={"search": s.search.model_copy(update={"strategy": "knee"})})
    assert first_index(knee, configs) == 6  # two listed, then two probes for each configuration


def test_a_noisy_tie_measures_both_again_in_alternating_order() -> None:
    s = run_spec()
    trials = first_two()
    choice = decisions.best_trial(trials, s.slo, 0.05)
    assert choice is not None and (choice.best, choice.report.certainty, choice.report.noise) == (0, "Tie", 0.1848)
    assert next_tie_break(s, trials, 2) == A  # the first round: the chosen first
    trials.append(trial(2, A, 0.20, 10.0, NOISY))
    assert next_tie_break(s, trials, 2) == B  # then the runner-up
    trials.append(trial(3, B, 0.22, 40.0, NOISY))
    # Two trials each: 12.7% noise, still above the 10% difference. The second round: the runner-up first.
    assert next_tie_break(s, trials, 2) == B
    trials.append(trial(4, B, 0.22, 40.0, NOISY))
    assert next_tie_break(s, trials, 2) == A
    trials.append(trial(5, A, 0.20, 10.0, NOISY))
    assert next_tie_break(s, trials, 2) is None  # two rounds spent
    choice = decisions.best_trial(trials, s.slo, 0.05)
    assert choice is not None and (choice.best, choice.report.certainty, choice.report.noise) == (0, "Tie", 0.1029)
    assert choice.report.explanation.endswith("(t0 measured 3 times, t1 3)")


def test_the_rounds_stop_once_the_choice_is_clear() -> None:
    # B 15% dearer: a tie inside one trial's 18.5% noise each, clear once each is measured twice (12.7%).
    s = run_spec()
    trials = [*first_two(cost_b=0.23), trial(2, A, 0.20, 10.0, NOISY), trial(3, B, 0.23, 40.0, NOISY)]
    assert next_tie_break(s, trials, 2) is None
    choice = decisions.best_trial(trials, s.slo, 0.05)
    assert choice is not None and (choice.best, choice.report.certainty) == (0, "Clear")
    assert choice.report.explanation == (
        "the runner-up t1 costs 15.0% more per request, beyond the 12.7% noise (t0 measured 2 times, t1 2)"
    )


def test_the_budget_stops_the_rounds_and_a_round_begun_finishes() -> None:
    s = run_spec(budget="20s")
    trials = [*first_two(), trial(2, A, 0.20, 10.0, NOISY)]
    assert next_tie_break(s, trials, 2) == B  # 11 s spent of 20: the round finishes
    trials.append(trial(3, B, 0.22, 40.0, NOISY))
    assert next_tie_break(s, trials, 2) is None  # 22 s spent: no second round


def test_a_tie_within_the_tolerance_or_without_a_budget_measures_nothing() -> None:
    quiet = [500.0] * 10  # no noise: the 20% tolerance alone makes the tie
    trials = [trial(0, A, 0.20, 10.0, quiet), trial(1, B, 0.22, 40.0, quiet)]
    choice = decisions.best_trial(trials, run_spec(tolerance=0.2).slo, 0.2)
    assert choice is not None and (choice.report.certainty, choice.report.noise) == ("Tie", 0.2)
    assert next_tie_break(run_spec(tolerance=0.2), trials, 2) is None
    assert next_tie_break(run_spec(budget=None), first_two(), 2) is None


def test_the_operator_lists_and_replays_a_tie_break_trial_as_the_configuration_it_measures() -> None:
    s = run_spec()
    configs = configurations(s, BASE)
    planned = next_tie_break_trial(s, configs, first_two())
    assert planned == PlannedTrial(2, configs[0], 4.0) and planned.parameters == A
    listed = [TrialSummary(index=2, name="r-2", parameters=A), TrialSummary(index=3, name="r-3", parameters=B)]
    replayed = planned_with_probes(s, configs, listed)
    assert (replayed[2].configuration, replayed[3].configuration) == (configs[0], configs[1])


def test_what_runs_next_is_the_search_then_the_tie_break_round_for_either_executor() -> None:
    """next_trials, which `kaliper run`'s loop and the operator's steps both call: the two grid trials first;
    once both are measured, the tie-break trial, listed with the probes; nothing while a report is missing."""
    s = run_spec()
    configs = configurations(s, BASE)
    first = next_trials(s, configs, {}, {}, lambda: [])
    assert [p.index for p in first.start] == [0, 1] and first.probes == {}
    outcomes = {t.index: Outcome.of(t) for t in first_two()}
    tie = next_trials(s, configs, outcomes, {}, first_two)
    assert tie.start == [PlannedTrial(2, configs[0], 4.0)] and tie.probes == {2: PlannedTrial(2, configs[0], 4.0)}
    assert next_trials(s, configs, outcomes, {}, lambda: None).finished  # a report still being collected


def test_the_trial_count_counts_the_tie_break_rounds() -> None:
    s = run_spec(rounds=2).model_copy()
    s.search.max_trials = 5
    assert trial_count_problem(s, configurations(s, BASE)) == (
        "the sweep has 6 trials, more than search.maxTrials (5); narrow the sweep or raise maxTrials"
    )


def failed(index: int, parameters: dict[str, str]) -> TrialReport:
    """A trial whose server did not answer (a crash, an OOM kill)."""
    return TrialReport(
        index=index, name=f"t{index}", parameters=parameters, status="Failed", message="the server was OOM-killed"
    )


def test_a_configuration_that_fails_when_measured_again_is_out_of_the_choice() -> None:
    """The tie-break measures the chosen A again and its server fails: A's first good trial no longer vouches
    for it. The round finishes (B once more), then the choice is B, saying why A is out, and nothing more is
    measured."""
    s = run_spec()
    trials = [*first_two(), failed(2, A)]
    assert next_tie_break(s, trials, 2) == B  # the round begun finishes
    trials.append(trial(3, B, 0.22, 40.0, NOISY))
    assert next_tie_break(s, trials, 2) is None  # no tie left to break
    choice = decisions.best_trial(trials, s.slo, 0.05)
    assert choice is not None and (choice.best, choice.report.certainty, choice.report.runner_up) == (1, "Clear", None)
    assert choice.report.explanation == (
        "t1 is the only trial that qualified; left out, measured again without qualifying: t0's configuration "
        "(t2 of it failed or missed the SLO)"
    )


def test_a_configuration_that_misses_the_slo_when_measured_again_is_out_too() -> None:
    s = run_spec()
    missed = trial(2, A, 0.20, 60.0, NOISY).model_copy(update={"slo_verdict": "NotMet"})
    choice = decisions.best_trial([*first_two(), missed], s.slo, 0.05)
    assert choice is not None and choice.best == 1


def test_a_narrow_clear_lead_from_one_trial_each_is_confirmed_by_one_round() -> None:
    # B 25% dearer: beyond one trial's 18.5% noise each, but by less than twice it. One round measures both
    # again (the chosen first); with two trials each the lead stands (12.7% noise) and nothing more is measured.
    s = run_spec()
    trials = first_two(cost_b=0.25)
    choice = decisions.best_trial(trials, s.slo, 0.05)
    assert choice is not None and (choice.best, choice.report.certainty, choice.report.noise) == (0, "Clear", 0.1848)
    assert next_tie_break(s, trials, 2) == A
    trials.append(trial(2, A, 0.20, 10.0, NOISY))
    assert next_tie_break(s, trials, 2) == B
    trials.append(trial(3, B, 0.25, 40.0, NOISY))
    assert next_tie_break(s, trials, 2) is None
    choice = decisions.best_trial(trials, s.slo, 0.05)
    assert choice is not None and choice.report.explanation == (
        "the runner-up t1 costs 25.0% more per request, beyond the 12.7% noise (t0 measured 2 times, t1 2)"
    )


def test_a_confirmed_lead_that_the_second_trials_erase_becomes_a_tie_and_goes_on() -> None:
    # The second trials put A at 0.24 and B at 0.23: 0.22 against 0.24 on average, 9.1% apart inside the 12.7%
    # noise of two trials each: a tie, and the second round measures them again (the runner-up first).
    s = run_spec()
    trials = [*first_two(cost_b=0.25), trial(2, A, 0.24, 10.0, NOISY), trial(3, B, 0.23, 40.0, NOISY)]
    choice = decisions.best_trial(trials, s.slo, 0.05)
    assert choice is not None and choice.report.certainty == "Tie"
    assert next_tie_break(s, trials, 2) == B


def test_a_wide_clear_lead_or_one_without_a_budget_measures_nothing_more() -> None:
    # B twice as dear: beyond twice the 18.5% noise.
    s = run_spec()
    assert next_tie_break(s, first_two(cost_b=0.40), 2) is None
    assert next_tie_break(run_spec(budget=None), first_two(cost_b=0.25), 2) is None
