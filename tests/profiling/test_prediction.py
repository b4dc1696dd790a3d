"""A profile's prediction scored against production figures (kaliper.profiling.prediction), on scripted figures:
the interpolation between measured levels and its intervals, every reason, and the levels read from a report."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kaliper.api.profilerun import SloSpec
from kaliper.profiling.prediction import (
    Band,
    ProductionWindow,
    ProfiledLevel,
    compared_percentiles,
    deployed_configuration,
    interpolate,
    profiled_levels,
    requests_to_bound,
    score,
)
from tests.support.sample_reports import report_with, succeeded

# Two measured levels per replica: 100 and 200 requests a second, timed as production's histograms time them (the
# servers' own times).
LEVELS = [
    ProfiledLevel(100.0, {50: Band(10.0, 9.5, 10.5), 99: Band(20.0, 18.0, 22.0)}, 0.2, 100e6, latency_basis="server"),
    ProfiledLevel(200.0, {50: Band(12.0, 11.5, 12.5), 99: Band(30.0, 27.0, 33.0)}, 0.4, 110e6, latency_basis="server"),
]
# The same levels as a load generator timed them: whole requests, the network and the client included.
CLIENT_LEVELS = [replace(level, latency_basis="client") for level in LEVELS]
# Production's median, in the bucket 10-12 ms.
P50 = Band(11.0, 10.0, 12.0)


def window(rate_per_replica: float, p99: Band, *, p50: Band = P50, **more: object) -> ProductionWindow:
    """A minute of production on two replicas."""
    requests = round(rate_per_replica * 2 * 60)
    return ProductionWindow(60, requests, 2.0, {50: p50, 99: p99}, **more)  # type: ignore[arg-type]


def test_figures_between_two_levels_are_interpolated_with_their_intervals() -> None:
    at = interpolate(LEVELS, 150.0)
    assert at is not None
    assert at.latency_ms == {50: Band(11.0, 10.5, 11.5), 99: Band(25.0, 22.5, 27.5)}
    assert (at.cpu_cores, at.memory_bytes) == (pytest.approx(0.3), pytest.approx(105e6))
    assert interpolate(LEVELS, 200.0).latency_ms[99] == Band(30.0, 27.0, 33.0)  # type: ignore[union-attr]
    assert interpolate(LEVELS, 99.9) is None and interpolate(LEVELS, 200.1) is None
    # An interval open at the top stays open between levels.
    open_top = [LEVELS[0], ProfiledLevel(200.0, {99: Band(30.0, 27.0, None)})]
    assert interpolate(open_top, 150.0).latency_ms[99] == Band(25.0, 22.5, None)  # type: ignore[union-attr]


def test_production_inside_the_profiles_intervals_holds() -> None:
    scored = score(LEVELS, window(150.0, Band(25.0, 20.0, 30.0)), tolerance=0.1)
    assert (scored.holds, scored.reason, scored.rate_rps) == (True, "Holds", 150.0)
    assert scored.message == "every latency percentile within the profile's interval at 150 requests/s per replica"
    p99 = next(f for f in scored.figures if f.figure == "p99 latency (ms)")
    assert p99.predicted == Band(25.0, 22.5 * 0.9, 27.5 * 1.1) and p99.error == 0.0 and p99.inside


def test_a_bucket_wholly_above_the_profiles_interval_is_slower_than_profiled() -> None:
    scored = score(LEVELS, window(150.0, Band(45.0, 40.0, 50.0)), tolerance=0.1)
    assert (scored.holds, scored.reason) == (False, "SlowerThanProfiled")
    assert scored.message == ("p99 45 ms at 150 requests/s per replica, above the profile's 25 ms (20.25-30.25 ms)")
    assert [(f.figure, f.inside, round(f.error, 2)) for f in scored.figures] == [
        ("p50 latency (ms)", True, 0.0),
        ("p99 latency (ms)", False, 0.8),
    ]


def test_a_bucket_that_reaches_into_the_interval_does_not_decide() -> None:
    """histogram_quantile's estimate (35 ms) is above the interval, but the bucket it lies in is not wholly."""
    scored = score(LEVELS, window(150.0, Band(35.0, 30.0, 40.0)), tolerance=0.1)
    assert scored.reason == "Holds"


