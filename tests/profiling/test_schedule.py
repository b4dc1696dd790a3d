"""The operator's schedule replays the search from recorded outcomes; it must run the same trials, in the
same order, as the uninterrupted search the local runtime drives."""

from __future__ import annotations

import pytest

from kaliper.profiling.plan import configurations
from kaliper.profiling.schedule import planned_trials, schedule, trial_index
from kaliper.profiling.search import Outcome, order_for_search
from tests.support.specs import BASE, spec

SWEEP = {"cpu": ["250m", "500m", "1", "2"], "concurrency": [1, 2, 4, 8, 16]}


def cores(config) -> float:  # type: ignore[no-untyped-def]
    return {"250m": 0.25, "500m": 0.5, "1": 1.0, "2": 2.0}[config.parameters["cpu"]]


def truth(planned):  # type: ignore[no-untyped-def]
    """A made-up world: a configuration with c cores meets the SLO up to 8*c users; cost falls with load."""
    by_index = {p.index: p for p in planned}

    def outcome(index: int) -> Outcome:
        p = by_index[index]
        c = cores(p.configuration)
        return Outcome(
            "Succeeded",
            "Met" if p.level <= 8 * c else "NotMet",
            throughput_rps=100 * min(p.level, 8 * c),
            cost_per_million_requests=c / p.level,
        )

    return outcome


def uninterrupted(s, planned_configs, measure) -> list[int]:  # type: ignore[no-untyped-def]
    ran = []
    for step in order_for_search(s, planned_configs, cores):
        if not step.run:
            continue
        verdicts: dict[float, bool] = {}
        seen = []
        while (level := step.next_level(verdicts)) is not None:
            index = trial_index(step.configuration, level)
            ran.append(index)
            seen.append(measure(index))
            verdicts[level] = seen[-1].passed
        step.on_done(verdicts, seen)
    return ran


def replayed(s, planned_configs, measure):  # type: ignore[no-untyped-def]
    outcomes: dict[int, Outcome] = {}
    ran = []
    while not (plan := schedule(s, planned_configs, outcomes, cores)).finished:
        first = plan.start[0]
        ran.append(first.index)
        outcomes[first.index] = measure(first.index)
    return ran, plan


@pytest.mark.parametrize("strategy", ["knee", "optuna"])
def test_replaying_the_search_runs_what_an_uninterrupted_search_runs(strategy: str) -> None:
    s = spec(sweep=SWEEP, search={"strategy": strategy, "maxTrials": 7, "seed": 11})
    planned_configs = configurations(s, BASE)
    measure = truth(planned_trials(planned_configs))
    expected = uninterrupted(s, planned_configs, measure)
    ran, plan = replayed(s, planned_configs, measure)
    assert ran == expected and len(ran) < 20  # the search skipped some of the 20 trials
    everything = {p.index for p in planned_trials(planned_configs)}
    assert set(ran) | set(plan.skipped) == everything and not set(ran) & set(plan.skipped)


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
