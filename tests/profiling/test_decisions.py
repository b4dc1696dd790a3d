from __future__ import annotations

import pytest

from kaliper.api.profilerun import CostModel, RecommendationSpec, SloSpec
from kaliper.measure.histogram import LatencyHistogram
from kaliper.pareto import pareto_front
from kaliper.profiling import decisions
from kaliper.report.schema import (
    LatencyFigures,
    ResourceSeriesPoint,
    StageResult,
    TrialReport,
    TrialResources,
)
from tests.support.reports import make_stage, stage, trial

SLO = SloSpec.model_validate(
    {"latency": [{"percentile": 99, "max": "50ms"}], "maxErrorRate": 0.01, "minThroughput": 100}
)


def test_slo_checks_each_objective() -> None:
    checks, verdict = decisions.slo_checks(stage(40, 500), SLO)
    assert verdict == "Met"
    assert [c.objective for c in checks] == ["p99 <= 50ms", "error rate <= 1.00%", "throughput >= 100/s"]
    checks, verdict = decisions.slo_checks(stage(60, 500), SLO)
    assert verdict == "NotMet" and [c.verdict for c in checks] == ["NotMet", "Met", "Met"]
    assert checks[0].observed == "60.00ms (95% CI 57.00-63.00ms)"
    assert decisions.slo_checks(stage(60, 500), None) == ([], None)


def test_a_stage_whose_requests_did_not_complete_is_never_met() -> None:
    slo = SloSpec.model_validate({"latency": [{"percentile": 99, "max": "50ms"}], "maxErrorRate": 0.01})
    hung = make_stage(LatencyFigures(), 0, requests=0)
    hung.in_flight_at_end, hung.in_flight_oldest_s = 4, 31.0
    checks, verdict = decisions.slo_checks(hung, slo)
    assert verdict == "NotMet"
    assert [(c.verdict, c.observed) for c in checks] == [
        (
            "NotMet",
            "no request completed: 4 were still in flight when the stage ended (the oldest for 31.0 s) (100.00%), "
            "more than the 1% that p99 leaves",
        ),
        ("Inconclusive", "no request completed"),
    ]
    # Every completed request failed, one more still in flight: named after the failures.
    failing = make_stage(LatencyFigures(), 0, error_rate=1.0, requests=10)
    failing.in_flight_at_end, failing.in_flight_oldest_s = 1, 0.5
    assert decisions.slo_checks(failing, slo)[0][0].observed == (
        "every one of the 10 requests failed and 1 were still in flight when the stage ended (the oldest for 0.5 s)"
    )
    # Nothing sent at all: no samples, and nothing to decide.
    assert decisions.slo_checks(make_stage(LatencyFigures(), 0, requests=0), slo)[1] == "Inconclusive"


def test_failed_requests_count_as_over_every_latency_bound() -> None:
    latency_only = SloSpec.model_validate({"latency": [{"percentile": 99, "max": "50ms"}]})
    # 2% failed: more than the 1% p99 leaves, whatever the answered requests took (40 ms here).
    checks, verdict = decisions.slo_checks(stage(40, 500, error_rate=0.02), latency_only)
    assert verdict == "NotMet"
    assert checks[0].observed == "20 of 1000 requests failed (2.00%), more than the 1% that p99 leaves"
    # Every request failed (a server that answers nothing but errors, fast): never Met.
    checks, verdict = decisions.slo_checks(stage(1, 0, error_rate=1.0), latency_only)
    assert (verdict, checks[0].observed) == ("NotMet", "every one of the 1000 requests failed")
    # 0.5% failed: p99 of every request is p99.5 of the answered ones, read from their histogram (40 ms each).
    histogram = LatencyHistogram()
    for _ in range(10_000):
        histogram.record(0.040)
    figures = LatencyFigures(count=10_000, histogram=histogram.encode())
    few_failed = make_stage(figures, 500, error_rate=0.005, requests=10_000)
    assert decisions.answered_percentile(few_failed, 99) == pytest.approx(99.4975, abs=1e-4)
    # Requests still in flight when the stage ended count with the failures: 50 failed and 50 in flight of
    # 10,050 make 100 unanswered, 0.995%, just inside what p99 leaves.
    pending = make_stage(figures, 500, error_rate=0.005, requests=10_000)
    pending.in_flight_at_end, pending.in_flight_oldest_s = 50, 12.5
    assert decisions.answered_percentile(pending, 99) == pytest.approx(99 / (1 - 100 / 10_050), abs=1e-6)
    checks, verdict = decisions.slo_checks(few_failed, latency_only)
    assert verdict == "Met"
    assert checks[0].observed.endswith(
        " at p99.5 of the answered requests: 50 of 10000 requests failed, counted as over the bound"
    ), checks[0].observed