def test_a_bucket_wholly_below_is_faster_than_profiled() -> None:
    scored = score(LEVELS, window(150.0, Band(10.0, 8.0, 12.0)), tolerance=0.1)
    assert (scored.holds, scored.reason) == (False, "FasterThanProfiled")
    assert scored.message.startswith("p99 10 ms at 150 requests/s per replica, below the profile's 25 ms")


def test_against_a_load_generators_times_only_slower_is_judged() -> None:
    """A server's own time leaves out the network and the client: below a load generator's interval is no sign of
    a faster server, above it is a slower one whatever else the request spent."""
    below = score(CLIENT_LEVELS, window(150.0, Band(10.0, 8.0, 12.0)), tolerance=0.1)
    assert (below.holds, below.reason) == (True, "Holds")
    assert below.message == (
        "no latency percentile above the profile's interval at 150 requests/s per replica (the server's own times "
        "against the load generator's: only slower is judged)"
    )
    assert [f.inside for f in below.figures] == [True, True]
    above = score(CLIENT_LEVELS, window(150.0, Band(45.0, 40.0, 50.0)), tolerance=0.1)
    assert (above.holds, above.reason) == (False, "SlowerThanProfiled")


def test_load_outside_the_profiled_levels_is_said_not_extrapolated() -> None:
    scored = score(LEVELS, window(300.0, Band(80.0, 70.0, 90.0)))
    assert (scored.holds, scored.reason, scored.figures) == (None, "LoadOutsideProfile", [])
    assert scored.message == "300 requests/s per replica, outside the profiled 100-200 requests/s: not extrapolated"


def test_too_few_requests_to_bound_the_percentile_is_not_enough_traffic() -> None:
    assert (requests_to_bound(99), requests_to_bound(90), requests_to_bound(50)) == (368, 36, 6)
    sparse = ProductionWindow(60, 300, 1.0, {99: Band(25.0, 20.0, 30.0)})
    scored = score(LEVELS, sparse)
    assert (scored.holds, scored.reason, scored.message) == (
        None, "NotEnoughTraffic", "300 requests in 60 s; p99 needs 368 to be bounded"
    )  # fmt: skip


def test_requests_unlike_the_profiles_are_a_shifted_workload() -> None:
    shifted = window(150.0, Band(25.0, 20.0, 30.0), mean_input_tokens=800.0, mean_output_tokens=210.0)
    scored = score(LEVELS, shifted, workload=(500.0, 200.0))
    assert (scored.holds, scored.reason) == (False, "WorkloadShifted")
    assert scored.message == "the requests changed: mean prompt tokens 800 against the profile's 500"
    within = window(150.0, Band(25.0, 20.0, 30.0), mean_input_tokens=560.0, mean_output_tokens=210.0)
    assert score(LEVELS, within, workload=(500.0, 200.0)).reason == "Holds"


def test_resources_are_scored_beside_and_do_not_decide() -> None:
    scored = score(LEVELS, window(150.0, Band(25.0, 20.0, 30.0), cpu_cores=0.6, memory_bytes=104e6), tolerance=0.1)
    cpu, memory = scored.figures[2:]
    assert (cpu.figure, cpu.inside, round(cpu.error, 2)) == ("CPU per replica (cores)", False, 1.0)
    assert (memory.figure, memory.inside) == ("memory per replica (bytes)", True)
    assert scored.reason == "Holds"


