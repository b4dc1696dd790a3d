"""Scripted measurements: what a load generator would hand in for a trial, as a function of its CPU limit and
load level alone, so every path that asks gets the same figures (tests/cluster/test_contract.py runs one
ProfileRun through `kaliper run` and through the operator with them).

A server of `cores` CPUs at `users` concurrent users: p99 10 ms x users / cores (its 95% interval +-5%), p50 half
of it, and 150 x sqrt(cores) requests a second (half a core serves 106, one core 150: the smaller is cheaper per
request), over a 30 s stage without errors."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_cpu
from kaliper.local.executor import LocalExecutor
from kaliper.profiling.schedule import PlannedTrial
from kaliper.profiling.trials import from_load_test
from kaliper.report.schema import GeneratorInfo, LatencyFigures, LoadTestResult, PercentileFigure, TrialReport
from tests.support.reports import make_stage

MEASURED_S = 30


def scripted_result(cpu: str, users: float) -> LoadTestResult:
    cores = float(parse_cpu(cpu))
    p99 = 10.0 * users / cores
    rate = round(150.0 * math.sqrt(cores), 1)
    requests = int(rate * MEASURED_S)

    def at(percentile: float, value: float) -> PercentileFigure:
        return PercentileFigure(
            percentile=percentile, value_ms=value, ci_low_ms=value * 0.95, ci_high_ms=value * 1.05, count=requests
        )

    latency = LatencyFigures(count=requests, mean_ms=p99 / 2, percentiles=[at(50, p99 / 2), at(99, p99)])
    stage = make_stage(latency, throughput_rps=rate, level=users, requests=requests, measured_s=MEASURED_S)
    stage.started_at = datetime.now(UTC) - timedelta(seconds=MEASURED_S + 1)
    return LoadTestResult(
        target="scripted",
        started_at=stage.started_at,
        finished_at=datetime.now(UTC),
        generator=GeneratorInfo(processes=1, workers=0, locust_version="scripted"),
        stages=[stage],
    )


class ScriptedLocalExecutor(LocalExecutor):
    """`kaliper run` with its executor scripted: no server started, the trial's results as scripted."""

    def run_trial(self, spec: ProfileRunSpec, planned: PlannedTrial, model_name: str) -> tuple[TrialReport, bool]:
        result = scripted_result(planned.parameters["cpu"], planned.level)
        return from_load_test(planned.index, f"t{planned.index}", planned.parameters, result, spec.slo), True
