"""Turning merged windows into the results document's figures. Pure functions: no Locust, no I/O."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.recorder import LATE_AFTER_S, Window
from kaliper.loadgen.tokens import TokenWindow
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


def token_figures(tokens: TokenWindow, measured_s: float, requests: int, with_objectives: bool) -> TokenFigures:
    per_s = (lambda n: round(n / measured_s, 3)) if measured_s else (lambda n: 0.0)
    distributions = {}
    for row in TOKEN_FIGURES:
        measured = getattr(tokens, row.window)
        corrected = getattr(tokens, row.window_corrected) if row.window_corrected else None
        distributions[row.report] = latency_figures(corrected if corrected is not None else measured)
        if row.report_service:
            distributions[row.report_service] = latency_figures(measured)
    return TokenFigures(
        **distributions,
        streams=tokens.streams,
        chunks=tokens.chunks,
        input_tokens=tokens.input_tokens,
        output_tokens=tokens.output_tokens,
        output_tokens_per_s=per_s(tokens.output_tokens),
        total_tokens_per_s=per_s(tokens.output_tokens + tokens.input_tokens),
        token_sources=dict(tokens.token_sources),
        cached_input_tokens=tokens.cached_input_tokens if tokens.cached_reported else None,
        reasoning_requests=tokens.reasoning_requests,
        reasoning_tokens=tokens.reasoning_tokens,
        reasoning_sources=dict(tokens.reasoning_sources),
        tokenizer_mean_difference=round(tokens.tokenizer_difference / tokens.tokenizer_compared, 4)
        if tokens.tokenizer_compared
        else None,
        per_token_exact=tokens.per_token_exact,
        per_token_divided=tokens.per_token_divided,
        per_token_unknown=tokens.per_token_unknown,
        cut_short=tokens.cut_short,
        cut_short_tokens=tokens.cut_short_tokens,
        over_max_tokens=tokens.over_max_tokens,
        events_after_done=tokens.events_after_done,
        usage_below_chunks=tokens.usage_below_chunks,
        usage_off_tokenizer=tokens.usage_off_tokenizer,
        goodput_rps=per_s(tokens.good) if with_objectives else None,
        goodput_share=(round(tokens.good / requests, 6) if requests else 0.0) if with_objectives else None,
    )


def error_time_share(measured: list[Window]) -> float:
    """The mean of the measured windows' error rates (windows without requests left out)."""
    rates = [sum(w.errors.values()) / w.requests for w in measured if w.requests]
    return round(sum(rates) / len(rates), 6) if rates else 0.0


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
        errors = sum(part.errors.values())
        segments.append(
            RampSegment(
                index=i,
                start_s=round(i * segment_s, 3),
                duration_s=round(segment_s, 3),
                intended_rps=round(asked, 3) if config.open_loop else None,
                intended_users=round(asked, 3) if not config.open_loop else None,
                requests=part.requests,
                errors=errors,
                throughput_rps=round((part.requests - errors) / (windows * window_s), 3) if windows else 0.0,
                p50_ms=_ms(part.latency.value_at_percentile(50)) if part.latency.count else None,
                p99_ms=_ms(part.latency.value_at_percentile(99)) if part.latency.count else None,
                late_sends=part.late_generator + part.late_no_connection,
            )
        )
    return segments


def stage_result(
    config: LoadGenConfig,
    index: int,
    level: float,
    start_wall: float,
    windows: list[Window],
    warmup_windows: int,
    reason: str,
) -> StageResult:
    window_s = config.window_s
    measured = windows[warmup_windows:]
    total = Window(index, -1, corrected=LatencyHistogram() if config.open_loop else None)
    for window in measured:
        total.merge(window)
    errors = sum(total.errors.values())
    measured_s = len(measured) * window_s
    windows_in = max((w.index + 1 for w in windows), default=0)
    scheduled = config.played_trace().sends_per_window(window_s, windows_in) if config.load.trace else None
    usage = (
        GeneratorUsage(
            cpu_cores=round(total.cpu_s / measured_s, 4), capacity_cores=round(total.capacity_s / measured_s, 4)
        )
        if measured_s and total.capacity_s
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
        error_time_share=error_time_share(measured),
        in_flight_at_end=measured[-1].in_flight if measured else 0,
        in_flight_oldest_s=round(measured[-1].in_flight_oldest_s, 3) if measured else 0.0,
        backoffs=Backoffs(waits=total.waits, seconds=round(total.waited_s, 3), retry_after=total.retry_after_waits)
        if total.waits
        else None,
        errors_by_kind=dict(total.errors),
        error_messages={kind: texts for kind, texts in total.messages.items() if texts},
        throughput_rps=round((total.requests - errors) / measured_s, 3) if measured_s else 0.0,
        bytes_sent=total.bytes_sent,
        bytes_received=total.bytes_received,
        latency=latency_figures(total.latency),
        service_time=latency_figures(total.service),
        failure_time=latency_figures(total.failed) if total.failed.count else None,
        late_sends=late,
        resent=total.resent,
        tokens=token_figures(total.tokens, measured_s, total.requests, bool(config.objectives))
        if total.tokens is not None
        else None,
        generator_usage=usage,
        windows=[
            WindowResult(
                index=w.index,
                start_s=w.index * window_s,
                warmup=w.index < warmup_windows,
                requests=w.requests,
                errors=sum(w.errors.values()),
                throughput_rps=round((w.requests - sum(w.errors.values())) / window_s, 3),
                p50_ms=_ms(w.latency.value_at_percentile(50)) if w.latency.count else None,
                p99_ms=_ms(w.latency.value_at_percentile(99)) if w.latency.count else None,
                late_sends=w.late_no_connection + w.late_generator,
                scheduled=scheduled[w.index] if scheduled else None,
            )
            for w in windows
        ],
        segments=ramp_segments(config, level, measured),
        stop_reason=reason,
    )


def stage_warnings(stage: StageResult) -> list[str]:
    """What a reader must know before trusting a stage's figures."""
    warnings = []
    if stage.late_sends and stage.late_sends.reason:
        warnings.append(stage.late_sends.reason)
    tokens = stage.tokens
    if tokens is not None and tokens.over_max_tokens:
        warnings.append(
            f"stage {stage.index}: {tokens.over_max_tokens} answers were longer than the max_tokens they asked for; "
            "the server ignores max_tokens"
        )
    if tokens is not None and tokens.events_after_done:
        warnings.append(
            f"stage {stage.index}: {tokens.events_after_done} events arrived after [DONE] and were ignored; the "
            "server goes on after saying its answer is over"
        )
    if tokens is not None and tokens.usage_below_chunks:
        warnings.append(
            f"stage {stage.index}: {tokens.usage_below_chunks} answers' usage counted fewer output tokens than the "
            "content chunks they carried; their tokens are the chunks' count instead (a lower bound)"
        )
    if tokens is not None and tokens.usage_off_tokenizer:
        warnings.append(
            f"stage {stage.index}: {tokens.usage_off_tokenizer} answers' usage differs from the tokenizer's count by "
            "more than 10%; is payload.prompts.tokenizer the served model's?"
        )
    without_usage = (tokens.token_sources.get("chunks", 0) - tokens.usage_below_chunks) if tokens is not None else 0
    if without_usage:
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
        if stage.in_flight_at_end:
            lines.append(
                f"  {stage.in_flight_at_end} requests still in flight when the stage ended (the oldest for "
                f"{stage.in_flight_oldest_s:.1f} s): in no figure"
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
