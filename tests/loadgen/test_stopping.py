from __future__ import annotations

from collections import Counter

import pytest

from kaliper.api.profilerun import LatencyObjective
from kaliper.loadgen.recorder import Window
from kaliper.loadgen.results import latency_figures
from kaliper.loadgen.stopping import (
    Decision,
    StoppingParameters,
    WindowFigures,
    decide,
    replay_done,
    spread,
    straddling,
    unanswered_so_far,
    undecided,
)
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.judgement import Bound
from kaliper.measure.statistics import PercentileEstimate, percentile_among_answered
from kaliper.profiling.decisions import latency_check
from tests.support.reports import make_stage

RULE = StoppingParameters(
    min_duration_s=10, max_duration_s=60, stable_windows=3, tolerance=0.1, max_relative_ci_width=0.05
)
NARROW = PercentileEstimate(99, 0.100, 0.099, 0.102, 50_000, 0.95)
WIDE = PercentileEstimate(99, 0.100, 0.090, 0.120, 900, 0.95)
OPEN = PercentileEstimate(99, 0.100, 0.090, None, 90, 0.95)
STEADY = [WindowFigures(500, 0.100), WindowFigures(505, 0.101), WindowFigures(498, 0.099)]


def test_stops_once_stable_and_precise() -> None:
    decision = decide(15, STEADY, NARROW, RULE)
    assert decision.stop
    assert "stable" in decision.reason and "confidence interval is 3.0% wide" in decision.reason


def test_never_before_min_duration() -> None:
    assert not decide(9.9, STEADY, NARROW, RULE).stop


def test_always_at_max_duration() -> None:
    unstable = [WindowFigures(100, 0.1), WindowFigures(900, 0.5), WindowFigures(300, 0.2)]
    decision = decide(60, unstable, WIDE, RULE)
    assert decision.stop and decision.reason == "reached maxDuration (60s)"


def test_waits_for_enough_windows() -> None:
    assert decide(15, STEADY[:2], NARROW, RULE).reason == "waiting for 3 windows"


def test_unstable_throughput_keeps_measuring() -> None:
    windows = [*STEADY[:2], WindowFigures(700, 0.1)]
    decision = decide(15, windows, NARROW, RULE)
    assert not decision.stop and "throughput" in decision.reason


def test_unstable_latency_keeps_measuring() -> None:
    windows = [*STEADY[:2], WindowFigures(500, 0.2)]
    decision = decide(15, windows, NARROW, RULE)
    assert not decision.stop and "p99 of the last 3 windows" in decision.reason


def test_wide_or_open_interval_keeps_measuring() -> None:
    assert "5.0% wide" not in decide(15, STEADY, WIDE, RULE).reason
    assert not decide(15, STEADY, WIDE, RULE).stop
    assert decide(15, STEADY, OPEN, RULE).reason.endswith("interval is open wide")


def test_without_a_rule_runs_to_max_duration() -> None:
    fixed = StoppingParameters(min_duration_s=10, max_duration_s=60)
    assert not decide(30, STEADY, NARROW, fixed).stop
    assert decide(60, STEADY, NARROW, fixed).stop


def test_spread() -> None:
    assert spread([90, 100, 110]) == 0.2
    assert spread([0, 0]) == float("inf")


def test_a_stable_measurement_goes_on_while_the_slo_cannot_be_decided() -> None:
    # p99 100 ms, CI 99-102 ms: decided against 150 ms and against 90 ms, not against 101 ms.
    assert straddling([(NARROW, 0.150)]) is None and straddling([(NARROW, 0.090)]) is None
    undecided = straddling([(NARROW, 0.150), (NARROW, 0.101)])
    assert undecided == "p99 95% interval 99.00-102.00ms straddles the objective 101ms"
    assert straddling([(OPEN, 0.5)]) == "p99 95% interval 90.00-open straddles the objective 500ms"
    decision = decide(15, STEADY, NARROW, RULE, undecided)
    assert decision == Decision(False, undecided)
    assert decide(60, STEADY, NARROW, RULE, undecided) == Decision(True, f"reached maxDuration (60s); {undecided}")


def test_the_requests_in_flight_at_the_last_edge_count_against_the_objective_as_the_verdict_will() -> None:
    # Two closed-loop users: 110 answers, 1 failure, and at the last edge both users' requests in flight.
    measured = [
        Window(0, 4, requests=56, errors=Counter({"http_503": 1}), in_flight=2),
        Window(0, 5, requests=55, in_flight=2),
    ]
    assert unanswered_so_far(measured) == (110, 3)
    assert unanswered_so_far([]) == (0, 0)
    # p95 of all 113 sent is p97.55 of the 110 answered; a p99 is missed by the three alone (2.7% > 1%).
    assert percentile_among_answered(95, 110, 3) == 95 * 113 / 110
    assert percentile_among_answered(99, 110, 3) is None
    assert percentile_among_answered(95, 0, 0) == 95


