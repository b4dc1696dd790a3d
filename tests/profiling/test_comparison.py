"""A run against its baseline, figure by figure, from the intervals both measured."""

from __future__ import annotations

import pytest

from kaliper.profiling.comparison import compare_runs, regressions, unmatched
from kaliper.report.comparison_text import comparison_line
from kaliper.report.schema import LatencyFigures, PercentileFigure, TrialReport
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
    assert comparison_line(p99) == (
        "cpu=1 concurrency=4: latency p99 30.00 ms -> 45.00 ms (+50.0%): worse (95%: 28-32 vs 42-48)"
    )
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
