"""Scripted measurements: what a load generator would hand in for a trial, as a function of its CPU limit and
load level alone, so every path that asks gets the same figures (tests/cluster/test_contract.py runs one
ProfileRun through `kaliper run` and through the operator with them).

A server of `cores` CPUs at `users` concurrent users: p99 10 ms x users / cores (its 95% interval +-5%), p50 half
of it, and 150 x sqrt(cores) requests a second (half a core serves 106, one core 150: the smaller is cheaper per
request), over a 30 s stage without errors.

What a run's manifest scripts beyond that, read alike by `kaliper run`'s scripted executor and the cluster's
load-generator player (tests/cluster/test_contract.py): annotations naming the trials that fail under load
(FAILS) and a speed factor for every latency (SPEED, to make a faster baseline). A configuration of more CPU than
any node holds (NEVER_READY_CORES) never becomes ready: on the cluster its pods stay unschedulable."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.resources import ModelDeployment, ProfileRun
from kaliper.api.units import parse_cpu
from kaliper.local.executor import LocalExecutor, RunOptions
from kaliper.profiling.schedule import PlannedTrial
from kaliper.profiling.trials import from_load_test
from kaliper.report.schema import (
    GeneratorInfo,
    LatencyFigures,
    LoadTestResult,
    PercentileFigure,
    ProfileReport,
    QualityAnswers,
    TrialReport,
)
from tests.support.reports import make_stage

MEASURED_S = 30
FAILS = "test.kaliper.dev/scripted-failures"  # trial indexes, comma-separated: their load generator fails
SPEED = "test.kaliper.dev/scripted-latency-factor"  # every latency times this
SPREAD = "test.kaliper.dev/scripted-spread"  # two repetitions, their throughputs this share apart
NEVER_READY_CORES = 2000  # more than the test cluster's nodes hold (1,000 cores each at most)
# The share of the quality dataset's rows each CPU limit predicts right, such as "500m=0.5,1=1": a trial the plan
# asks to score answers its first rows right and the rest wrong (labels 0, 1, 2, ... as the rows' own).
QUALITY = "test.kaliper.dev/scripted-quality"


def scripted_answers(cpu: str, rows: int, annotations: dict[str, str]) -> QualityAnswers:
    shares = dict(pair.split("=") for pair in annotations.get(QUALITY, "").split(",") if pair)
    right = round(float(shares.get(cpu, "1")) * rows)
    expected = [str(row % 3) for row in range(rows)]
    answers = [label if row < right else str((int(label) + 1) % 3) for row, label in enumerate(expected)]
    return QualityAnswers(rows=rows, expected=list(expected), answers=list(answers))


def scripted_result(
    cpu: str, users: float, index: int = 0, annotations: dict[str, str] | None = None, quality_rows: int | None = None
) -> LoadTestResult:
    """`quality_rows`: the trial asks the quality dataset's first rows (the plan named it)."""
    annotations = annotations or {}
    if str(index) in annotations.get(FAILS, "").split(","):
        return LoadTestResult(
            target="scripted",
            started_at=datetime.now(UTC),
            finished_at=datetime.now(UTC),
            generator=GeneratorInfo(processes=1, workers=0, locust_version="scripted"),
            stages=[],
            error="scripted: the target refused every connection",
        )
    cores = float(parse_cpu(cpu))
    p99 = 10.0 * users / cores * float(annotations.get(SPEED, "1"))
    rate = round(150.0 * math.sqrt(cores), 1)
    requests = int(rate * MEASURED_S)

    def at(percentile: float, value: float) -> PercentileFigure:
        return PercentileFigure(
            percentile=percentile, value_ms=value, ci_low_ms=value * 0.95, ci_high_ms=value * 1.05, count=requests
        )

    latency = LatencyFigures(count=requests, mean_ms=p99 / 2, percentiles=[at(50, p99 / 2), at(99, p99)])
    spread = float(annotations.get(SPREAD, "0"))
    rates = [round(rate * (1 - spread / 2), 1), round(rate * (1 + spread / 2), 1)] if spread else [rate]
    stages = []
    for repetition, throughput in enumerate(rates):
        stage = make_stage(latency, throughput_rps=throughput, level=users, requests=requests, measured_s=MEASURED_S)
        stage.index, stage.started_at = repetition, datetime.now(UTC) - timedelta(seconds=MEASURED_S + 1)
        stages.append(stage)
    return LoadTestResult(
        target="scripted",
        started_at=stages[0].started_at,
        finished_at=datetime.now(UTC),
        generator=GeneratorInfo(processes=1, workers=0, locust_version="scripted"),
        stages=stages,
        quality=scripted_answers(cpu, quality_rows, annotations) if quality_rows else None,
    )


class ScriptedLocalExecutor(LocalExecutor):
    """`kaliper run` with its executor scripted: no server started, the trial's results as scripted."""

    def __init__(self, options: RunOptions, annotations: dict[str, str] | None = None) -> None:
        super().__init__(options)
        self.annotations = annotations or {}

    def run(self, run: ProfileRun, deployments: dict[str, ModelDeployment]) -> ProfileReport:
        self.annotations = run.metadata.annotations or {}
        return super().run(run, deployments)

    def run_trial(
        self, spec: ProfileRunSpec, planned: PlannedTrial, model_name: str, scores_quality: bool = False
    ) -> tuple[TrialReport, bool]:
        name, cpu = f"t{planned.index}", planned.parameters.get("cpu", "1")  # a URL target: one core
        if parse_cpu(cpu) >= NEVER_READY_CORES:
            message = f"scripted: no node has {cpu} CPUs"
            return TrialReport(
                index=planned.index, name=name, parameters=planned.parameters, status="Failed", message=message
            ), False
        rows = spec.quality.rows if scores_quality and spec.quality is not None else None
        result = scripted_result(cpu, planned.level, planned.index, self.annotations, rows)
        return from_load_test(planned.index, name, planned.parameters, result, spec.slo), True
