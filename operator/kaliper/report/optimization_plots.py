"""An optimization report's charts (plotly): latency against accuracy and size, time per operator."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaliper.report.optimization import CandidateResult, OptimizationReport
from kaliper.report.optimization_text import (
    FRONTIER_COLOUR,
    LOWER_IS_BETTER,
    SYMBOLS,
    TRACE_NAMES,
    Kind,
    accuracy_metric,
    any_candidate_succeeded,
    candidate_colours,
    chosen_id,
    format_latency,
    latency_value,
    passes_text,
    profile_label,
    rows,
    settings_text,
)
from kaliper.report.profile_text import colour

if TYPE_CHECKING:
    import plotly.graph_objects as go


def _plotted(report: OptimizationReport) -> list[tuple[Kind, CandidateResult]]:
    """What the charts draw: every model that succeeded and has a latency (failed ones are only listed)."""
    return [(k, r) for k, r in rows(report) if r.status == "Succeeded" and latency_value(r) is not None]


def _error_bars(results: list[CandidateResult]) -> dict[str, object] | None:
    """Asymmetric error bars from the latency interval; None where nothing has an interval."""
    plus: list[float | None] = []
    minus: list[float | None] = []
    for r in results:
        m, value = r.latency, latency_value(r)
        plus.append(m.ci_high_ms - value if m and m.ci_high_ms is not None and value is not None else None)
        minus.append(value - m.ci_low_ms if m and m.ci_low_ms is not None and value is not None else None)
    if all(v is None for v in plus + minus):
        return None
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1}


def _hover(result: CandidateResult) -> str:
    return html.escape(
        f"{result.id}: {passes_text(result)}; {settings_text(result.parameters)}; {format_latency(result)}"
    )


def _scatter_figure(
    report: OptimizationReport,
    y_of: Callable[[CandidateResult], float | None],
    frontier: list[str],
    frontier_name: str,
) -> go.Figure | None:
    """Latency (x) against y_of, one trace per kind, the chosen one a star, the frontier a crimson step line."""
    import plotly.graph_objects as go

    colours, chosen = candidate_colours(report), chosen_id(report)
    points = [(k, r) for k, r in _plotted(report) if y_of(r) is not None]
    if not points:
        return None
    figure = go.Figure()
    for kind in ("reference", "original", "candidate"):
        results = [r for k, r in points if k == kind]
        if not results:
            continue
        figure.add_trace(
            go.Scatter(
                x=[latency_value(r) for r in results],
                y=[y_of(r) for r in results],
                error_x=_error_bars(results),
                mode="markers+text",
                name=TRACE_NAMES[kind],
                text=[html.escape(r.id) for r in results],
                textposition="top center",
                hovertext=[_hover(r) for r in results],
                marker={
                    "color": [colours[r.id] for r in results],
                    "symbol": ["star" if r.id == chosen else SYMBOLS[kind] for r in results],
                    "size": [18 if r.id == chosen else 11 for r in results],
                    "line": {"color": [FRONTIER_COLOUR if r.id == chosen else "white" for r in results], "width": 2},
                },
            )
        )
    # A staircase through the frontier, fastest first: at any latency, the best y reachable at or below it.
    on_frontier = sorted(((latency_value(r), y_of(r), r.id) for _, r in points if r.id in frontier))
    if on_frontier:
        figure.add_trace(
            go.Scatter(
                x=[p[0] for p in on_frontier],
                y=[p[1] for p in on_frontier],
                text=[html.escape(p[2]) for p in on_frontier],
                mode="lines",
                name=frontier_name,
                line={"color": FRONTIER_COLOUR, "shape": "hv"},
                hoverinfo="text+x+y",
            )
        )
    return figure


def _latency_axis(report: OptimizationReport) -> dict[str, object]:
    metric = next((r.latency.metric for _, r in rows(report) if r.latency), None)
    return {"title": f"latency, {metric} (ms)" if metric else "latency (ms)", "rangemode": "tozero"}


def _latency_bars(report: OptimizationReport) -> go.Figure | None:
    """Latency per model as horizontal bars, for a run that measured no accuracy."""
    import plotly.graph_objects as go

    points = _plotted(report)
    if not points:
        return None
    colours, chosen = candidate_colours(report), chosen_id(report)
    results = [r for _, r in points]
    patterns = {"reference": "/", "original": "x", "candidate": ""}
    figure = go.Figure(
        go.Bar(
            x=[latency_value(r) for r in results],
            y=[html.escape(r.id) for r in results],
            orientation="h",
            name="latency",
            error_x=_error_bars(results),
            hovertext=[_hover(r) for r in results],
            marker={
                "color": [colours[r.id] for r in results],
                "pattern": {"shape": [patterns[k] for k, _ in points]},
                "line": {"color": [FRONTIER_COLOUR if r.id == chosen else "white" for r in results], "width": 3},
            },
        )
    )
    figure.update_layout(
        title="Latency per candidate (no accuracy was measured; hatched: references and the original; "
        "outlined: the chosen one)",
        xaxis=_latency_axis(report),
        yaxis={"title": "candidate", "autorange": "reversed", "type": "category"},
    )
    return figure


def latency_accuracy_figure(report: OptimizationReport) -> go.Figure | None:
    """Latency vs accuracy with the latency-accuracy frontier; latency bars when no accuracy was measured."""
    figure = _scatter_figure(
        report, lambda r: r.accuracy, report.frontiers.latency_accuracy, "latency-accuracy frontier"
    )
    if figure is None:
        return _latency_bars(report)
    metric = accuracy_metric(report) or "accuracy"
    better = "lower" if metric in LOWER_IS_BETTER else "higher"
    figure.update_layout(
        title="Latency vs accuracy (frontier in crimson; the chosen candidate is a star)",
        xaxis=_latency_axis(report),
        yaxis={"title": html.escape(f"{metric} ({better} is better)")},
    )
    return figure


def size_unit(report: OptimizationReport) -> tuple[str, int]:
    """The unit the size chart is drawn in: MiB when some model reaches 1 MiB, else KiB."""
    largest = max((r.model_size_bytes or 0 for _, r in rows(report)), default=0)
    return ("MiB", 2**20) if largest >= 2**20 else ("KiB", 2**10)


def latency_size_figure(report: OptimizationReport) -> go.Figure | None:
    """Latency vs model file size with the latency-size frontier; None when no size was measured."""
    unit, scale = size_unit(report)
    figure = _scatter_figure(
        report,
        lambda r: None if r.model_size_bytes is None else r.model_size_bytes / scale,
        report.frontiers.latency_size,
        "latency-size frontier",
    )
    if figure is None:
        return None
    figure.update_layout(
        title="Latency vs model size (frontier in crimson; the chosen candidate is a star)",
        xaxis=_latency_axis(report),
        yaxis={"title": f"model size ({unit})", "rangemode": "tozero"},
    )
    return figure


def operator_time_figure(report: OptimizationReport, top: int = 15) -> go.Figure | None:
    """Kernel time per operator type, one bar group per type, one bar per profile (original, chosen)."""
    import plotly.graph_objects as go

    times = [{op.op_type: op.time_us for op in p.operator_types if op.time_us is not None} for p in report.profiles]
    slowest: dict[str, float] = {}
    for by_type in times:
        for op_type, time_us in by_type.items():
            slowest[op_type] = max(slowest.get(op_type, 0.0), time_us)
    if not slowest:
        return None
    # The `top` types slowest in any profile, slowest first: a type the chosen model added is still shown.
    op_types = sorted(slowest, key=lambda op: -slowest[op])[:top]
    colours = candidate_colours(report)
    figure = go.Figure()
    for profile, by_type in zip(report.profiles, times, strict=True):
        figure.add_trace(
            go.Bar(
                x=[html.escape(op) for op in op_types],
                y=[by_type.get(op) for op in op_types],
                name=html.escape(profile_label(report, profile)),
                marker={"color": colours.get(profile.model, colour(len(colours)))},
            )
        )
    figure.update_layout(
        title="Kernel time per operator type (µs per inference)",
        barmode="group",
        xaxis={"title": "operator type"},
        yaxis={"title": "time per inference (µs)", "rangemode": "tozero"},
    )
    return figure


def optimization_figures(report: OptimizationReport) -> list[go.Figure]:
    """The page's charts: latency vs accuracy (or latency bars), latency vs size, time per operator type.
    The first two are left out when no candidate succeeded; any chart with nothing to show is left out."""
    found = [operator_time_figure(report)]
    if any_candidate_succeeded(report):
        found = [latency_accuracy_figure(report), latency_size_figure(report), *found]
    return [f for f in found if f is not None]
