from __future__ import annotations

import pytest

from kaliper.api.profilerun import CostModel, RecommendationSpec, SloSpec
from kaliper.loadgen.histogram import LatencyHistogram
from kaliper.profiling import decisions
from kaliper.report.render import pareto_front
from kaliper.report.schema import (
    LatencyFigures,
    PercentileFigure,
    ResourceSeriesPoint,
    StageResult,
    TrialReport,
    TrialResources,
)
from tests.support.reports import make_stage


def stage(p99_ms: float, throughput: float, error_rate: float = 0.0) -> StageResult:
    histogram = LatencyHistogram()
    for _ in range(100):
        histogram.record(p99_ms / 1000)
    figures = LatencyFigures(
        count=100,
        percentiles=[PercentileFigure(percentile=99, value_ms=p99_ms, count=100)],
        histogram=histogram.encode(),
    )
    return make_stage(figures, throughput, error_rate=error_rate)


SLO = SloSpec.model_validate(
    {"latency": [{"percentile": 99, "max": "50ms"}], "maxErrorRate": 0.01, "minThroughput": 100}
)


def test_slo_checks_each_objective() -> None:
    checks, met = decisions.slo_checks(stage(40, 500), SLO)
    assert met and [c.objective for c in checks] == ["p99 <= 50ms", "error rate <= 1.00%", "throughput >= 100/s"]
    checks, met = decisions.slo_checks(stage(60, 500, error_rate=0.02), SLO)
    assert not met and [c.met for c in checks] == [False, False, True]
    assert checks[0].observed == "60.00ms"
    assert decisions.slo_checks(stage(60, 500), None) == ([], None)


def test_percentiles_not_in_the_summary_come_from_the_histogram() -> None:
    assert decisions.latency_at(stage(40, 1), 97) == pytest.approx(40, rel=0.01)


def test_cost_figures() -> None:
    prices = CostModel(per_core_hour=0.04, per_gib_hour=0.005, per_gpu_hour=2.0)
    hourly = decisions.hourly_cost(0.5, 2**30, 1, 2, prices)
    assert hourly == pytest.approx(2 * (0.02 + 0.005 + 2.0))
    # 1e6 requests at 100 req/s take 10,000 s = 2.78 h.
    assert decisions.per_million(hourly, 100) == pytest.approx(hourly * 10_000 / 3600)
    assert decisions.per_million(hourly, 0) is None


def trial(index: int, p99: float, rps: float, cost: float, met: bool, **extra: object) -> TrialReport:
    return TrialReport(
        index=index,
        name=f"t{index}",
        parameters={"cpu": "1"},
        status="Succeeded",
        stage=stage(p99, rps),
        slo_met=met,
        cost_per_million_requests=cost,
        **extra,
    )


def test_best_is_the_cheapest_that_met_the_slo() -> None:
    trials = [trial(0, 10, 900, 0.5, True), trial(1, 20, 500, 0.2, True), trial(2, 90, 2000, 0.1, False)]
    assert decisions.best_trial(trials, have_slo=True).index == 1
    assert decisions.best_trial(trials, have_slo=False).index == 2
    assert decisions.best_trial([trials[2]], have_slo=True) is None


def test_recommendation_uses_p90_usage_plus_margin_and_memory_peaks() -> None:
    series = [
        ResourceSeriesPoint(t_s=i, cpu_cores=c, memory_bytes=100 * 2**20)
        for i, c in enumerate([0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 0.1])
    ]
    resources = TrialResources(source="cgroup", series=series, memory_peak_bytes=200 * 2**20)
    best = trial(3, 20, 400, 0.2, True, resources=resources)
    oomed = TrialReport(
        index=1,
        name="t1",
        parameters={"memory": "128Mi"},
        status="Failed",
        resources=TrialResources(source="cgroup", oom_kills=1),
    )
    r = decisions.recommend(best, [best, oomed], RecommendationSpec(), replicas=1, target_throughput=1000)
    assert r.cpu_request == "1035m"  # P90 of the samples is 0.9 cores, +15%
    assert r.cpu_limit == "1035m"  # the trial's 1-core limit would sit below the request
    assert r.memory_request == "230Mi"  # peak 200Mi +15%, above the OOM bump (128Mi +100Mi = 228Mi)
    assert r.memory_limit == "276Mi"
    assert r.replicas == 3  # 1000 req/s at 400 req/s per replica
    assert "OOM-killed" in r.rationale


def test_pareto_front() -> None:
    points = [(1.0, 50.0, 0), (2.0, 20.0, 1), (3.0, 30.0, 2), (0.5, 90.0, 3)]
    assert sorted(pareto_front(points)) == [0, 1, 3]
