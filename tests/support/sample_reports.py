"""Reports built by hand, for the tests of what the user sees of them (tests/test_report_render.py,
tests/test_optimization_render.py, tests/test_reports_in_browser.py): a ProfileRun of seven trials with a long
failure message, an Inconclusive verdict and a tie; a ModelOptimization with references, a failed candidate and
two profiles."""

from __future__ import annotations

from datetime import UTC, datetime

from kaliper.api.modeloptimization import ChosenModel
from kaliper.api.profilerun import SloSpec
from kaliper.profiling.choice_rows import configuration_rows
from kaliper.profiling.decisions import Choice
from kaliper.report.optimization import (
    CandidateResult,
    LatencyMeasurement,
    MachineInfo,
    ModelProfile,
    OperatorTime,
    OperatorTypeTime,
    OptimizationReport,
    ParetoFrontiers,
)
from kaliper.report.schema import (
    BestChoice,
    GeneratorUsage,
    LatencyFigures,
    PercentileFigure,
    ProfileReport,
    ResourceSeriesPoint,
    SloCheck,
    TieRule,
    TrialReport,
    TrialResources,
)
from tests.support.reports import make_stage

MIB = 2**20
LONG_MESSAGE = (
    "the server did not become ready within 60s: mlserver exited with status 1 after loading model 'truth' "
    "from /models/truth <v2>; last log line: RuntimeError: CUDA out of memory while allocating the KV cache "
    "for 4096 tokens, try a smaller maxBatchSize or a larger GPU & set gpu.count accordingly [errno 12] end"
)


def latency(p50: float, p99: float) -> LatencyFigures:
    return LatencyFigures(
        count=1000,
        percentiles=[
            PercentileFigure(percentile=50, value_ms=p50, ci_low_ms=p50 * 0.98, ci_high_ms=p50 * 1.02, count=1000),
            PercentileFigure(percentile=99, value_ms=p99, ci_low_ms=p99 * 0.9, ci_high_ms=p99 * 1.1, count=1000),
        ],
    )


def succeeded(index: int, cpu: str, p99: float, *, verdict: str = "Met", observed: str | None = None) -> TrialReport:
    stage = make_stage(latency(p99 / 2, p99), throughput_rps=100.0 + index)
    stage.generator_usage = GeneratorUsage(cpu_cores=0.45, capacity_cores=1.0)
    return TrialReport(
        index=index,
        name=f"t{index}",
        parameters={"cpu": cpu, "concurrency": "4"},
        status="Succeeded",
        stage=stage,
        resources=TrialResources(
            source="cgroup",
            cpu_avg_cores=0.2,
            cpu_peak_cores=0.3,
            cpu_throttled_ratio=0.25,
            memory_peak_bytes=100.4 * MIB,
            # Memory wobbles by 0.4 MiB around 100 MiB.
            series=[
                ResourceSeriesPoint(t_s=t, cpu_cores=0.2, memory_bytes=(100 + (0.2 if t % 2 else -0.2)) * MIB)
                for t in range(5)
            ],
        ),
        slo=[
            SloCheck(
                objective="p99 <= 25ms",
                verdict=verdict,  # type: ignore[arg-type]
                observed=observed or f"{p99:.2f}ms (95% CI {p99 * 0.9:.2f}-{p99 * 1.1:.2f}ms)",
            ),
            SloCheck(objective="error rate <= 1.00%", verdict="Met", observed="0.00%"),
        ],
        slo_verdict=verdict,  # type: ignore[arg-type]
        cost_per_million_requests=0.01 * (index + 1),
    )


def failed(index: int, message: str) -> TrialReport:
    return TrialReport(
        index=index, name=f"t{index}", parameters={"cpu": "100m", "concurrency": "4"}, status="Failed", message=message
    )


def report_with(trials: list[TrialReport], **fields: object) -> ProfileReport:
    return ProfileReport(
        name="demo",
        started_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        target="truth",
        strategy="grid",
        trials=trials,
        **fields,  # type: ignore[arg-type]
    )


SLO = SloSpec.model_validate({"latency": [{"percentile": 99, "max": "25ms"}], "maxErrorRate": 0.01})


def chosen(
    report: ProfileReport, best: int, won_by: dict[int, TieRule] | None = None, slo: SloSpec | None = SLO
) -> ProfileReport:
    """The report with `best` chosen (by hand: the tests of views set what the choice decided: the trials it
    tied with, each with the rule that decided), and each configuration's row as the choice writes it for that
    choice (kaliper.profiling.choice_rows)."""
    report.best_trial = best
    won_by = won_by or {}
    report.configurations = configuration_rows(report.trials, slo, Choice(best, report.choice, won_by))  # type: ignore[arg-type]
    return report


def seven_trials() -> ProfileReport:
    cpus = ["250m", "500m", "750m", "1", "1500m", "2", "3"]
    trials = [succeeded(i, cpu, 20.0 + i) for i, cpu in enumerate(cpus)]
    trials[4] = succeeded(4, "1500m", 24.73, verdict="Inconclusive", observed="24.73ms (95% CI 19.36-26.61ms)")
    trials[6] = failed(6, LONG_MESSAGE)
    trials[2].limited_by = ["the load generator used 95% of its CPU: what it measured is its own limit"]
    report = report_with(
        trials,
        verdict="Met",
        choice=BestChoice(certainty="Tie", runner_up=1, explanation="t1 costs within the noise of t0"),
        slo=SLO,
        level_name="concurrency",
    )
    return chosen(report, 0, {1: "headroom"})


