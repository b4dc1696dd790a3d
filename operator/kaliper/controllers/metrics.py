"""The operator's own Prometheus metrics, served on KALIPER_METRICS_PORT (the chart's metrics.port)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram, start_http_server

STEPS = Counter("kaliper_profilerun_steps_total", "ProfileRun reconcile steps taken.")
STEP_ERRORS = Counter("kaliper_profilerun_step_errors_total", "ProfileRun steps that raised (retried by the timer).")
STEP_SECONDS = Histogram(
    "kaliper_profilerun_step_seconds",
    "Time one ProfileRun step takes, API calls and Prometheus queries included.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
TRIALS = Counter("kaliper_trials_total", "Trials finished, by outcome.", ["outcome"])
RUNS = Counter("kaliper_profileruns_finished_total", "ProfileRuns finished, by phase.", ["phase"])


def serve(port: int) -> None:
    start_http_server(port)