def test_levels_are_read_per_replica_from_the_configurations_trials() -> None:
    low, high, other = succeeded(0, "1", 20.0), succeeded(1, "1", 30.0), succeeded(2, "2", 10.0)
    low.parameters, high.parameters = {"cpu": "1", "concurrency": "4"}, {"cpu": "1", "concurrency": "8"}
    high.replicas = 2
    levels = profiled_levels(report_with([high, low, other], level_name="concurrency"), {"cpu": "1"})
    # Throughputs 100 and 101 requests a second (the sample's), the second over two replicas.
    assert [lv.rate_rps for lv in levels] == [50.5, 100.0]
    assert levels[0].latency_ms[99] == Band(30.0, 27.0, 33.0) and levels[0].cpu_cores == 0.1
    assert levels[1].cpu_cores == 0.2 and levels[1].memory_bytes is None


def test_production_is_held_to_the_slos_percentiles_of_the_chosen_configuration() -> None:
    low, high = succeeded(0, "1", 20.0), succeeded(1, "2", 30.0)
    report = report_with([low, high], level_name="concurrency", best_trial=1)
    assert deployed_configuration(report) == {"cpu": "2"}
    assert deployed_configuration(report_with([low, high])) is None  # nothing chosen
    assert compared_percentiles(report) == (50.0, 90.0, 99.0)  # no SLO
    slo = SloSpec.model_validate(
        {"latency": [{"percentile": 99.9, "max": "1s"}, {"percentile": 95, "max": "200ms"},
                     {"percentile": 50, "max": "1s", "metric": "ttft"}]}
    )  # fmt: skip
    assert compared_percentiles(report_with([low, high], slo=slo)) == (95.0, 99.9)


def test_a_prediction_is_checked_again_once_its_interval_has_passed() -> None:
    from datetime import UTC, datetime, timedelta

    from kaliper.api.modeldeployment import PredictionCheck
    from kaliper.controllers.prediction import due

    check = PredictionCheck.model_validate({"profile": {"run": "iris-sweep"}, "interval": "5m"})
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    last = {"checkedAt": "2026-12-06T11:56:00Z"}
    assert (due(check, None, at), due(check, {}, at)) == (True, True)
    assert due(check, last, at) is False  # four minutes ago
    assert due(check, last, at + timedelta(minutes=1)) is True
    with pytest.raises(ValueError, match=r"prediction\.interval must be at least 10s"):
        PredictionCheck.model_validate({"profile": {"run": "iris-sweep"}, "interval": "5s"})


def test_a_re_profile_waits_for_the_prediction_to_have_failed_long_enough_and_for_the_last_one() -> None:
    from datetime import UTC, datetime

    from kaliper.api.modeldeployment import PredictionCheck
    from kaliper.controllers.prediction import reprofile_due

    check = PredictionCheck.model_validate(
        {"profile": {"run": "iris-sweep"}, "reprofile": {"after": "30m", "minInterval": "6h"}}
    )
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    failing = {"status": "False", "lastTransitionTime": "2026-12-06T11:20:00Z"}  # 40 minutes
    assert reprofile_due(check, failing, None, at) is True
    assert reprofile_due(check, {**failing, "lastTransitionTime": "2026-12-06T11:40:00Z"}, None, at) is False
    assert reprofile_due(check, {**failing, "status": "Unknown"}, None, at) is False  # not judged is not failing
    assert reprofile_due(check, failing, {"reprofiledAt": "2026-12-06T07:00:00Z"}, at) is False  # 5 hours ago
    assert reprofile_due(check, failing, {"reprofiledAt": "2026-12-06T05:00:00Z"}, at) is True
    without = PredictionCheck.model_validate({"profile": {"run": "iris-sweep"}})
    assert reprofile_due(without, failing, None, at) is False
    with pytest.raises(ValueError, match=r"prediction\.reprofile copies a ProfileRun"):
        PredictionCheck.model_validate(
            {"profile": {"configMap": {"name": "p", "key": "report.json"}}, "reprofile": {"after": "1h"}}
        )
