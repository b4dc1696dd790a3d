"""Report objects for tests that need a measured stage without running a load test."""

from __future__ import annotations

from datetime import UTC, datetime

from kaliper.measure.histogram import LatencyHistogram
from kaliper.report.schema import LatencyFigures, PercentileFigure, StageResult, TrialReport, WindowResult


def make_stage(
    latency: LatencyFigures | None = None,
    throughput_rps: float = 1.0,
    *,
    error_rate: float = 0.0,
    level: float = 4,
    requests: int = 1000,
    measured_s: float = 10,
    stop_reason: str = "test",
) -> StageResult:
    """A closed-loop stage with the given figures (service time equal to latency)."""
    latency = latency or LatencyFigures()
    return StageResult(
        index=0,
        load_model="closed",
        level=level,
        started_at=datetime.now(UTC),
        warmup_s=1,
        measured_s=measured_s,
        requests=requests,
        errors=int(requests * error_rate),
        error_rate=error_rate,
        throughput_rps=throughput_rps,
        latency=latency,
        service_time=latency,
        stop_reason=stop_reason,
    )


def stage(
    p99_ms: float,
    throughput: float,
    error_rate: float = 0.0,
    interval: tuple[float | None, float | None] | None = None,
    window_rates: list[float] | None = None,
) -> StageResult:
    """A stage whose p99 is listed with its confidence interval (default: +-5%)."""
    histogram = LatencyHistogram()
    for _ in range(100):
        histogram.record(p99_ms / 1000)
    low, high = interval or (p99_ms * 0.95, p99_ms * 1.05)
    figures = LatencyFigures(
        count=100,
        percentiles=[PercentileFigure(percentile=99, value_ms=p99_ms, ci_low_ms=low, ci_high_ms=high, count=100)],
        histogram=histogram.encode(),
    )
    result = make_stage(figures, throughput, error_rate=error_rate)
    result.windows = [
        WindowResult(index=i, start_s=i, warmup=False, requests=int(rate), errors=0, throughput_rps=rate)
        for i, rate in enumerate(window_rates or [throughput] * 5)
    ]
    return result


def trial(index: int, p99: float, rps: float, cost: float, verdict: str | None, **extra: object) -> TrialReport:
    """A trial of its own configuration (`parameters` given: the same configuration measured again)."""
    window_rates = extra.pop("window_rates", None)
    parameters = extra.pop("parameters", {"cpu": "1", "slots": str(index + 1)})
    return TrialReport(
        index=index,
        name=f"t{index}",
        parameters=parameters,  # type: ignore[arg-type]
        status="Succeeded",
        stage=stage(p99, rps, window_rates=window_rates),  # type: ignore[arg-type]
        slo_verdict=verdict,
        cost_per_million_requests=cost,
        **extra,
    )
