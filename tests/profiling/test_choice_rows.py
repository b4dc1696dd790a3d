"""Each configuration as the choice weighed it (kaliper.profiling.choice_rows), from the real choice
(decisions.best_trial) over trials built by hand: what the answer page, the terminal and `kaliper report` print."""

from __future__ import annotations

from kaliper.api.profilerun import SloSpec
from kaliper.profiling import decisions
from kaliper.profiling.choice_rows import configuration_rows
from kaliper.report.schema import SloCheck, TrialReport
from tests.support.reports import trial

SLO = SloSpec.model_validate({"latency": [{"percentile": 99, "max": "50ms"}], "maxErrorRate": 0.01})
BUSY = "the machine was busy: 1.4 cores of other work beside the trial"


def rows(trials: list[TrialReport], tolerance: float = 0.05) -> list[tuple[str, bool, float | None, str]]:
    choice = decisions.best_trial(trials, SLO, tolerance)
    found = configuration_rows(trials, SLO, choice)
    return [(r.parameters["slots"], r.chosen, r.cost_change, r.reason) for r in found]


def at(index: int, slots: str, users: str, **fields: object) -> TrialReport:
    return trial(index, **fields, parameters={"cpu": "1", "slots": slots, "concurrency": users})  # type: ignore[arg-type]


def test_a_configuration_is_priced_at_its_cheapest_load_level_that_met_and_the_others_against_it() -> None:
    """Slots 1 at 4 and 8 users (0.30 and 0.20 per million), slots 2 at 4 users (0.25) and at 8 (missed):
    slots 1 is chosen at 8 users; slots 2 costs 25% more, beyond the 5% noise."""
    trials = [
        at(0, "1", "4", p99=10, rps=500, cost=0.30, verdict="Met"),
        at(1, "1", "8", p99=20, rps=900, cost=0.20, verdict="Met"),
        at(2, "2", "4", p99=10, rps=600, cost=0.25, verdict="Met"),
        at(3, "2", "8", p99=80, rps=700, cost=0.21, verdict="NotMet"),
    ]
    assert rows(trials) == [
        ("1", True, None, "the choice"),
        ("2", False, 0.25, "costs more than the cheapest configuration, beyond the noise"),
    ]
    found = configuration_rows(trials, SLO, decisions.best_trial(trials, SLO, 0.05))
    assert [(r.trials, r.cost, r.cost_trial) for r in found] == [([0, 1], 0.2, 1), ([2, 3], 0.25, 2)]


def test_a_tie_lost_on_headroom_and_one_lost_to_an_undisturbed_trial_say_so() -> None:
    """0.24 against 0.25 is a tie inside the 5% noise: the dearer t0 has more latency headroom and wins it. Then
    t0 measured while the machine was busy: the cheaper t1 wins, and t0's row says why it lost."""
    trials = [trial(0, 10, 900, 0.25, "Met"), trial(1, 40, 500, 0.24, "Met")]
    assert rows(trials) == [
        ("1", True, None, "the choice"),
        ("2", False, -0.04, "a tie within the noise, which the choice won on latency headroom"),
    ]
    trials[0].limited_by = [BUSY]
    assert [(c, r) for _, c, _, r in rows(trials)] == [
        (False, "a tie within the noise, which the choice won as the one measured undisturbed"),
        (True, "the choice"),
    ]


def test_the_explanation_and_the_rows_name_the_rule_that_decided_the_tie() -> None:
    """One rule decides a tie, recorded once by the choice: its explanation and the row of the configuration that
    lost say the same. Equal latency (the same headroom), 0.24 against 0.25 inside the noise: the cheaper wins;
    equal cost too: the first measured. (The row said "won as the cheaper" where the explanation said "decided by
    latency headroom" before the choice recorded its rule.)"""
    trials = [trial(0, 20, 900, 0.25, "Met"), trial(1, 20, 900, 0.24, "Met")]
    choice = decisions.best_trial(trials, SLO, 0.05)
    assert choice is not None and (choice.best, choice.won_by) == (1, {0: "cheaper"})
    assert (
        choice.report.explanation
        == "t0 costs 4.2% more per request, inside the 5.0% noise: a tie, decided as the cheaper"
    )
    (lost, _) = configuration_rows(trials, SLO, choice)
    assert (lost.decided_by, lost.reason) == ("cheaper", "a tie within the noise, which the choice won as the cheaper")
    same = [trial(0, 20, 900, 0.25, "Met"), trial(1, 20, 900, 0.25, "Met")]
    choice = decisions.best_trial(same, SLO, 0.05)
    assert choice is not None and (choice.best, choice.won_by) == (0, {1: "first"})
    assert choice.report.explanation.endswith("a tie, decided as the first measured")
    assert (
        configuration_rows(same, SLO, choice)[1].reason
        == "a tie within the noise, which the choice won as the first measured"
    )


def test_configurations_that_did_not_qualify_say_why() -> None:
    """Failed; missed the SLO at its lowest level; measured twice (a tie-break), the second time missed."""
    failed = trial(1, 10, 900, 0.1, None, parameters={"cpu": "1", "slots": "2"}).model_copy(
        update={"status": "Failed", "stage": None, "message": "OOMKilled: the memory limit is too small"}
    )
    missed = trial(2, 80, 900, 0.1, "NotMet", parameters={"cpu": "1", "slots": "3"})
    missed.slo = [SloCheck(objective="p99 <= 50ms", verdict="NotMet", observed="80.00ms (95% CI 76.00-84.00ms)")]
    twice = {"cpu": "1", "slots": "4"}
    trials = [
        trial(0, 10, 900, 0.3, "Met"),
        failed,
        missed,
        trial(3, 10, 900, 0.2, "Met", parameters=twice),
        trial(4, 60, 900, 0.2, "NotMet", parameters=twice),
    ]
    assert rows(trials) == [
        ("1", True, None, "the choice"),
        ("2", False, None, "failed: OOMKilled: the memory limit is too small"),
        ("3", False, None, "never met the SLO (p99 <= 50ms: 80.00ms (95% CI 76.00-84.00ms) at cpu=1, slots=3)"),
        ("4", False, None, "measured again without qualifying (t4 failed or missed the SLO)"),
    ]
