"""The load-test results document (versioned), written by the load generator and embedded in reports."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from kaliper.api.base import KaliperModel

LOADTEST_SCHEMA = "kaliper.dev/loadtest/v1"


class PercentileFigure(KaliperModel):
    """One percentile, with the number of samples behind it and its confidence interval."""

    percentile: float
    value_ms: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    """Absent when there are too few samples to bound this percentile from above."""
    count: int = 0
    confidence: float = 0.95


class LatencyFigures(KaliperModel):
    """A latency distribution: summary figures and the encoded HDR histogram they came from."""

    count: int = 0
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    percentiles: list[PercentileFigure] = Field(default_factory=list)
    histogram: str | None = None
    """HdrHistogram (3 significant digits, microseconds), compressed and base64-encoded: merge it exactly."""

    def at(self, percentile: float) -> PercentileFigure | None:
        return next((p for p in self.percentiles if p.percentile == percentile), None)


class WindowResult(KaliperModel):
    """One measurement window: the time series behind the stopping rule."""

    index: int
    start_s: float
    """Seconds from the start of the stage."""
    warmup: bool
    requests: int
    errors: int
    throughput_rps: float
    p50_ms: float | None = None
    p99_ms: float | None = None


class LateSends(KaliperModel):
    """Open loop only: sends that left more than 1 ms after their intended time."""

    count: int = 0
    share: float = 0.0
    no_free_connection: int = 0
    """Late because every connection was busy (raise maxConnections)."""
    generator_lag: int = 0
    """Late although a connection was free: the generator could not keep up (add processes or workers)."""
    flagged: bool = False
    """More than 1% of sends were late: the corrected latency is a lower bound."""
    reason: str | None = None


class StageResult(KaliperModel):
    """One load level of a run."""

    index: int
    load_model: Literal["closed", "open"]
    level: float
    """Concurrent users (closed loop) or requests per second (open loop)."""
    started_at: datetime
    """When the stage began (warm-up included); measurement starts warmupS later."""
    warmup_s: float
    measured_s: float
    requests: int
    errors: int
    error_rate: float
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    """Failures by HTTP status (such as "HTTP 503") or exception (such as "timeout", "ConnectionRefusedError")."""
    throughput_rps: float
    """Successful requests per second over the measured windows."""
    latency: LatencyFigures
    """What users see: from the intended send time under open loop (corrected for coordinated omission),
    from the actual send under closed loop."""
    service_time: LatencyFigures
    """From the actual send to the last byte of the response."""
    late_sends: LateSends | None = None
    windows: list[WindowResult] = Field(default_factory=list)
    stop_reason: str


class GeneratorInfo(KaliperModel):
    processes: int
    workers: int
    connections: int | None = None
    locust_version: str


class LoadTestResult(KaliperModel):
    """The results document of one load test (one or more stages)."""

    schema_version: Literal["kaliper.dev/loadtest/v1"] = LOADTEST_SCHEMA
    target: str
    started_at: datetime
    finished_at: datetime
    generator: GeneratorInfo
    stages: list[StageResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    error: Annotated[str, Field(max_length=4096)] | None = None
    """Why the run could not complete (an unreachable target, say); stages measured before it are kept."""

    @property
    def ok(self) -> bool:
        return self.error is None
