"""The search run end to end by `kaliper run`'s loop with scripted measurements (tests/support/scripted_trials.py):
no server, no cluster, seconds. The operator decides the same from the same measurements
(tests/cluster/test_contract.py)."""

from __future__ import annotations

from pathlib import Path

from kaliper.api.resources import ModelDeployment, ProfileRun
from kaliper.local.executor import RunOptions
from kaliper.profiling.outcome import failed_gate
from kaliper.report.schema import ProfileReport
from tests.support.contract_runs import (
    FAILED_REPEAT,
    GRID,
    KNEE,
    KNEE_TIE,
    NEVER_READY,
    QUALITY_FLOOR,
    REGRESSED,
    TIE,
    baseline_report,
    run_locally,
    with_baseline,
)
from tests.support.many_runs import TARGET
from tests.support.scripted_trials import ScriptedLocalExecutor


def run(tmp_path: Path, **spec: object) -> ProfileReport:
    manifest = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "scripted"},
        "spec": {
            "target": {"deploymentRef": {"name": "iris"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            "slo": {"latency": [{"percentile": 99, "max": "50ms"}]},
            "cost": {"perCoreHour": 0.04},
            **spec,
        },
    }
    options = RunOptions(base_dir=tmp_path, output_dir=tmp_path / "work", limits=False)
    return ScriptedLocalExecutor(options).run(
        ProfileRun.model_validate(manifest), {"iris": ModelDeployment.model_validate(TARGET)}
    )


def test_the_knee_search_probes_between_the_listed_levels_toward_the_capacity(tmp_path: Path) -> None:
    """One core, p99 10 ms per user against 50 ms: met up to 4 users (40 ms), Inconclusive at 5 (its interval
    47.5-52.5 ms straddles the bound), not met beyond. Listed 2 and 16 users, the knee search's two probes bisect:
    9 (90 ms, not met), then 5 (Inconclusive). The bracket: met at 2, not met at 9, 5 undecided between."""
    report = run(tmp_path, sweep={"cpu": ["1"], "concurrency": [2, 16]}, search={"strategy": "knee"})
    levels = [(t.parameters["concurrency"], t.slo_verdict) for t in report.trials]
    assert levels == [("2", "Met"), ("16", "NotMet"), ("9", "NotMet"), ("5", "Inconclusive")]
    (capacity,) = report.capacities
    assert (capacity.met, capacity.not_met, capacity.inconclusive, capacity.probes) == (2.0, 9.0, [5.0], 2)
    assert (report.verdict, report.best_trial) == ("Met", 0)


# The contract's runs (tests/support/contract_runs.py) through `kaliper run`'s loop: what each decides from its
# scripted measurements. tests/cluster/test_contract.py runs them through the operator and finds the same.


def trials_of(report: ProfileReport) -> list[tuple[int, str, str, str | None]]:
    return [
        (t.index, t.parameters["cpu"], t.parameters["concurrency"], t.slo_verdict or t.status) for t in report.trials
    ]


def test_the_grid_chooses_the_cheaper_configuration_that_met(tmp_path: Path) -> None:
    """Half a core meets p99 <= 50 ms at 2 users (40 ms), one core at 2 and 4 (20, 40 ms); half a core costs 0.02
    an hour for 106.1 requests a second, one core 0.04 for 150: one core costs 41.5% more per request."""
    report = run_locally(GRID, tmp_path)
    assert (report.verdict, report.best_trial) == ("Met", 0)
    assert [(r.chosen, r.cost_change) for r in report.configurations] == [(True, None), (False, 0.4147)]


def test_the_knee_search_bisects_to_the_capacity(tmp_path: Path) -> None:
    """One core: p99 10 ms per user against 45 ms, so met up to 4 users and not at 5 (50 ms, its interval
    47.5-52.5 ms). Listed 2 (met) and 16 (not), the probes bisect: 9 and 5 (not met), 3 and 4 (met); 3 replicas
    for 400 requests a second at 150 each."""
    report = run_locally(KNEE, tmp_path)
    assert trials_of(report) == [(0, "1", "2", "Met"), (1, "1", "16", "NotMet"), (2, "1", "9", "NotMet"),
                                 (3, "1", "5", "NotMet"), (4, "1", "3", "Met"), (5, "1", "4", "Met")]  # fmt: skip
    (capacity,) = report.capacities
    assert (capacity.met, capacity.not_met, capacity.inconclusive, capacity.trial, capacity.probes) == (4, 5, [], 5, 4)
    assert capacity.interval_text() == "met at 4, not met at 5" and capacity.replicas == 3
    assert report.recommendation is not None and report.recommendation.replicas == 3
    assert "the capacity search added 4 probes between the listed load levels" in report.recommendation.rationale


def test_a_tie_inside_the_noise_is_measured_again_in_alternating_order(tmp_path: Path) -> None:
    """1 and 1.01 cores, 0.5% apart inside the noise of their repetitions: one round measures the chosen 1.01
    first, then 1; still a tie, the headroom decides (19.8 ms against 20 ms), and the rows name the same rule."""
    report = run_locally(TIE, tmp_path)
    assert trials_of(report) == [(0, "1", "2", "Met"), (1, "1010m", "2", "Met"), (2, "1010m", "2", "Met"),
                                 (3, "1", "2", "Met")]  # fmt: skip
    assert report.best_trial == 1 and report.choice is not None
    assert report.choice.explanation.startswith("t0 costs 0.5% less per request, inside the 4.4% noise: a tie, "
                                                "decided by latency headroom")  # fmt: skip
    assert report.choice.explanation.endswith("(t1 measured 2 times, t0 2); the tie-break measured 2 more trials "
                                              "(62 s of load)")  # fmt: skip
    assert [(r.chosen, r.decided_by) for r in report.configurations] == [(False, "headroom"), (True, None)]


def test_a_configuration_whose_repeat_failed_is_left_out(tmp_path: Path) -> None:
    """The tie of the test above, and the round's first trial (1.01 cores again) fails: 1.01 cores no longer
    qualifies, and one core is chosen."""
    report = run_locally(FAILED_REPEAT, tmp_path)
    assert trials_of(report) == [(0, "1", "2", "Met"), (1, "1010m", "2", "Met"), (2, "1010m", "2", "Failed"),
                                 (3, "1", "2", "Met")]  # fmt: skip
    assert report.best_trial == 0 and report.choice is not None
    assert "left out, measured again without qualifying: t1's configuration (t2 of it failed or missed the SLO)" in (
        report.choice.explanation
    )
    assert [r.reason for r in report.configurations] == [
        "the choice",
        "measured again without qualifying (t2 failed or missed the SLO)",
    ]


def test_a_tie_is_measured_again_after_a_search_that_skipped_levels(tmp_path: Path) -> None:
    """Two variants alike under the knee search: each one's lowest level is skipped once 4 users met the SLO, the
    probes find 4 the highest met (7 and 10 not), and the tie between the two at 4 users is measured again."""
    report = run_locally(KNEE_TIE, tmp_path)
    ran = [(t.index, t.parameters["model_variant"], t.parameters["concurrency"], t.status) for t in report.trials]
    assert ran == [(0, "a", "2", "Skipped"), (1, "a", "4", "Succeeded"), (2, "a", "16", "Succeeded"),
                   (3, "b", "2", "Skipped"), (4, "b", "4", "Succeeded"), (5, "b", "16", "Succeeded"),
                   (6, "a", "10", "Succeeded"), (7, "a", "7", "Succeeded"), (8, "b", "10", "Succeeded"),
                   (9, "b", "7", "Succeeded"), (10, "a", "4", "Succeeded"), (11, "b", "4", "Succeeded")]  # fmt: skip
    assert report.choice is not None and report.choice.explanation == (
        "t4 costs 0.0% more per request, inside the 4.4% noise: a tie, decided as the first measured (t1 measured "
        "2 times, t4 2); the tie-break measured 2 more trials (62 s of load)"
    )


def test_a_configuration_that_never_became_ready_fails_its_other_levels_without_deploying_them(
    tmp_path: Path,
) -> None:
    report = run_locally(NEVER_READY, tmp_path)
    assert trials_of(report) == [(0, "500m", "2", "Met"), (1, "500m", "4", "NotMet"), (2, "2000", "2", "Failed"),
                                 (3, "2000", "4", "Failed")]  # fmt: skip
    assert [t.message for t in report.trials[2:]] == ["scripted: no node has 2000 CPUs"] * 2
    assert [r.reason for r in report.configurations] == ["the choice", "failed: scripted: no node has 2000 CPUs"]


def test_a_run_slower_than_its_baseline_fails_the_regression_gate(tmp_path: Path) -> None:
    """The grid against a baseline whose latencies were half: every latency figure worse beyond the noise."""
    baseline = baseline_report(tmp_path)
    report = run_locally(REGRESSED, tmp_path, baseline)
    assert report.baseline is not None and report.baseline.regressions[0] == (
        "cpu=500m concurrency=2: latency p50 10.00 ms -> 20.00 ms (+100.0%): worse (95%: 9.5-10.5 vs 19-21)"
    )
    spec = ProfileRun.model_validate(with_baseline(REGRESSED, {"report": str(baseline)})).spec
    gate = failed_gate(spec, report.verdict, report.baseline)
    assert gate is not None and gate.reason == "Regressed"


def test_a_cheaper_configuration_shown_below_the_quality_floor_is_held_back(tmp_path: Path) -> None:
    """The grid's choice, half a core, predicts 20 of 40 rows right (95% CI 35.2%-64.8%), wholly below the 0.9
    floor: held back, and the whole core, 40 of 40, is chosen. Each configuration asked the rows once: on its
    first trial to start (2 users), not at 4 or 8."""
    report = run_locally(QUALITY_FLOOR, tmp_path)
    assert [(t.index, t.quality is not None) for t in report.trials] == [
        (0, True),
        (1, False),
        (2, False),
        (3, True),
        (4, False),
        (5, False),
    ]
    half, whole = report.configurations
    assert half.quality is not None and whole.quality is not None
    assert (half.chosen, half.reason) == (
        False,
        "held back by quality: 20 of 40 rows (50.0%, 95% CI 35.2%-64.8%) against the floor 90.0%",
    )
    assert (whole.chosen, whole.quality.correct, whole.quality.verdict) == (True, 40, "Held")
    assert (report.verdict, report.best_trial) == ("Met", 3)
    assert report.choice is not None and report.choice.explanation.endswith(
        "held back by quality: cpu=500m (20 of 40 rows (50.0%, 95% CI 35.2%-64.8%) against the floor 90.0%)"
    )
