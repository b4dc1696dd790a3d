"""`kaliper run` of the built-in server under two CPU limits, end to end: what the quota let the server use,
the throughput it bought, and the report, status and page written from it. Quiet (tests/support/tiers.py):
beside other work the quarter core and the whole core come out closer than their quotas."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from kaliper.api.profilerun import ProfileRunStatus
from tests.support.local_run import deployment, kaliper_run, profile_run
from tests.support.paths import KALIPER


def test_cpu_limits_are_enforced_and_reported(tmp_path: Path, model: Path) -> None:
    process, report = kaliper_run(
        tmp_path,
        deployment(model, resources={"limits": {"memory": "512Mi"}}),
        profile_run(
            sweep={"cpu": ["250m", "1"]},
            slo={"latency": [{"percentile": 99, "max": "1s"}]},
            cost={"perCoreHour": 0.04, "perGibHour": 0.005},
        ),
    )
    assert process.returncode == 0, process.stderr
    assert report is not None and [t.status for t in report.trials] == ["Succeeded", "Succeeded"]
    small, large = report.trials
    assert small.parameters == {"cpu": "250m", "concurrency": "4"}
    # The kernel's quota: the server used at most a quarter core, and was throttled to stay there.
    assert 0 < small.resources.cpu_avg_cores <= 0.25 * 1.15
    assert small.resources.cpu_throttled_ratio > 0.5
    assert large.resources.cpu_avg_cores > small.resources.cpu_avg_cores
    assert large.stage.throughput_rps > 1.5 * small.stage.throughput_rps  # more CPU, more throughput
    for trial in report.trials:
        assert 20 * 2**20 < trial.resources.memory_peak_bytes < 512 * 2**20
        assert trial.resources.series and trial.slo_verdict == "Met"
        assert trial.resources.network_receive_bytes == trial.stage.bytes_sent > 0
        assert trial.resources.network_transmit_bytes == trial.stage.bytes_received > 0
        assert trial.cost_per_million_requests > 0 and trial.core_hours_per_million_requests > 0
    assert report.verdict == "Met" and report.best_trial is not None
    assert report.recommendation is not None and report.recommendation.cpu_request
    # The status the operator would write, from the same report: validated by the model the CRD comes from.
    status = ProfileRunStatus.model_validate(yaml.safe_load((tmp_path / "reports" / "status.yaml").read_text()))
    assert status.phase == "Succeeded" and status.verdict == "Met" and status.progress.summary == "2/2"
    best = report.trials[report.best_trial]
    assert status.best.trial == best.index and status.best.p99_ms == best.stage.latency.at(99).value_ms
    assert status.trials[0].resources.cpu_throttled_ratio == small.resources.cpu_throttled_ratio
    assert status.recommendation.requests.cpu == report.recommendation.cpu_request
    html = (tmp_path / "reports" / "report.html").read_text()
    assert "Pareto frontier" in html and "<script" in html  # plots with plotly.js inline: opens offline
    assert "recommendation:" in process.stdout and "report.html" in process.stdout

    rerendered = subprocess.run(
        [str(KALIPER), "report", str(tmp_path / "reports" / "report.json"), "--html", str(tmp_path / "again.html")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rerendered.returncode == 0 and "verdict: Met" in rerendered.stdout
    assert (tmp_path / "again.html").exists()
