"""An optimization report as an HTML page that opens offline: the summary, the candidates, the profiles
and the charts.
"""

from __future__ import annotations

import html
from pathlib import Path

from kaliper.report.optimization import CandidateResult, ModelProfile, OptimizationReport
from kaliper.report.optimization_plots import optimization_figures
from kaliper.report.optimization_text import (
    ACCURACY_MARK,
    EN_DASH,
    SIZE_MARK,
    Kind,
    any_candidate_succeeded,
    candidate_colours,
    chosen_id,
    decimals_for,
    flops_text,
    format_latency,
    format_size,
    frontier_marks,
    headline,
    number_text,
    passes_text,
    percent_text,
    profile_caption,
    profile_label,
    rows,
    settings_text,
    summary_lines,
    time_us_text,
)
from kaliper.report.page import cell, header_row, page, write_page

CANDIDATE_HEADERS = (
    "id",
    "passes",
    "settings",
    "result",
    "latency (95% interval)",
    "improvement",
    "accuracy",
    "degradation",
    "agreement",
    "size",
    "frontier",
)


OPERATOR_HEADERS = ("node", "op type", "time µs", "% of time", "FLOPs")


OPERATOR_TYPE_HEADERS = ("op type", "nodes", "time µs", "% of time", "FLOPs")


def _latency_details(result: CandidateResult) -> str:
    """Every latency figure of a model in a line: the spread, the extremes, the runs."""
    m = result.latency
    if m is None:
        return ""
    digits = decimals_for(m.value_ms)
    spread = " / ".join(f"{v:.{digits}f}" for v in (m.mean_ms, m.p50_ms, m.p90_ms, m.p95_ms, m.p99_ms))
    extremes = f"{m.min_ms:.{digits}f}{EN_DASH}{m.max_ms:.{digits}f}"
    return (
        f"mean / p50 / p90 / p95 / p99: {spread} ms ({m.metric} shown); min{EN_DASH}max {extremes} ms; "
        f"{m.runs} runs after {m.warmup_runs} warm-up, batch {m.batch_size}"
    )


def _result(result: CandidateResult) -> str:
    """The status as a coloured word, whether it meets the goals after it, the message on hover."""
    css = "v-Failed" if result.status == "Failed" else "v-Met" if result.meets_goals else "v-NotMet"
    if result.meets_goals is None and result.status != "Failed":
        css = ""
    goals = {True: ", meets goals", False: ", misses goals", None: ""}[result.meets_goals]
    hover = f' title="{html.escape(result.message)}"' if result.message else ""
    return f'<td><span class="verdict {css}"{hover}>{html.escape(result.status)}</span>{goals}</td>'


def _candidate_row(report: OptimizationReport, kind: Kind, result: CandidateResult, swatch: str) -> str:
    chosen = result.id == chosen_id(report)
    label = result.id + (" (chosen)" if chosen else "") + (" (reference)" if kind == "reference" else "")
    size = format_size(result.model_size_bytes)
    css = "chosen" if chosen else "failed" if result.status == "Failed" else kind
    return (
        f'<tr class="{css}"><td><span class="swatch" style="background:{html.escape(swatch)}"></span>'
        f"{html.escape(label)}</td>"
        + cell(passes_text(result))
        + cell(settings_text(result.parameters), "parameters")
        + _result(result)
        + cell(format_latency(result), title=_latency_details(result))
        + cell(percent_text(result.latency_improvement_percent))
        + cell(number_text(result.accuracy), title=result.accuracy_metric or "")
        + cell(number_text(result.accuracy_degradation))
        + cell(number_text(result.agreement))
        + cell(size, title=f"{result.model_size_bytes:,} B" if result.model_size_bytes is not None else "")
        + cell(frontier_marks(report, result.id))
        + "</tr>"
    )


