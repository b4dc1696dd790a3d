"""The tie-break under `kaliper run`: two configurations that tie on noise (tests/support/tie_break.py) are
each measured once more, and the choice says so."""

from __future__ import annotations

from pathlib import Path

from tests.support import groundtruth
from tests.support.local_run import deployment, profile_run, run_manifests
from tests.support.tie_break import STALLING_SERVER_FLAGS, TIE_BREAK_RUN


def test_two_configurations_tied_on_noise_are_measured_again(tmp_path: Path, model: Path) -> None:
    serve = f"exec {groundtruth.binary()} -addr 127.0.0.1:$KALIPER_PORT {' '.join(STALLING_SERVER_FLAGS)}"
    runtime = {"type": "custom", "command": ["sh", "-c", serve], "port": 8080, "protocol": "oip-v2"}
    report, _ = run_manifests(
        tmp_path,
        [
            deployment(model, runtime=runtime, resources={"limits": {"cpu": "500m", "memory": "256Mi"}}),
            profile_run(**TIE_BREAK_RUN, cost={"perCoreHour": 0.04, "perGibHour": 0.0}),
        ],
    )
    configurations = [(t.index, t.parameters["cpu"], t.slo_verdict) for t in report.trials]
    assert configurations[:2] == [(0, "500m", "Met"), (1, "600m", "Met")]
    # One round: each configuration once more, as trials 2 and 3 (which goes first depends on which one the tie
    # chose: tests/profiling/test_tie_break.py checks the order).
    assert [index for index, _, _ in configurations[2:]] == [2, 3]
    assert sorted((cpu, verdict) for _, cpu, verdict in configurations[2:]) == [("500m", "Met"), ("600m", "Met")]
    assert report.choice is not None and "measured 2 times" in report.choice.explanation
    spent = sum(t.stage.warmup_s + t.stage.measured_s for t in report.trials[2:] if t.stage)
    assert report.choice.explanation.endswith(f"; the tie-break measured 2 more trials ({spent:.0f} s of load)")