def answered_in(seconds: float, count: int) -> StageResult:
    histogram = LatencyHistogram()
    for _ in range(count):
        histogram.record(seconds)
    return make_stage(LatencyFigures(count=count, histogram=histogram.encode()), 3.0, requests=count)


def test_requests_in_flight_not_yet_past_the_bound_make_a_miss_inconclusive() -> None:
    """A closed loop of users on a server that serves fewer at a time ends every stage with some queued: 300
    answers in 1.1 s each and 40 still in flight (11.8%, more than p90 leaves) is a miss only if they are all
    late. In flight for 0.3 s against a 2 s bound, they may yet be answered in time: Inconclusive."""
    slo = SloSpec.model_validate({"latency": [{"percentile": 90, "max": "2s"}]})
    queued = answered_in(1.1, 300)
    queued.in_flight_at_end, queued.in_flight_oldest_s = 40, 0.3
    checks, verdict = decisions.slo_checks(queued, slo)
    assert verdict == "Inconclusive"
    assert checks[0].observed == (
        "0 of 300 requests failed and 40 were still in flight when the stage ended (the oldest for 0.3 s) "
        "(11.76%), more than the 10% that p90 leaves; but 40 of those in flight (the oldest for 0.3 s) may yet be "
        "answered within 2s: Met if they all are"
    )
    # The oldest, 2.5 s in flight, is past the bound for certain; the other 39 may not be: still undecided.
    queued.in_flight_oldest_s = 2.5
    assert decisions.slo_checks(queued, slo)[1] == "Inconclusive"
    # Too few answers to bound p89 from above even if every one in flight came now.
    short = answered_in(1.1, 30)
    short.in_flight_at_end, short.in_flight_oldest_s = 4, 0.3
    assert decisions.slo_checks(short, slo)[0][0].observed.endswith(": undecided even if they all are")
    # Answers in 3 s each miss the bound whatever those in flight do.
    slow = answered_in(3.0, 300)
    slow.in_flight_at_end, slow.in_flight_oldest_s = 40, 0.3
    checks, verdict = decisions.slo_checks(slow, slo)
    assert verdict == "NotMet"
    # The reason names what the answers took (3 s, in the histogram's bucket), not only the requests in flight.
    assert checks[0].observed.endswith(
        "more than the 10% that p90 leaves; even if those in flight were answered now: 3000.32ms "
        "(95% CI 3000.32-3000.32ms)"
    ), checks[0].observed
    # 2 answered and 4 in flight past the bound, one of them over it for certain: 1 of 6 is more than p90
    # leaves, a miss even in the best case.
    few = answered_in(1.1, 2)
    few.in_flight_at_end, few.in_flight_oldest_s = 4, 2.5
    assert decisions.slo_checks(few, slo)[1] == "NotMet"
    # Time to first token: a request in flight past the bound may have had its first token in time, so none
    # is over it for certain: the best case is p70 of the two answered ((90% of 6 - 4) / 2).
    ttft = SloSpec.model_validate({"latency": [{"percentile": 90, "max": "2s", "metric": "ttft"}]})
    assert decisions.best_case_percentile(few, ttft.latency[0]) == 70.0
    assert decisions.best_case_percentile(few, slo.latency[0]) is None


