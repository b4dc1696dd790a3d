"""Progress of a load test, one plain line per update on stderr (stdout may carry the results document).

The controller reports when a stage starts, once per completed measurement window (elapsed time, requests,
throughput, the stopping percentile so far and what the stopping rule is waiting for) and when the stage
stops. Nothing per request. The lines are plain text, without colour or cursor movement, so they read the
same in a terminal, a CI log and a Kubernetes Job's log. The line builders are pure functions.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from kaliper.loadgen.recorder import Window
from kaliper.measure.figures import figure
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.statistics import estimate

_enabled = True


def set_enabled(enabled: bool) -> None:
    """Turn the progress lines of this process on or off (`python -m kaliper.loadgen --quiet`)."""
    global _enabled
    _enabled = enabled


LOADS = {"closed": "{:g} users, closed loop", "open": "{:g} req/s, open loop", "trace": "the trace at {:g}x speed"}


def stage_started_line(
    stage: int,
    level: float,
    load_model: str,
    warmup_s: float,
    min_duration_s: float,
    max_duration_s: float,
    replay_s: float | None = None,
) -> str:
    """`replay_s`: a trace replayed once, measured to its last send (then its answers are awaited)."""
    load = LOADS[load_model].format(level)
    if replay_s is not None:
        measuring = f"{min(replay_s, max_duration_s):g}s to its last send, then its answers"
    elif min_duration_s >= max_duration_s:
        measuring = f"for {max_duration_s:g}s"
    else:
        measuring = f"for {min_duration_s:g}s to {max_duration_s:g}s"
    return f"stage {stage} starting: {load}; warm-up {warmup_s:g}s, then measuring {measuring}"


def warming_up_line(stage: int, elapsed_s: float) -> str:
    return f"stage {stage}: {elapsed_s:.0f}s, warming up"


def measuring_line(
    stage: int,
    elapsed_s: float,
    measured_s: float,
    requests: int,
    throughput_rps: float,
    percentile: float,
    latency_ms: float | None,
    reason: str,
    metric: str = "latency",
    tokens_per_s: float | None = None,
) -> str:
    """One completed window: `elapsed_s` since the stage began (warm-up included), `measured_s` of it
    measured; requests (errors included) and successful requests per second over the measured windows; the
    watched metric's percentile over the measured windows (and, for token streams, output tokens per
    second); the stopping rule's current reason."""
    latency = "-" if latency_ms is None else f"{latency_ms:.2f}ms"
    row = figure(metric)
    label = f"{row.label} p{percentile:g}" if row.token else f"p{percentile:g}"
    rate = "" if tokens_per_s is None else f", {tokens_per_s:.0f} tok/s"
    return (
        f"stage {stage}: {elapsed_s:.0f}s, measured {measured_s:g}s, {requests} requests, "
        f"{throughput_rps:.1f} ok/s{rate}, {label} {latency}; {reason}"
    )


def stage_done_line(stage: int, reason: str) -> str:
    return f"stage {stage} done: {reason}"


def stopped_line(error: str) -> str:
    return f"stopped: {error}"


def _one_line(text: str) -> str:
    # One update, one line: a reason or an error with newlines (a traceback, a server's answer) is flattened,
    # and control characters (colour codes among them) are dropped.
    flat = " ".join(text.split())
    return "".join(c for c in flat if c.isprintable())


class StageProgress:
    """Writes progress lines to a stream (stderr, looked up at each write, by default)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def emit(self, line: str) -> None:
        if not _enabled:
            return
        stream = self._stream or sys.stderr
        try:
            stream.write(_one_line(line) + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not end the load test
            pass

    def started(self, stage: int, level: float, load_model: str, warmup_s: float, *durations: float | None) -> None:
        """`durations`: minDuration, maxDuration and a replayed trace's length, as stage_started_line takes them."""
        self.emit(stage_started_line(stage, level, load_model, warmup_s, *durations))  # type: ignore[arg-type]

    def window(
        self,
        stage: int,
        elapsed_s: float,
        measured: Sequence[Window],
        window_s: float,
        cumulative: LatencyHistogram,
        percentile: float,
        reason: str,
        metric: str = "latency",
    ) -> None:
        """After each completed window: `measured` are the stage's windows after its warm-up so far (none
        while warming up), `cumulative` their latency histogram."""
        elapsed_s = max(elapsed_s, 0.0)
        if not measured:
            self.emit(warming_up_line(stage, elapsed_s))
            return
        requests = sum(w.requests for w in measured)
        ok = requests - sum(sum(w.errors.values()) for w in measured)
        measured_s = len(measured) * window_s
        found = estimate(cumulative, percentile).value_s  # the nearest-rank figure the results report
        latency_ms = None if found is None else found * 1000
        tokens = [w.tokens for w in measured if w.tokens is not None]
        tokens_per_s = sum(t.output_tokens for t in tokens) / measured_s if tokens else None
        self.emit(
            measuring_line(
                stage,
                elapsed_s,
                measured_s,
                requests,
                ok / measured_s,
                percentile,
                latency_ms,
                reason,
                metric,
                tokens_per_s,
            )
        )

    def done(self, stage: int, reason: str) -> None:
        self.emit(stage_done_line(stage, reason))

    def stopped(self, error: str) -> None:
        self.emit(stopped_line(error))
