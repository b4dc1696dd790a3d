"""The operator's schedule replays the search from recorded outcomes; it must run the same trials, in the
same order, as the uninterrupted search `kaliper run` drives."""

from __future__ import annotations

import pytest

from kaliper.profiling.plan import configurations
from kaliper.profiling.schedule import PlannedTrial, planned_trials, probe_index, schedule, trial_index
from kaliper.profiling.search import Outcome, order_for_search
from tests.support.specs import BASE, spec

SWEEP = {"cpu": ["250m", "500m", "1", "2"], "concurrency": [1, 2, 4, 8, 16]}


def cores(config) -> float:  # type: ignore[no-untyped-def]
    return {"250m": 0.25, "500m": 0.5, "1": 1.0, "2": 2.0}[config.parameters.get("cpu", "1")]


def truth(planned: PlannedTrial) -> Outcome:
    """A made-up world: a configuration with c cores meets the SLO up to 8*c users; cost falls with load."""
    c = cores(planned.configuration)
    return Outcome(
        "Succeeded",
        "Met" if planned.level <= 8 * c else "NotMet",
        throughput_rps=100 * min(planned.level, 8 * c),
        cost_per_million_requests=c / planned.level,
    )


def uninterrupted(s, planned_configs, measure) -> list[int]:  # type: ignore[no-untyped-def]
    """The search driven directly, one configuration after another: listed levels, then capacity probes."""
    ran = []
    for step in order_for_search(s, planned_configs, cores):
        if not step.run:
            continue
        verdicts: dict[float, bool] = {}
        seen = []
        while (level := step.next_level(verdicts)) is not None:
            index = trial_index(step.configuration, level)
            ran.append(index)
            seen.append(measure(PlannedTrial(index, step.configuration, level)))
            verdicts[level] = seen[-1].passed
        while (level := step.next_probe(verdicts)) is not None:
            index = probe_index(
                planned_configs, step.configuration, len(verdicts.keys() - set(step.levels)), step.probes
            )
            ran.append(index)
            seen.append(measure(PlannedTrial(index, step.configuration, level)))
            verdicts[level] = seen[-1].passed
        step.on_done(verdicts, seen)
    return ran


def replayed(s, planned_configs, measure):  # type: ignore[no-untyped-def]
    outcomes: dict[int, Outcome] = {}
    ran = []
    while not (plan := schedule(s, planned_configs, outcomes, cores)).finished:
        first = plan.start[0]
        ran.append(first.index)
        outcomes[first.index] = measure(first)
    return ran, plan


@pytest.mark.parametrize("strategy", ["knee", "optuna"])
def test_replaying_the_search_runs_what_an_uninterrupted_search_runs(strategy: str) -> None:
    s = spec(sweep=SWEEP, search={"strategy": strategy, "maxTrials": 7, "seed": 11})
    planned_configs = configurations(s, BASE)
    expected = uninterrupted(s, planned_configs, truth)
    ran, plan = replayed(s, planned_configs, truth)
    assert ran == expected and len(ran) < 20  # the search skipped some of the 20 trials
    everything = {p.index for p in planned_trials(planned_configs)} | set(plan.probes)
    assert set(ran) | set(plan.skipped) == everything and not set(ran) & set(plan.skipped)


def test_the_knee_search_probes_between_the_last_level_met_and_the_first_not_met() -> None:
    """Capacity 5 users, levels 2 and 8: the knee search measures both, then bisects 2..8 with its two
    default probes (5 met, then 6 not), leaving the capacity between 5 and 6."""
    s = spec(sweep={"concurrency": [2, 8]}, search={"strategy": "knee"})
    planned_configs = configurations(s, BASE)

    def capacity_5(planned: PlannedTrial) -> Outcome:
        return Outcome("Succeeded", "Met" if planned.level <= 5 else "NotMet")

    ran, plan = replayed(s, planned_configs, capacity_5)
    assert ran == [1, 0, 2, 3]
    assert {i: p.level for i, p in plan.probes.items()} == {2: 5.0, 3: 6.0}
    assert plan.probes[2].parameters == {"concurrency": "5"}
    assert ran == uninterrupted(s, planned_configs, capacity_5)


