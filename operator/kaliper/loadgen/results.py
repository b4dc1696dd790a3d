"""Turning merged windows into the results document's figures. Pure functions: no Locust, no I/O."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.recorder import LATE_AFTER_S, Window
from kaliper.loadgen.tokens import WINDOW_COUNTS, TokenWindow
from kaliper.measure.figures import TOKEN_FIGURES
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.statistics import REPORTED_PERCENTILES, estimate
from kaliper.report.ramp_text import segment_text
from kaliper.report.replay_text import replay_lines
from kaliper.report.schema import (
    Backoffs,
    GeneratorUsage,
    LatencyFigures,
    LateSends,
    LoadTestResult,
    PercentileFigure,
    RampSegment,
    StageResult,
    TokenFigures,
    WindowResult,
)
from kaliper.report.token_text import token_summary

LATE_SHARE_FLAG = 0.01  # perf_analyzer's warning threshold: more than 1% of sends late
# Below this share of the cores it could use, a generator whose sends left late (with a connection free) was not
# short of CPU: they waited for the machine to wake it (measured here: 1.4-4.6% of sends more than 2 ms late at
# 200/s from two processes using a fifth of their cores, bench/arrivals.py), which more processes do not fix.
GENERATOR_IDLE = 0.5


def late_reason(share: float, no_connection: int, generator_lag: int, usage: GeneratorUsage | None, field: str) -> str:
    """Why sends left late, and what would fix it: the connections (load.FIELD.maxConnections), the
    generator's CPU (more processes), or neither (the machine's wake-up latency: other work beside the run)."""
    late = f"{share:.1%} of sends left more than {LATE_AFTER_S * 1000:g} ms late: "
    if no_connection >= generator_lag:
        return late + f"every connection was busy; raise load.{field}.maxConnections"
    if usage is not None and usage.saturation < GENERATOR_IDLE:
        return late + (
            f"a connection was free and the load generator used {usage.cpu_cores:.2f} of the "
            f"{usage.capacity_cores:g} cores it can use, so they waited for the machine to wake it (other work "
            "beside the run, or the host's timers), not for CPU: more processes will not help"
        )
    return late + "the load generator could not keep up; add load.processes or load.workers"


def latency_figures(histogram: LatencyHistogram) -> LatencyFigures:
    if histogram.count == 0:
        return LatencyFigures()
    percentiles = []
    for p in REPORTED_PERCENTILES:
        e = estimate(histogram, p)
        percentiles.append(
            PercentileFigure(
                percentile=p,
                value_ms=_ms(e.value_s),
                ci_low_ms=_ms(e.ci_low_s),
                ci_high_ms=_ms(e.ci_high_s),
                count=e.count,
                confidence=e.confidence,
            )
        )
    return LatencyFigures(
        count=histogram.count,
        mean_ms=_ms(histogram.mean),
        min_ms=_ms(histogram.min),
        max_ms=_ms(histogram.max),
        percentiles=percentiles,
        histogram=histogram.encode(),
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 4)


# The stream counts a stage reports as the windows counted them: TokenWindow's counts that TokenFigures has too
# (cached prompt tokens only where the server said, set apart).
_COUNTS_REPORTED_AS_COUNTED = tuple(
    name for name in WINDOW_COUNTS if name in TokenFigures.model_fields and name != "cached_input_tokens"
)


def token_figures(
    tokens: TokenWindow,
    measured_s: float,
    requests: int,
    with_objectives: bool,
    every: TokenWindow | None = None,
) -> TokenFigures:
    """Token figures: rates from the measured windows' `tokens` over `measured_s`; distributions, counts and
    goodput's share over `every` request of the stage where given (the drained ones too)."""
    per_s = (lambda n: round(n / measured_s, 3)) if measured_s else (lambda n: 0.0)
    every = every or tokens
    distributions = {}
    for row in TOKEN_FIGURES:
        measured = getattr(every, row.window)
        corrected = getattr(every, row.window_corrected) if row.window_corrected else None
        distributions[row.report] = latency_figures(corrected if corrected is not None else measured)
        if row.report_service:
            distributions[row.report_service] = latency_figures(measured)
    return TokenFigures(
        **distributions,
        **{name: getattr(every, name) for name in _COUNTS_REPORTED_AS_COUNTED},
        output_tokens_per_s=per_s(tokens.output_tokens),
        total_tokens_per_s=per_s(tokens.output_tokens + tokens.input_tokens),
        token_sources=dict(every.token_sources),
        cached_input_tokens=every.cached_input_tokens if every.cached_reported else None,
        reasoning_sources=dict(every.reasoning_sources),
        tokenizer_mean_difference=round(every.tokenizer_difference / every.tokenizer_compared, 4)
        if every.tokenizer_compared
        else None,
        goodput_rps=per_s(tokens.good) if with_objectives else None,
        goodput_share=(round(every.good / requests, 6) if requests else 0.0) if with_objectives else None,
    )


