"""Each configuration's capacity under the SLO from its trials: the bracket, the cost at the highest load met
with its interval, and replicas with theirs."""

from __future__ import annotations

import pytest

from kaliper.profiling.capacity import capacities
from kaliper.profiling.decisions import replicas_for
from kaliper.report.schema import TrialReport, WindowResult
from tests.support.reports import make_stage

FIRST_PROBE = 6  # three configurations x levels 2 and 8


def trial(
    index: int,
    cpu: str,
    users: int,
    verdict: str | None,
    throughput: float = 10.0,
    windows: list[float] | None = None,
    status: str = "Succeeded",
) -> TrialReport:
    stage = make_stage(throughput_rps=throughput, level=users, measured_s=10)
    stage.windows = [
        WindowResult(index=i, start_s=i, warmup=False, requests=int(r), errors=0, throughput_rps=r)
        for i, r in enumerate(windows or [])
    ]
    return TrialReport(
        index=index,
        name=f"t{index}",
        parameters={"cpu": cpu, "concurrency": str(users)},
        status=status,  # type: ignore[arg-type]
        stage=stage if status == "Succeeded" else None,
        slo_verdict=verdict,  # type: ignore[arg-type]
        cost_per_million_requests=100 / throughput if status == "Succeeded" else None,
    )


TRIALS = [
    # cpu=1: 2 met, 8 not; the probes found 5 met (50 req/s, windows 45, 55, 50, 50), 6 not.
    trial(0, "1", 2, "Met", 20.0),
    trial(1, "1", 8, "NotMet", 60.0),
    trial(6, "1", 5, "Met", 50.0, windows=[45, 55, 50, 50]),
    trial(7, "1", 6, "NotMet", 55.0),
    # cpu=2: met at both listed levels, the highest measured.
    trial(2, "2", 2, "Met", 20.0),
    trial(3, "2", 8, "Met", 80.0),
    # cpu=500m: 2 not met, and 8 failed (the server died).
    trial(4, "500m", 2, "NotMet", 15.0),
    trial(5, "500m", 8, None, status="Failed"),
]


def test_the_bracket_of_each_configuration() -> None:
    found = capacities(TRIALS, "concurrency", FIRST_PROBE)
    assert [(c.parameters, c.met, c.not_met, c.trial, c.probes) for c in found] == [
        ({"cpu": "1"}, 5.0, 6.0, 6, 2),
        ({"cpu": "2"}, 8.0, None, 3, 0),
        ({"cpu": "500m"}, None, 2.0, None, 0),
    ]
    assert [c.interval_text() for c in found] == [
        "met at 5, not met at 6",
        "met at 8 (the highest measured)",
        "not met at 2 (the lowest measured)",
    ]
    assert found[0].probe_seconds == 22.0  # two probes of 1 s warm-up and 10 s measured


def test_cost_and_replicas_at_the_highest_load_met_with_their_intervals() -> None:
    """At 5 users: 50 req/s, its windows' 95% relative uncertainty 1.96 x 4.0825 / 2 / 50 = 8.00%; cost 2.0 per
    million requests, so 2.0 / 1.08 .. 2.0 / 0.92; 140 req/s needs 2.8 replicas of 50: 3, and 3-4 over the
    interval (140 / 54.0 = 2.59, 140 / 46.0 = 3.04)."""
    (one, *_) = capacities(TRIALS, "concurrency", FIRST_PROBE, target_rps=140)
    assert one.throughput == 50.0 and one.noise == pytest.approx(0.08, abs=1e-4)
    assert one.unit_cost == 2.0
    assert one.unit_cost_low == pytest.approx(1.8518, abs=1e-3) and one.unit_cost_high == pytest.approx(
        2.1739, abs=1e-3
    )
    assert (one.replicas, one.replicas_low, one.replicas_high) == (3, 3, 4)


def test_loads_that_could_not_be_told_lie_between_met_and_not_met() -> None:
    trials = [trial(0, "1", 2, "Met"), trial(1, "1", 8, "NotMet"), trial(6, "1", 5, "Inconclusive")]
    (found,) = capacities(trials, "concurrency", FIRST_PROBE)
    assert (found.met, found.inconclusive, found.not_met) == (2.0, [5.0], 8.0)
    assert found.interval_text() == "met at 2, inconclusive at 5, not met at 8"


def test_replicas_for_a_target_and_their_interval() -> None:
    assert replicas_for(100, 25, 0.0) == (4, 4, 4)
    assert replicas_for(100, 30, 0.2) == (4, 3, 5)  # 3.33; 100 / 36 = 2.78; 100 / 24 = 4.17
    assert replicas_for(100, 30, 1.0) == (4, 2, None)  # uncertain by 100%: no upper bound


def test_a_configuration_that_never_met_says_where_it_could_not_tell() -> None:
    """The classic demo's cpu=500m: p99 Inconclusive at 2 users, NotMet at 8."""
    trials = [trial(0, "500m", 2, "Inconclusive"), trial(1, "500m", 8, "NotMet")]
    (found,) = capacities(trials, "concurrency", FIRST_PROBE)
    assert (found.met, found.inconclusive, found.not_met) == (None, [2.0], 8.0)
    assert found.interval_text() == "inconclusive at 2, not met at 8"