def _candidate_details(result: CandidateResult) -> str:
    lines = [result.message] if result.message else []
    if result.latency is not None:
        lines.append(_latency_details(result))
    if result.accuracy_metric:
        lines.append(f"accuracy metric: {result.accuracy_metric}")
    if result.accuracy_ci_low is not None and result.accuracy_ci_high is not None:
        lines.append(f"accuracy 95% interval (Wilson): {result.accuracy_ci_low:.4f}-{result.accuracy_ci_high:.4f}")
    lines.append(f"{number_text(result.seconds, '{:.1f}')} s to build and measure")
    if result.artifact:
        lines.append(f"model: {result.artifact}")
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return (
        f"<details><summary>{html.escape(result.id)}: {html.escape(result.status)}</summary><ul>{items}</ul></details>"
    )


def candidates_html(report: OptimizationReport) -> str:
    colours = candidate_colours(report)
    body = "".join(_candidate_row(report, kind, r, colours[r.id]) for kind, r in rows(report))
    details = "".join(_candidate_details(r) for _, r in rows(report))
    return f"<table>{header_row(CANDIDATE_HEADERS)}{body}</table>{details}"


def profile_html(report: OptimizationReport, profile: ModelProfile, top: int = 20) -> str:
    """One profile: its caption, every operator type, and its `top` slowest nodes."""
    types = "".join(
        "<tr>"
        + cell(op.op_type)
        + cell(str(op.nodes))
        + cell(time_us_text(op.time_us))
        + cell(percent_text(op.time_percent))
        + cell(flops_text(op.flops))
        + "</tr>"
        for op in profile.operator_types
    )
    nodes = "".join(
        "<tr>"
        + cell(op.node)
        + cell(op.op_type)
        + cell(time_us_text(op.time_us))
        + cell(percent_text(op.time_percent))
        + cell(flops_text(op.flops))
        + "</tr>"
        for op in profile.operators[:top]
    )
    shown = min(top, len(profile.operators))
    return (
        f"<h3>Profile of {html.escape(profile_label(report, profile))}</h3>"
        f"<p>{html.escape(profile_caption(profile))}</p>"
        f"<h4>Per operator type</h4><table>{header_row(OPERATOR_TYPE_HEADERS)}{types}</table>"
        f"<h4>The {shown} slowest of {len(profile.operators)} nodes</h4>"
        f"<table>{header_row(OPERATOR_HEADERS)}{nodes}</table>"
    )


def optimization_html(report: OptimizationReport) -> str:
    """A self-contained page (plotly inlined), answer first: the summary, the candidates table (each one's
    details folded), the charts, the profiles."""
    lines = summary_lines(report)
    alerts = len(headline(report)) if report.phase == "Failed" or report.interrupted else 0
    top = "".join(f'<p class="alert">{html.escape(line)}</p>' for line in lines[:alerts])
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in lines[alerts:])
    charts = "".join(f.to_html(full_html=False, include_plotlyjs=False) for f in optimization_figures(report))
    if not any_candidate_succeeded(report):
        charts = '<p class="notice">No charts: no candidate succeeded, so nothing was measured to plot.</p>' + charts
    profiles = "".join(profile_html(report, p) for p in report.profiles)
    body = f"""{top}<h1>ModelOptimization {html.escape(report.name)}</h1>
<p class="notice">Started {report.started_at:%Y-%m-%d %H:%M:%S} UTC. {ACCURACY_MARK}: on the latency-accuracy
frontier, {SIZE_MARK}: on the latency-size frontier. Hover a latency for its spread, a result for its message.</p>
<section class="answer"><ul>{summary}</ul></section>
<h2>Candidates</h2>
{candidates_html(report)}
<h2>Charts</h2>
{charts}
{"<h2>Profiles</h2>" + profiles if profiles else ""}
"""
    return page(f"Kaliper optimization: {report.name}", body)


def write_optimization_html(report: OptimizationReport, path: Path) -> Path:
    return write_page(optimization_html(report), path)
