"""An optimization report as an HTML page that opens offline: the summary, the candidates, the profiles
and the charts.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from kaliper.report.optimization import CandidateResult, ModelProfile, OptimizationReport
from kaliper.report.optimization_plots import optimization_figures
from kaliper.report.optimization_text import (
    ACCURACY_MARK,
    EN_DASH,
    NONE,
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
    yes_no_text,
)
from kaliper.report.page import cell, header_row, page, write_page

if TYPE_CHECKING:
    pass


CANDIDATE_HEADERS = (
    "id",
    "passes",
    "settings",
    "status",
    "message",
    "latency (95% interval)",
    "mean / p50 / p90 / p95 / p99 ms",
    f"min{EN_DASH}max ms",
    "runs (warm-up), batch",
    "improvement",
    "accuracy metric",
    "accuracy",
    "degradation",
    "agreement",
    "size",
    "meets goals",
    "frontier",
    "seconds",
    "artifact",
)


OPERATOR_HEADERS = ("node", "op type", "time µs", "% of time", "FLOPs")


OPERATOR_TYPE_HEADERS = ("op type", "nodes", "time µs", "% of time", "FLOPs")


def _latency_details(result: CandidateResult) -> tuple[str, str, str]:
    m = result.latency
    if m is None:
        return NONE, NONE, NONE
    digits = decimals_for(m.value_ms)
    spread = " / ".join(f"{v:.{digits}f}" for v in (m.mean_ms, m.p50_ms, m.p90_ms, m.p95_ms, m.p99_ms))
    extremes = f"{m.min_ms:.{digits}f}{EN_DASH}{m.max_ms:.{digits}f}"
    return f"{m.metric}: {spread}", extremes, f"{m.runs} ({m.warmup_runs}), batch {m.batch_size}"


def _candidate_row(report: OptimizationReport, kind: Kind, result: CandidateResult, swatch: str) -> str:
    chosen = result.id == chosen_id(report)
    label = result.id + (" (chosen)" if chosen else "") + (" (reference)" if kind == "reference" else "")
    spread, extremes, runs = _latency_details(result)
    size = format_size(result.model_size_bytes)
    if result.model_size_bytes is not None and result.model_size_bytes >= 1024:
        size += f" ({result.model_size_bytes:,} B)"
    css = "chosen" if chosen else "failed" if result.status == "Failed" else kind
    return (
        f'<tr class="{css}"><td><span class="swatch" style="background:{html.escape(swatch)}"></span>'
        f"{html.escape(label)}</td>"
        + cell(passes_text(result))
        + cell(settings_text(result.parameters))
        + cell(result.status)
        + cell(result.message or "", "message")
        + cell(format_latency(result))
        + cell(spread)
        + cell(extremes)
        + cell(runs)
        + cell(percent_text(result.latency_improvement_percent))
        + cell(result.accuracy_metric or NONE)
        + cell(number_text(result.accuracy))
        + cell(number_text(result.accuracy_degradation))
        + cell(number_text(result.agreement))
        + cell(size)
        + cell(yes_no_text(result.meets_goals))
        + cell(frontier_marks(report, result.id))
        + cell(number_text(result.seconds, "{:.1f}"))
        + cell(result.artifact or NONE, "message")
        + "</tr>"
    )


def candidates_html(report: OptimizationReport) -> str:
    colours = candidate_colours(report)
    body = "".join(_candidate_row(report, kind, r, colours[r.id]) for kind, r in rows(report))
    return f'<div class="scroll"><table>{header_row(CANDIDATE_HEADERS)}{body}</table></div>'


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
    """A self-contained page (plotly inlined): summary, charts, the candidates table, the profiles."""
    lines = summary_lines(report)
    alerts = len(headline(report)) if report.phase == "Failed" or report.interrupted else 0
    top = "".join(f'<p class="alert">{html.escape(line)}</p>' for line in lines[:alerts])
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in lines[alerts:])
    charts = "".join(f.to_html(full_html=False, include_plotlyjs=False) for f in optimization_figures(report))
    if not any_candidate_succeeded(report):
        charts = '<p class="notice">No charts: no candidate succeeded, so nothing was measured to plot.</p>' + charts
    profiles = "".join(profile_html(report, p) for p in report.profiles)
    body = f"""{top}<h1>ModelOptimization {html.escape(report.name)}</h1>
<p>Started {report.started_at:%Y-%m-%d %H:%M:%S} UTC. {ACCURACY_MARK}: on the latency-accuracy frontier,
{SIZE_MARK}: on the latency-size frontier.</p>
<ul>{summary}</ul>
{charts}
<h2>Candidates</h2>
{candidates_html(report)}
{"<h2>Profiles</h2>" + profiles if profiles else ""}
"""
    return page(f"Kaliper optimization: {report.name}", body)


def write_optimization_html(report: OptimizationReport, path: Path) -> Path:
    return write_page(optimization_html(report), path)