def test_a_percentile_is_met_only_when_its_whole_interval_is_within_the_bound() -> None:
    # The case from issue 12: p99 24.73 ms, 95% CI 19.36-26.61 ms, against 25 ms.
    slo = SloSpec.model_validate({"latency": [{"percentile": 99, "max": "25ms"}]})
    checks, verdict = decisions.slo_checks(stage(24.73, 500, interval=(19.36, 26.61)), slo)
    assert verdict == "Inconclusive"
    assert checks[0].observed == "24.73ms (95% CI 19.36-26.61ms)"
    assert decisions.slo_checks(stage(24.0, 500, interval=(23.0, 24.9)), slo)[1] == "Met"
    assert decisions.slo_checks(stage(26.0, 500, interval=(25.1, 27.0)), slo)[1] == "NotMet"
    # Too few samples to bound the percentile from above: not met, however low the value.
    checks, verdict = decisions.slo_checks(stage(5.0, 500, interval=(4.0, None)), slo)
    assert verdict == "Inconclusive" and checks[0].observed == "5.00ms (95% CI 4.00-unbounded: too few samples)"
    # One objective missed outweighs another undecided.
    both = SloSpec.model_validate({"latency": [{"percentile": 99, "max": "25ms"}], "minThroughput": 1000})
    assert decisions.slo_checks(stage(24.73, 500, interval=(19.36, 26.61)), both)[1] == "NotMet"


def test_percentiles_not_in_the_summary_come_from_the_histogram() -> None:
    assert decisions.latency_at(stage(40, 1), 97) == pytest.approx(40, rel=0.01)


def test_cost_figures() -> None:
    prices = CostModel(per_core_hour=0.04, per_gib_hour=0.005, per_gpu_hour=2.0)
    hourly = decisions.allocation_cost_per_hour(0.5, 2**30, 1, 2, prices)
    assert hourly == pytest.approx(2 * (0.02 + 0.005 + 2.0))
    # 1e6 requests at 100 req/s take 10,000 s = 2.78 h.
    assert decisions.per_million(hourly, 100) == pytest.approx(hourly * 10_000 / 3600)
    assert decisions.per_million(hourly, 0) is None


def best(trials: list[TrialReport], slo: SloSpec | None = SLO, tolerance: float = 0.05) -> int | None:
    choice = decisions.best_trial(trials, slo, tolerance)
    return None if choice is None else choice.best


def test_best_is_the_cheapest_that_met_the_slo() -> None:
    trials = [trial(0, 10, 900, 0.5, "Met"), trial(1, 20, 500, 0.2, "Met"), trial(2, 90, 2000, 0.1, "NotMet")]
    assert best(trials) == 1
    assert best(trials, slo=None) == 2
    assert best([trials[2]]) is None
    choice = decisions.best_trial(trials, SLO, 0.05)
    assert choice is not None and choice.report.certainty == "Clear" and choice.report.runner_up == 0
    assert choice.report.cost_difference == 1.5  # 0.5 against 0.2
    assert choice.report.explanation == "the runner-up t0 costs 150.0% more per request, beyond the 5.0% noise"


def test_an_inconclusive_trial_is_never_the_best() -> None:
    trials = [trial(0, 10, 900, 0.5, "Met"), trial(1, 49, 500, 0.2, "Inconclusive")]
    assert best(trials) == 0


def test_costs_within_the_tolerance_tie_and_headroom_decides() -> None:
    # t1 is 4% cheaper, inside the 5% tolerance; t0's p99 interval tops out at 10.5 ms of 50 (79% headroom),
    # t1's at 42 ms (16%): t0 wins.
    trials = [trial(0, 10, 900, 0.25, "Met"), trial(1, 40, 500, 0.24, "Met")]
    choice = decisions.best_trial(trials, SLO, 0.05)
    assert choice is not None and choice.best == 0 and choice.report.certainty == "Tie"
    assert choice.report.explanation == (
        "t1 costs 4.2% less per request, inside the 5.0% noise: a tie, decided by latency headroom "
        "(t0 79% below its latency bound, t1 16% below its latency bound)"
    )
    # With no tolerance and steady windows, 4% is beyond the noise: the cheaper one wins.
    assert best(trials, tolerance=0.0) == 1


def test_noisy_windows_widen_the_tie() -> None:
    # Window throughputs 400/600 alternating: mean 500, sd 105, 95% half-width 1.96*105/sqrt(10) = 13%
    # for each trial, 18.6% for the pair; a 10% cost difference is a tie even with no tolerance.
    noisy = [400.0, 600.0] * 5
    trials = [
        trial(0, 10, 500, 0.22, "Met", window_rates=noisy),
        trial(1, 40, 500, 0.20, "Met", window_rates=noisy),
    ]
    choice = decisions.best_trial(trials, SLO, 0.0)
    assert choice is not None and choice.best == 0 and choice.report.noise == 0.1848