FAILED_MESSAGE = (
    "float16 conversion failed: [ONNXRuntimeError] : 1 : FAIL : Type Error: Type (tensor(float16)) of output "
    "arg (y) of node <n0> does not match the expected type & the session was not created; keep float16 for GPUs"
)
SLOW_MESSAGE = "does not meet the goals: 5.0% faster, the goal is at least 20%"


def measured_latency(value: float, low: float | None, high: float | None) -> LatencyMeasurement:
    return LatencyMeasurement(
        runs=200,
        warmup_runs=10,
        value_ms=value,
        ci_low_ms=low,
        ci_high_ms=high,
        mean_ms=value,
        p50_ms=value,
        p90_ms=value + 0.1,
        p95_ms=value + 0.2,
        p99_ms=value + 0.5,
        min_ms=value - 0.3,
        max_ms=value + 1.0,
    )


def candidates() -> list[CandidateResult]:
    return [
        CandidateResult(
            id="c1",
            passes=["graph_optimization"],
            parameters={"level": "all"},
            latency=measured_latency(1.90, 1.85, 1.96),
            latency_ms=1.90,
            latency_improvement_percent=5.0,
            accuracy=0.96,
            accuracy_metric="accuracy",
            accuracy_degradation=0.0,
            model_size_bytes=9800,
            meets_goals=False,
            message=SLOW_MESSAGE,
            seconds=3.5,
        ),
        CandidateResult(
            id="c2",
            passes=["graph_optimization", "quantization"],
            parameters={"level": "all", "mode": "dynamic", "weight_type": "int8"},
            latency=measured_latency(1.20, 1.18, 1.23),
            latency_ms=1.20,
            latency_improvement_percent=40.0,
            accuracy=0.953,
            accuracy_metric="accuracy",
            accuracy_ci_low=0.9068,
            accuracy_ci_high=0.9772,
            accuracy_degradation=0.007,
            model_size_bytes=4000,
            meets_goals=True,
            artifact="/tmp/models/c2.onnx",
            seconds=7.3,
        ),
        CandidateResult(
            id="c3", passes=["float16"], parameters={"keep_io_types": "true"}, status="Failed", message=FAILED_MESSAGE
        ),
    ]


def profile(model: str, types: list[tuple[str, int, float, float, int | None]]) -> ModelProfile:
    return ModelProfile(
        model=model,
        runs=100,
        parameters=2500,
        flops=1_200_000,
        nodes_without_estimate=["Shape", "Shape", "Gather"],
        kernel_time_us=1400.0,
        operator_types=[
            OperatorTypeTime(op_type=op, nodes=n, time_us=t, time_percent=p, flops=f) for op, n, t, p, f in types
        ],
        operators=[
            OperatorTime(node="conv1", op_type="Conv", time_us=500.0, time_percent=35.7, flops=800_000),
            OperatorTime(node="fc", op_type="Gemm", time_us=500.0, time_percent=35.7, flops=200_000),
            OperatorTime(node="conv2", op_type="Conv", time_us=300.0, time_percent=21.4, flops=200_000),
            OperatorTime(node="shape0", op_type="Shape"),
        ],
    )


def demo_report() -> OptimizationReport:
    return OptimizationReport(
        name="demo",
        started_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        phase="Succeeded",
        reason="Succeeded",
        message="chose c2, 40.0% faster than the original",
        target={"device": "cpu", "cpus": "4"},
        machine=MachineInfo(
            cpu="AMD EPYC",
            architecture="x86_64",
            instruction_sets=["AVX2", "FMA3", "AVX512F"],
            onnxruntime="1.32.0",
            nchwc_block_size=16,
        ),
        planned=3,
        references=[
            CandidateResult(
                id="unoptimized",
                latency=measured_latency(2.50, 2.40, 2.62),
                latency_improvement_percent=-25.0,
                accuracy=0.96,
                model_size_bytes=10000,
            ),
            CandidateResult(
                id="ortDefaults", latency=measured_latency(2.00, 1.95, 2.05), accuracy=0.96, model_size_bytes=10000
            ),
        ],
        original=CandidateResult(
            id="original",
            latency=measured_latency(2.00, 1.95, 2.05),
            latency_improvement_percent=0.0,
            accuracy=0.96,
            accuracy_metric="accuracy",
            accuracy_degradation=0.0,
            model_size_bytes=10000,
        ),
        candidates=candidates(),
        frontiers=ParetoFrontiers(latency_accuracy=["c2", "c1"], latency_size=["c2"]),
        chosen=ChosenModel(
            candidate_id="c2",
            artifact="/tmp/models/c2.onnx",
            latency_improvement_percent=40.0,
            accuracy_degradation=0.007,
        ),
        chosen_settings={"intra_op_num_threads": "4", "execution_mode": "sequential"},
        profiles=[
            profile(
                "original",
                [
                    ("Conv", 2, 800.0, 57.1, 1_000_000),
                    ("Gemm", 1, 500.0, 35.7, 200_000),
                    ("Relu", 2, 100.0, 7.1, None),
                ],
            ).model_copy(update={"layout": "NCHWc", "nchwc_block_size": 16}),
            profile(
                "c2",
                [
                    ("ConvInteger", 2, 400.0, 57.1, 1_000_000),
                    ("MatMulInteger", 1, 200.0, 28.6, 200_000),
                    ("Relu", 2, 90.0, 12.9, None),
                ],
            ),
        ],
        artifacts="/tmp/models",
        warnings=["float16 pays off on GPUs; the target is cpu"],
    )


def failed_report(reason: str, message: str, **fields: object) -> OptimizationReport:
    return OptimizationReport(
        name="demo",
        started_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        phase="Failed",
        reason=reason,
        message=message,
        **fields,  # type: ignore[arg-type]
    )