def error_time_share(total: Window, open_loop: bool) -> float:
    """The share of the measured time that failed (StageResult.error_time_share): closed loop, the users' time
    failing over their time in requests and waits; open loop, whose sends keep to the clock, the share of
    requests."""
    if open_loop:
        return round(sum(total.errors.values()) / total.requests, 6) if total.requests else 0.0
    if total.user_s <= 0:
        return 0.0
    return round(min(1.0, max(0.0, total.failing_s / total.user_s)), 6)


def ramp_segments(config: LoadGenConfig, level: float, measured: list[Window]) -> list[RampSegment]:
    """A ramp's measured windows in its equal segments, each window in the segment that holds its middle."""
    ramp = config.load.ramp
    if ramp is None or not measured:
        return []
    window_s, first, count = config.window_s, measured[0].index, ramp.segments
    segment_s = len(measured) * window_s / count
    parts = [
        Window(measured[0].stage, -1, corrected=LatencyHistogram() if config.open_loop else None) for _ in range(count)
    ]
    windows_in = [0] * count
    for window in measured:
        owner = min(int((window.index - first + 0.5) * window_s // segment_s), count - 1)
        parts[owner].merge(window)
        windows_in[owner] += 1
    segments = []
    for i, (part, windows) in enumerate(zip(parts, windows_in, strict=True)):
        # A stepped ramp holds each of its rates; a linear one passes through its mean at the segment's middle.
        position = i / (count - 1) if ramp.shape == "stepped" else (i + 0.5) / count
        asked = level + (ramp.to - level) * position
        segments.append(
            RampSegment(
                index=i,
                start_s=round(i * segment_s, 3),
                duration_s=round(segment_s, 3),
                intended_rps=round(asked, 3) if config.open_loop else None,
                intended_users=round(asked, 3) if not config.open_loop else None,
                **_stretch(part, windows * window_s),
            )
        )
    return segments


def _stretch(window: Window, seconds: float) -> dict[str, Any]:
    """The figures every stretch of a stage reports (kaliper.report.schema.Stretch) from what it measured over
    `seconds`; a stretch of no time (a ramp's segment no window fell in) served nothing."""
    errors = sum(window.errors.values())
    latency = window.latency
    return {
        "requests": window.requests,
        "errors": errors,
        "throughput_rps": round((window.requests - errors) / seconds, 3) if seconds > 0 else 0.0,
        "p50_ms": _ms(latency.value_at_percentile(50)) if latency.count else None,
        "p99_ms": _ms(latency.value_at_percentile(99)) if latency.count else None,
        "late_sends": window.late_no_connection + window.late_generator,
    }


def merged(windows: list[Window], open_loop: bool) -> Window:
    """One window holding everything of `windows`."""
    total = Window(windows[0].stage if windows else 0, -1, corrected=LatencyHistogram() if open_loop else None)
    for window in windows:
        total.merge(window)
    return total


def stage_result(
    config: LoadGenConfig,
    index: int,
    level: float,
    start_wall: float,
    windows: list[Window],
    warmup_windows: int,
    reason: str,
    drain: Window | None = None,
    drain_s: float = 0.0,
) -> StageResult:
    """The stage's results from its windows and, after its graceful stop, the drain window: the requests sent
    before measuring ended and awaited after it, in every count and distribution but not in the rates, and
    what is still in flight at its end."""
    window_s = config.window_s
    measured = windows[warmup_windows:]
    timed = merged(measured, config.open_loop)  # the measured time's own: rates, CPU, the share of time failing
    total = merged([*measured, *([drain] if drain is not None else [])], config.open_loop)
    last = drain if drain is not None else (measured[-1] if measured else None)
    errors = sum(total.errors.values())
    measured_s = len(measured) * window_s
    windows_in = max((w.index + 1 for w in windows), default=0)
    scheduled = config.played_trace().sends_per_window(window_s, windows_in) if config.load.trace else None
    usage = (
        GeneratorUsage(
            cpu_cores=round(timed.cpu_s / measured_s, 4), capacity_cores=round(timed.capacity_s / measured_s, 4)
        )
        if measured_s and timed.capacity_s
        else None
    )
    late = None
    if config.open_loop:
        count = total.late_generator + total.late_no_connection
        share = count / total.requests if total.requests else 0.0
        flagged = share > LATE_SHARE_FLAG
        field = "trace" if config.load.trace else "openLoop"
        reason_text = (
            late_reason(share, total.late_no_connection, total.late_generator, usage, field) if flagged else None
        )
        late = LateSends(
            count=count,
            share=round(share, 6),
            no_free_connection=total.late_no_connection,
            generator_lag=total.late_generator,
            flagged=flagged,
            reason=reason_text,
        )
    return StageResult(
        index=index,
        load_model=config.load_model,
        level=level,
        started_at=datetime.fromtimestamp(start_wall, UTC),
        warmup_s=warmup_windows * window_s,
        measured_s=measured_s,
        requests=total.requests,
        errors=errors,
        error_rate=round(errors / total.requests, 6) if total.requests else 0.0,
        error_time_share=error_time_share(timed, config.open_loop),
        drained=drain.requests if drain is not None else 0,
        drain_s=round(drain_s, 3),
        in_flight_at_end=last.in_flight if last is not None else 0,
        in_flight_oldest_s=round(last.in_flight_oldest_s, 3) if last is not None else 0.0,
        in_flight_reached=dict(drain.reached) if drain is not None else {},
        backoffs=Backoffs(waits=timed.waits, seconds=round(timed.waited_s, 3), retry_after=timed.retry_after_waits)
        if timed.waits
        else None,
        errors_by_kind=dict(total.errors),
        error_messages={kind: texts for kind, texts in total.messages.items() if texts},
        throughput_rps=round((timed.requests - sum(timed.errors.values())) / measured_s, 3) if measured_s else 0.0,
        bytes_sent=total.bytes_sent,
        bytes_received=total.bytes_received,
        latency=latency_figures(total.latency),
        service_time=latency_figures(total.service),
        failure_time=latency_figures(total.failed) if total.failed.count else None,
        late_sends=late,
        resent=total.resent,
        tokens=token_figures(timed.tokens, measured_s, total.requests, bool(config.objectives), total.tokens)
        if timed.tokens is not None and total.tokens is not None
        else None,
        generator_usage=usage,
        windows=[
            WindowResult(
                index=w.index,
                start_s=w.index * window_s,
                **_stretch(w, window_s),
                warmup=w.index < warmup_windows,
                scheduled=scheduled[w.index] if scheduled else None,
                good=w.good if config.objectives else None,
            )
            for w in windows
        ],
        segments=ramp_segments(config, level, measured),
        first_answers=first_answers(windows, start_wall),
        stop_reason=reason,
    )


def first_answers(windows: list[Window], start_wall: float) -> dict[str, float]:
    """When each server that names itself (the Kaliper-Replica header) first answered, in seconds from the stage's
    start."""
    found: dict[str, float] = {}
    for window in windows:
        for replica, at in window.first_answers.items():
            found[replica] = min(at, found.get(replica, at))
    return {replica: round(at - start_wall, 3) for replica, at in sorted(found.items())}


# A stream count a reader must know before trusting a stage's token figures, and what it means.
TOKEN_WARNINGS = (
    ("over_max_tokens", "answers were longer than the max_tokens they asked for; the server ignores max_tokens"),
    (
        "events_after_done",
        "events arrived after [DONE] and were ignored; the server goes on after saying its answer is over",
    ),
    (
        "usage_below_chunks",
        "answers' usage counted fewer output tokens than the content chunks they carried; "
        "their tokens are the chunks' count instead (a lower bound)",
    ),
    (
        "usage_off_tokenizer",
        "answers' usage differs from the tokenizer's count by more than 10%; is "
        "payload.prompts.tokenizer the served model's?",
    ),
)


def stage_warnings(stage: StageResult) -> list[str]:
    """What a reader must know before trusting a stage's figures."""
    warnings = []
    if stage.late_sends and stage.late_sends.reason:
        warnings.append(stage.late_sends.reason)
    tokens = stage.tokens
    if tokens is None:
        return warnings
    for count_field, meaning in TOKEN_WARNINGS:
        if count := getattr(tokens, count_field):
            warnings.append(f"stage {stage.index}: {count} {meaning}")
    if without_usage := tokens.token_sources.get("chunks", 0) - tokens.usage_below_chunks:
        warnings.append(
            f"stage {stage.index}: {without_usage} answers came without usage and no tokenizer was given: their "
            "output tokens are the number of chunks (a lower bound); set payload.prompts.tokenizer"
        )
    return warnings


def summarize(result: LoadTestResult) -> str:
    """A short human summary of a results document."""
    lines = [f"target {result.target}"]
    if result.error:
        lines.append(f"ERROR: {result.error}")
    for stage in result.stages:
        unit = {"closed": " users", "open": " req/s", "trace": "x the trace's speed"}[stage.load_model]
        p = {f.percentile: f for f in stage.latency.percentiles}
        figures = "  ".join(
            f"p{k:g} {p[k].value_ms:.2f}ms" for k in (50, 90, 99) if k in p and p[k].value_ms is not None
        )
        lines.append(
            f"stage {stage.index}: {stage.level:g}{unit}  {stage.requests} requests in {stage.measured_s:g}s  "
            f"{stage.throughput_rps:.1f} ok/s  errors {stage.error_rate:.2%} ({stage.error_time_share:.1%} of the time)"
            f"  {figures}"
        )
        if stage.tokens is not None:
            lines.append("  " + token_summary(stage.tokens))
        lines.append(f"  stopped: {stage.stop_reason}")
        if stage.drained:
            lines.append(
                f"  graceful stop: {stage.drained} requests in flight when measuring ended, awaited "
                f"{stage.drain_s:.1f} s and recorded"
            )
        if stage.in_flight_at_end:
            reached = stage.in_flight_reached.get("ttft", 0)
            lines.append(
                f"  {stage.in_flight_at_end} requests still in flight when the stage ended (the oldest for "
                f"{stage.in_flight_oldest_s:.1f} s): in no figure"
                + (f" but the {reached} times to first token they reached" if reached else "")
            )
        if stage.resent:
            lines.append(
                f"  {stage.resent} requests sent again on a new connection: the server had closed a kept-alive one "
                "before answering (not errors)"
            )
        if stage.backoffs:
            b = stage.backoffs
            lines.append(
                f"  users backed off {b.waits} times after failures ({b.seconds:.1f} s in all"
                + (f", {b.retry_after} as the server's Retry-After asked)" if b.retry_after else ")")
            )
        if stage.errors_by_kind:
            lines.append("  errors: " + ", ".join(f"{k} x{n}" for k, n in Counter(stage.errors_by_kind).most_common()))
            for kind, texts in stage.error_messages.items():
                lines += [f"    {kind}: {text}" for text in texts]
        if stage.late_sends and stage.late_sends.flagged:
            lines.append(f"  WARNING: {stage.late_sends.reason}")
        lines += [f"  {segment_text(segment)}" for segment in stage.segments]
        lines += [f"  {line}" for line in replay_lines(stage)]
    return "\n".join(lines)
