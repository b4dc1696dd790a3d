"""Token-stream figures in words (pure): the load generator's summary, the terminal and HTML reports."""

from __future__ import annotations

from kaliper.measure.figures import status_figures_shown
from kaliper.report.schema import LatencyFigures, ServerCheck, ServerLoad, TokenFigures


def token_summary(tokens: TokenFigures) -> str:
    """One line: the status figures (ttft, itl per chunk, tpot; ttfot and the reasoning tokens where the
    model thought) at p50/p99, output tokens per second, and goodput."""

    def pair(figures: LatencyFigures) -> str:
        values = [figures.at(p) for p in (50, 99)]
        return "/".join("-" if v is None or v.value_ms is None else f"{v.value_ms:.2f}" for v in values) + "ms"

    thought = tokens.reasoning_requests > 0
    rows = status_figures_shown(thought)
    shown = [f"{row.label} {pair(getattr(tokens, row.report))}" for row in rows]
    shown[0] = shown[0].replace(" ", " p50/p99 ", 1)
    text = "  ".join(shown) + f"  {tokens.output_tokens_per_s:.0f} output tok/s"
    if tokens.cached_input_tokens is not None and tokens.input_tokens:
        text += f"  cached prompt {tokens.cached_input_tokens / tokens.input_tokens:.0%}"
    if thought:
        per_answer = tokens.reasoning_tokens / tokens.reasoning_requests
        sources = ", ".join(sorted(tokens.reasoning_sources))
        text += f"  reasoning {per_answer:.1f} tok/answer ({sources})"
    if tokens.goodput_rps is not None and tokens.goodput_share is not None:
        text += f"  goodput {tokens.goodput_rps:.1f}/s ({tokens.goodput_share:.0%})"
    if (check := tokens.server_check) is not None:
        text += "\n  " + server_check_line(check)
    if (load := tokens.server_load) is not None:
        text += "\n  " + server_load_line(load)
    return text


def server_load_line(load: ServerLoad) -> str:
    """How busy the server was, by its own gauges at the window edges."""
    parts = []
    for name, mean, top, weighted in (
        ("running", load.running_mean, load.running_max, load.running_time_weighted),
        ("queued", load.waiting_mean, load.waiting_max, load.waiting_time_weighted),
    ):
        if top is not None:
            over_time = f" ({weighted:.1f} over time)" if weighted is not None else ""
            parts.append(f"{name} {mean:.1f} on average{over_time}, up to {top:g}")
    if load.busy_slots_per_decode is not None:
        parts.append(f"{load.busy_slots_per_decode:.2f} busy slots per decode")
    if load.kv_cache_usage_max is not None:
        parts.append(f"KV cache up to {load.kv_cache_usage_max:.0%}")
    if load.preemptions is not None:
        parts.append(f"{load.preemptions:g} preemptions")
    if load.prefix_cache_hit_rate is not None:
        parts.append(f"prefix cache hits {load.prefix_cache_hit_rate:.0%} of prompt tokens looked up")
    if load.read_from == "prometheus":
        where = f"at least {load.samples} scrapes of each of {load.pods} pods in Prometheus"
    else:
        where = f"{load.samples} readings"
    return f"server load ({load.source}, {where}): " + ", ".join(parts)


SHORT_LABELS = {
    "outputTokens": "output tokens",
    "inputTokens": "input tokens",
    "generationSeconds": "generation s",
    "meanTtftMs": "mean ttft ms",
    "meanItlMs": "mean itl ms",
}


def server_check_line(check: ServerCheck) -> str:
    """The self-check in one line: each figure as the server counted it and as the generator did (the
    report's serverCheck has each figure's definition)."""
    if check.source is None:
        return f"server check: none ({check.unavailable})"
    figures = ", ".join(
        f"{SHORT_LABELS.get(c.figure, c.figure)} {c.server:.6g} vs {c.generator:.6g}"
        + (f" ({c.difference:+.2%})" if c.difference is not None else "")
        for c in check.comparisons
    )
    return f"server check ({check.source} /metrics, server vs generator): {figures}"