def answered_in(seconds: float, count: int) -> LatencyHistogram:
    histogram = LatencyHistogram()
    for _ in range(count):
        histogram.record(seconds)
    return histogram


def test_a_miss_that_rests_on_requests_in_flight_not_yet_past_the_bound_measures_on() -> None:
    # Four closed-loop users, one served at a time: 30 answers in 1.1 s each, three queued at the last edge
    # (9.1%), a fourth failed: 4 of 34 unanswered is more than p90 leaves. Queued for 0.3 s of a 2 s bound,
    # they may yet be answered in time: measure on (more answers dilute them).
    measured = [Window(0, 4, requests=20, errors=Counter({"http_503": 1}), in_flight=3), Window(0, 5, requests=11)]
    measured[-1].in_flight, measured[-1].in_flight_oldest_s = 3, 0.3
    p90 = (Bound("latency", 90, 2.0), answered_in(1.1, 30))
    assert undecided([p90], measured) == "p90 waits on 3 requests in flight, not yet past its 2000ms bound"
    # Answers in 3 s: missed even if the three came now; decided.
    assert undecided([(Bound("latency", 90, 2.0), answered_in(3.0, 30))], measured) is None
    # With nothing in flight the one failure is 1 of 31: p90 of all is p93 of the answered, read from them.
    measured[-1].in_flight = 0
    assert undecided([p90], measured) == "p93 95% interval 1100.80-open straddles the objective 2000ms"


def test_a_replayed_trace_ends_a_window_after_its_last_send_and_its_answers_are_in() -> None:
    answering = Window(0, 5, requests=40, in_flight=3)
    answered = Window(0, 5, requests=43, in_flight=0)
    after = Window(0, 6, requests=2, in_flight=0)  # the answers that came between the edge and its reading
    assert replay_done(5, 6, 1, 30, [answering]) is None  # the replay still sends
    assert replay_done(6, 6, 1, 30, [answering]) == Decision(False, "replayed the trace; waiting for 3 answers")
    assert replay_done(6, 6, 1, 30, [answered]) == Decision(
        False, "replayed the trace; a window more for the answers that came at its edge"
    )
    assert replay_done(7, 6, 1, 30, [answered, after]) == Decision(
        True, "replayed the trace (6s) and none is left in flight"
    )
    assert replay_done(7, 6, 1, 30, [answering, after]).stop is False  # type: ignore[union-attr]
    # The request timeout after the last send, whatever is still in flight counts as unanswered (and when the
    # timeouts have just ended the last requests, none is).
    assert replay_done(36, 6, 1, 30, [answering, answered]) == Decision(
        True, "replayed the trace (6s) and none is left in flight"
    )
    assert replay_done(36, 6, 1, 30, [answering, answering]) == Decision(
        True, "replayed the trace; 3 requests still in flight 30s after its last send"
    )


@pytest.mark.parametrize(
    ("answer_s", "in_flight", "verdict"),
    [(1.1, 3, "Inconclusive"), (3.0, 3, "NotMet"), (1.1, 0, "Inconclusive"), (0.5, 0, "Met"), (3.0, 0, "NotMet")],
)
def test_the_stopping_rule_and_the_verdict_judge_the_same_numbers_alike(
    answer_s: float, in_flight: int, verdict: str
) -> None:
    """One judgement (kaliper.measure.judgement): 30 answers, one failure and the requests in flight fed to
    the stopping rule as windows and to the verdict as a stage; the rule measures on exactly when the verdict
    would be Inconclusive. (0.5 s: 120 answers, enough to bound a p90 from above; 1.1 s against 1.2 s: 30, too
    few; 3 s: missed, or, with three in flight not yet past the bound, missed even if they came now.)"""
    answered = answered_in(answer_s, 120 if answer_s == 0.5 else 30)
    count = answered.count
    measured = [Window(0, 4, requests=count + 1, errors=Counter({"http_503": 1}), in_flight=in_flight)]
    measured[-1].in_flight_oldest_s = 0.3
    bound = Bound("latency", 90, 1.2)
    rule = undecided([(bound, answered)], measured)
    stage = make_stage(latency_figures(answered), requests=count + 1)
    stage.errors, stage.in_flight_at_end, stage.in_flight_oldest_s = 1, in_flight, 0.3
    check = latency_check(stage, LatencyObjective(percentile=90, max="1.2s"))
    assert (check.verdict, rule is not None) == (verdict, verdict == "Inconclusive"), (check, rule)