def test_probes_stop_at_the_resolution_and_rates_are_bisected_to_three_digits() -> None:
    """Capacity 23.3 requests/s, levels 10 and 40, three probes: 25 (not met), 17.5 (met), 21.2 (met: 21.25
    rounded); a fourth would narrow 21.2..25 further, but the probes are spent. With a resolution of 10, one
    probe leaves a gap of 15 > 10 and a second one of 7.5: two probes."""
    base_load = {"openLoop": {"rate": 10}}

    def capacity_23(planned: PlannedTrial) -> Outcome:
        return Outcome("Succeeded", "Met" if planned.level <= 23.3 else "NotMet")

    three = spec(load=base_load, sweep={"rate": [10, 40]}, search={"strategy": "knee", "capacity": {"probes": 3}})
    ran, plan = replayed(three, configurations(three, BASE), capacity_23)
    assert [p.level for p in plan.probes.values()] == [25.0, 17.5, 21.2] and len(ran) == 5
    coarse = spec(
        load=base_load,
        sweep={"rate": [10, 40]},
        search={"strategy": "knee", "capacity": {"probes": 3, "resolution": 10}},
    )
    _, plan = replayed(coarse, configurations(coarse, BASE), capacity_23)
    assert [p.level for p in plan.probes.values()] == [25.0, 17.5]


def test_a_grid_probes_only_when_asked_and_after_every_listed_level_of_the_configuration() -> None:
    s = spec(sweep={"cpu": ["500m", "1"], "concurrency": [2, 8]})
    assert schedule(s, configurations(s, BASE), {i: truth_at(i) for i in range(4)}, cores).finished
    probing = spec(sweep={"cpu": ["500m", "1"], "concurrency": [2, 8]}, search={"capacity": {"probes": 1}})
    planned_configs = configurations(probing, BASE)
    # cpu=500m meets up to 4 users: 2 met, 8 not; cpu=1 up to 8: both met, nothing to narrow.
    first = schedule(probing, planned_configs, {0: truth_at(0)}, cores)
    assert [p.index for p in first.start] == [1, 2, 3]  # no probe while level 8 of cpu=500m is unknown
    later = schedule(probing, planned_configs, {i: truth_at(i) for i in range(4)}, cores)
    assert [(p.index, p.level) for p in later.start] == [(4, 5.0)]


def test_grid_lists_every_unfinished_trial_for_parallel_runs() -> None:
    s = spec(sweep={"cpu": ["500m", "1"], "concurrency": [1, 2]})
    planned_configs = configurations(s, BASE)
    first = schedule(s, planned_configs, {}, cores)
    assert [p.index for p in first.start] == [0, 1, 2, 3] and not first.skipped
    later = schedule(s, planned_configs, {1: Outcome("Succeeded", "Met"), 2: Outcome("Failed")}, cores)
    assert [p.index for p in later.start] == [0, 3]
    assert schedule(s, planned_configs, {i: Outcome("Succeeded") for i in range(4)}, cores).finished


def test_a_configuration_that_never_became_ready_fails_its_other_levels_without_deploying() -> None:
    s = spec(sweep={"cpu": ["500m", "1"], "concurrency": [1, 2, 4]})
    planned_configs = configurations(s, BASE)
    plan = schedule(s, planned_configs, {0: Outcome("Failed")}, cores, never_ready={0: "ImagePullBackOff: ..."})
    assert plan.failed == {1: "ImagePullBackOff: ...", 2: "ImagePullBackOff: ..."}
    assert [p.index for p in plan.start] == [3, 4, 5]


def truth_at(index: int) -> Outcome:
    """truth() for the listed trials of the two-configuration sweeps above (cpu 500m and 1, levels 2 and 8)."""
    s = spec(sweep={"cpu": ["500m", "1"], "concurrency": [2, 8]})
    return truth({p.index: p for p in planned_trials(configurations(s, BASE))}[index])