def test_a_disturbed_best_says_so() -> None:
    flag = "the load generator used 0.98 of the 1 cores it can use: it may have set the pace"
    trials = [trial(0, 10, 900, 0.2, "Met", limited_by=[flag])]
    choice = decisions.best_trial(trials, SLO, 0.05)
    assert choice is not None and choice.report.certainty == "Disturbed"
    assert choice.report.explanation == (
        f"measured while limited by something other than its configuration ({flag}); t0 is the only trial that "
        "qualified"
    )


def test_a_tie_goes_to_a_trial_measured_undisturbed_before_headroom() -> None:
    # The tie of test_costs_within_the_tolerance_tie_and_headroom_decides, but t0, the one with more headroom,
    # was limited by something other than its configuration: t1 wins it, and the choice is a plain tie.
    flag = "p50 rose from 15ms at concurrency 1 to 30ms while the server used 0.47 of its 1-core limit"
    trials = [trial(0, 10, 900, 0.25, "Met", limited_by=[flag]), trial(1, 40, 500, 0.24, "Met")]
    choice = decisions.best_trial(trials, SLO, 0.05)
    assert choice is not None and choice.best == 1 and choice.report.certainty == "Tie"
    # The explanation names the rule that decided (the configuration rows name the same: test_choice_rows.py).
    assert choice.report.explanation == (
        "t0 costs 4.2% more per request, inside the 5.0% noise: a tie, decided as the one measured undisturbed "
        "(t0 measured while limited by something other than its configuration)"
    )
    assert choice.won_by == {0: "undisturbed"}
    # Both disturbed: headroom decides, and the choice says it was disturbed.
    both = [trial(0, 10, 900, 0.25, "Met", limited_by=[flag]), trial(1, 40, 500, 0.24, "Met", limited_by=[flag])]
    choice = decisions.best_trial(both, SLO, 0.05)
    assert choice is not None and choice.best == 0 and choice.report.certainty == "Disturbed"


def test_recommendation_uses_p90_usage_plus_margin_and_memory_peaks() -> None:
    series = [
        ResourceSeriesPoint(t_s=i, cpu_cores=c, memory_bytes=100 * 2**20)
        for i, c in enumerate([0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 0.1])
    ]
    resources = TrialResources(source="cgroup", series=series, memory_peak_bytes=200 * 2**20)
    chosen = trial(3, 20, 400, 0.2, "Met", resources=resources)
    oomed = TrialReport(
        index=1,
        name="t1",
        parameters={"memory": "128Mi"},
        status="Failed",
        resources=TrialResources(source="cgroup", oom_kills=1),
    )
    r = decisions.recommend(chosen, [chosen, oomed], RecommendationSpec(), replicas=1, target_throughput=1000)
    assert r.cpu_request == "1035m"  # P90 of the samples is 0.9 cores, +15%
    assert r.cpu_limit == "1035m"  # the trial's 1-core limit would sit below the request
    assert r.memory_request == "230Mi"  # peak 200Mi +15%, above the OOM bump (128Mi +100Mi = 228Mi)
    assert r.memory_limit == "276Mi"
    assert r.replicas == 3  # 1000 req/s at 400 req/s per replica
    assert "OOM-killed" in r.rationale


def test_pareto_front() -> None:
    points = [(1.0, 50.0, 0), (2.0, 20.0, 1), (3.0, 30.0, 2), (0.5, 90.0, 3)]
    assert sorted(pareto_front(points)) == [0, 1, 3]


def test_the_cost_latency_frontier_of_a_run() -> None:
    trials = [
        trial(0, p99=50.0, rps=100, cost=1.0, verdict="Met"),
        trial(1, p99=20.0, rps=100, cost=2.0, verdict="Met"),
        trial(2, p99=30.0, rps=100, cost=3.0, verdict="Met"),  # t1 is cheaper and faster
        trial(3, p99=90.0, rps=100, cost=0.5, verdict="NotMet"),
        TrialReport(index=4, name="t4", parameters={}, status="Failed", message="no server"),  # nothing measured
    ]
    assert decisions.cost_latency_frontier(trials) == [0, 1, 3]
