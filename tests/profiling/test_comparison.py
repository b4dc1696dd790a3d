"""A run against its baseline, figure by figure, from the intervals both measured."""

from __future__ import annotations

import pytest

from kaliper.api.profilerun import RegressionTolerance
from kaliper.profiling.comparison import FAMILIES, compare_runs, regressions, unmatched
from kaliper.report.schema import LatencyFigures, PercentileFigure, TokenFigures, TrialReport
from tests.support.reports import make_stage


def latency(p50: tuple[float, float, float], p99: tuple[float, float, float]) -> LatencyFigures:
    return LatencyFigures(
        count=1000,
        percentiles=[
            PercentileFigure(percentile=50, value_ms=p50[0], ci_low_ms=p50[1], ci_high_ms=p50[2], count=1000),
            PercentileFigure(percentile=99, value_ms=p99[0], ci_low_ms=p99[1], ci_high_ms=p99[2], count=1000),
        ],
    )


def trial(
    p99: tuple[float, float, float], throughput: float = 100.0, errors: float = 0.0, users: str = "4"
) -> TrialReport:
    stage = make_stage(latency((20.0, 19.5, 20.5), p99), 100.0, error_rate=errors, requests=1000)
    return TrialReport(
        index=0, name="t0", parameters={"cpu": "1", "concurrency": users}, status="Succeeded", stage=stage
    )


BASE = trial((30.0, 28.0, 32.0))


def verdicts(found) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {c.figure: c.verdict for c in found}


def test_the_same_figures_are_within_the_noise_and_nothing_regressed() -> None:
    found = compare_runs([BASE], [trial((31.0, 29.0, 33.0))])
    assert verdicts(found) == {
        "throughput": "within the noise",
        "latency p50": "within the noise",
        "latency p99": "within the noise",
        "error rate": "within the noise",
    }
    assert regressions(found, lambda figure: 0.05) == []


def test_a_percentile_moves_by_4_percent_either_way_before_it_is_better_or_worse() -> None:
    """One run's interval of a median is narrow (here +-0.5%), narrower than a rerun of the same server moves:
    30.0 ms against 32.1 ms (+7%) is within the noise, 30.0 against 32.7 (+9%) is worse, and 27.3 (-9%) better."""
    narrow = trial((30.0, 29.85, 30.15))
    nearby, slower, faster = (trial((v, v - 0.15, v + 0.15)) for v in (32.1, 32.7, 27.3))
    assert [verdicts(compare_runs([narrow], [t]))["latency p99"] for t in (nearby, slower, faster)] == [
        "within the noise",
        "worse",
        "better",
    ]
    (shown,) = [c for c in compare_runs([narrow], [slower]) if c.figure == "latency p99"]
    assert (shown.baseline_low, shown.baseline_high, shown.low, shown.high) == pytest.approx(
        (28.8, 31.2, 31.392, 34.008)
    )


def test_a_slower_tail_beyond_both_intervals_is_worse_by_its_size() -> None:
    found = compare_runs([BASE], [trial((45.0, 42.0, 48.0))])
    (p99,) = [c for c in found if c.figure == "latency p99"]
    assert (p99.verdict, p99.change) == ("worse", 0.5)
    assert p99.line() == ("cpu=1 concurrency=4: latency p99 30.00 ms -> 45.00 ms (+50.0%): worse (95%: 28-32 vs 42-48)")
    assert regressions(found, lambda figure: 0.05) == [p99] and regressions(found, lambda figure: 0.6) == []


def test_a_server_that_fails_more_cannot_look_faster() -> None:
    """2% of requests failed: its p99 among every request sent lies beyond every answer, whatever the answers
    took (here a faster tail among them), and its error rate is worse: 0 of 1000 against 20 of 1000."""
    found = compare_runs([BASE], [trial((25.0, 24.0, 26.0), errors=0.02)])
    by_figure = {c.figure: c for c in found}
    assert (by_figure["latency p99"].verdict, by_figure["latency p99"].value, by_figure["latency p99"].change) == (
        "worse",
        None,
        None,
    )
    assert by_figure["error rate"].verdict == "worse" and by_figure["error rate"].value == 0.02
    assert {c.figure for c in regressions(found, lambda figure: 0.05)} == {"latency p99", "error rate"}


def test_only_the_same_configuration_at_the_same_load_is_compared() -> None:
    other_load = trial((30.0, 28.0, 32.0), users="8")
    failed = TrialReport(index=1, name="t1", parameters={"cpu": "1", "concurrency": "4"}, status="Failed")
    assert compare_runs([BASE], [other_load]) == []
    assert unmatched([BASE], [failed]) == ["cpu=1 concurrency=4: measured in the baseline, Failed now"]


