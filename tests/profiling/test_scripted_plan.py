"""The search run end to end by `kaliper run`'s loop with scripted measurements (tests/support/scripted_trials.py):
no server, no cluster, seconds. The operator decides the same from the same measurements
(tests/cluster/test_contract.py)."""

from __future__ import annotations

from pathlib import Path

from kaliper.api.resources import ModelDeployment, ProfileRun
from kaliper.local.executor import RunOptions
from kaliper.report.schema import ProfileReport
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
