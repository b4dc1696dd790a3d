"""Report objects for tests that need a measured stage without running a load test."""

from __future__ import annotations

from datetime import UTC, datetime

from kaliper.report.schema import LatencyFigures, StageResult


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