def streamed(ttfot_ms: float, reasoning_requests: int) -> TrialReport:
    """A generation trial: ttft 80 ms, itl 12 ms, tpot 12 ms; time to first output token as given."""

    def narrow(value: float) -> LatencyFigures:
        return latency((value, value * 0.99, value * 1.01), (value * 2, value * 1.9, value * 2.1))

    tokens = TokenFigures(
        ttft=narrow(80.0),
        ttft_service=narrow(80.0),
        ttfot=narrow(ttfot_ms),
        ttfot_service=narrow(ttfot_ms),
        itl_chunk=narrow(12.0),
        itl_token=narrow(12.0),
        tpot=narrow(12.0),
        streams=1000,
        chunks=128000,
        input_tokens=10000,
        output_tokens=128000,
        output_tokens_per_s=12800.0,
        total_tokens_per_s=13800.0,
        reasoning_requests=reasoning_requests,
    )
    stage = make_stage(narrow(1600.0), 100.0, requests=1000).model_copy(update={"tokens": tokens})
    return TrialReport(index=0, name="t0", parameters={"concurrency": "4"}, status="Succeeded", stage=stage)


def test_a_reasoning_model_that_thinks_twice_as_long_reads_worse_on_time_to_first_output_alone() -> None:
    """The same ttft, itl and tpot, the answer's first token at 800 ms instead of 400 ms: ttfot p50 and p99 are
    worse (+100%), every other figure within the noise; a ttfot tolerance of 1.5 lets it pass, the others'
    default of 5% does not apply to it."""
    found = compare_runs([streamed(400.0, 1000)], [streamed(800.0, 1000)])
    assert [(c.figure, c.verdict) for c in found] == [
        ("throughput", "within the noise"),
        ("output tokens/s", "within the noise"),
        ("latency p50", "within the noise"),
        ("latency p99", "within the noise"),
        ("ttft p50", "within the noise"),
        ("ttft p99", "within the noise"),
        ("ttfot p50", "worse"),
        ("ttfot p99", "worse"),
        ("itl p50", "within the noise"),
        ("itl p99", "within the noise"),
        ("tpot p50", "within the noise"),
        ("tpot p99", "within the noise"),
        ("error rate", "within the noise"),
    ]
    assert [c.change for c in found if c.family == "ttfot"] == [1.0, 1.0]
    assert [c.figure for c in regressions(found, RegressionTolerance().for_figure)] == ["ttfot p50", "ttfot p99"]
    assert regressions(found, RegressionTolerance(ttfot=1.5).for_figure) == []


def test_time_to_first_output_is_left_out_where_no_model_thought() -> None:
    """It equals ttft then: comparing it would count one change twice."""
    found = compare_runs([streamed(80.0, 0)], [streamed(80.0, 0)])
    assert [c.family for c in found if c.family not in ("latency", "throughput", "error_rate")] == [
        "ttft",
        "ttft",
        "itl",
        "itl",
        "tpot",
        "tpot",
    ]


def test_every_family_of_figures_compared_has_its_tolerance_field() -> None:
    assert FAMILIES == ("throughput", "latency", "ttft", "ttfot", "itl", "tpot", "error_rate", "cost", "quality")
    assert set(FAMILIES) == set(RegressionTolerance.model_fields) - {"default"}


def test_a_configurations_quality_is_compared_by_its_interval_and_gated_like_any_figure() -> None:
    from kaliper.profiling.comparison import compare_quality
    from kaliper.report.schema import ConfigurationRow, QualityScore

    def row(variant: str, correct: int, low: float, high: float) -> ConfigurationRow:
        score = QualityScore(
            rows=20, correct=correct, score=correct / 20, ci_low=low, ci_high=high, verdict="Held", observed=""
        )
        return ConfigurationRow(parameters={"variant": variant}, trials=[0], qualified=True, quality=score, reason="")

    before = [row("q8", 20, 0.8389, 1.0), row("q4", 18, 0.6990, 0.9721)]
    after = [row("q8", 9, 0.2582, 0.6579), row("q4", 17, 0.6396, 0.9476), row("q2", 5, 0.1119, 0.4687)]
    found = compare_quality(before, after)
    assert [(c.parameters, c.figure, c.verdict, round(c.change or 0, 4)) for c in found] == [
        ({"variant": "q8"}, "quality", "worse", -0.55),
        ({"variant": "q4"}, "quality", "within the noise", -0.0556),
    ]
    gate = RegressionTolerance(quality=0.1)
    assert [c.parameters for c in regressions(found, gate.for_figure)] == [{"variant": "q8"}]
