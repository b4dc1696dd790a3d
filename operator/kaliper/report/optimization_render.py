"""An optimization report for people: terminal tables and an HTML page with plots that opens offline.

It looks like the ProfileRun report (kaliper.report.render): the same palette, the frontier in crimson, rich
tables with simple heads, messages kept whole and escaped in the page.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kaliper.api.modeloptimization import ChosenModel
from kaliper.report.optimization import CandidateResult, MachineInfo, ModelProfile, OptimizationReport
from kaliper.report.page import cell, header_row, page, write_page
from kaliper.report.render import SLO_COLOUR, colour

if TYPE_CHECKING:
    import plotly.graph_objects as go

Kind = Literal["reference", "original", "candidate"]

NONE = "—"
FRONTIER_COLOUR = SLO_COLOUR
ACCURACY_MARK = "★"
SIZE_MARK = "◆"
# Escaped: ruff flags the literal characters as look-alikes of "-" and "x".
EN_DASH = "\u2013"
TIMES = "\u00d7"
# Metrics where a lower figure is better (evaluator.accuracy.metric); the others (accuracy, f1, r2) go up.
LOWER_IS_BETTER = frozenset({"mae", "mse", "rmse"})
SYMBOLS: dict[Kind, str] = {"reference": "diamond", "original": "square", "candidate": "circle"}
TRACE_NAMES: dict[Kind, str] = {"reference": "references", "original": "original", "candidate": "candidates"}
_FLOP_PREFIXES = ("", "k", "M", "G", "T", "P")
_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


# --- figures as text -------------------------------------------------------------------------------------


def format_flops(flops: int) -> str:
    """1200000 -> "1.2 MFLOPs" (decimal prefixes, as FLOPs are usually quoted)."""
    value, prefix = float(flops), 0
    # 999.95 and up would print as "1000.0": move to the next prefix instead.
    while abs(value) >= 999.95 and prefix < len(_FLOP_PREFIXES) - 1:
        value, prefix = value / 1000, prefix + 1
    return f"{value:.0f} FLOPs" if prefix == 0 else f"{value:.1f} {_FLOP_PREFIXES[prefix]}FLOPs"


def format_size(num_bytes: int | None) -> str:
    """10000 -> "9.8 KiB" (binary units, as file sizes are shown by ls -h)."""
    if num_bytes is None:
        return NONE
    value, unit = float(num_bytes), 0
    while value >= 1023.95 and unit < len(_SIZE_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{num_bytes} B" if unit == 0 else f"{value:.1f} {_SIZE_UNITS[unit]}"


def _decimals(value_ms: float) -> int:
    # Two decimals from 1 ms up; below, three significant digits (a 0.0234 ms model is not "0.02 ms").
    if value_ms >= 1 or value_ms <= 0:
        return 2
    return 2 - math.floor(math.log10(value_ms))


def latency_value(result: CandidateResult) -> float | None:
    """The deciding latency figure, ms: the measurement's, else the footprint's."""
    return result.latency.value_ms if result.latency is not None else result.latency_ms


def format_latency(result: CandidateResult) -> str:
    """The deciding figure with its 95% interval, "1.23 ms (1.20-1.27)" with an en dash; "?" for a bound not
    known (too few runs to bound a tail percentile from above)."""
    value = latency_value(result)
    if value is None:
        return NONE
    digits = _decimals(value)
    text = f"{value:.{digits}f} ms"
    m = result.latency
    if m is not None and (m.ci_low_ms is not None or m.ci_high_ms is not None):
        low = "?" if m.ci_low_ms is None else f"{m.ci_low_ms:.{digits}f}"
        high = "?" if m.ci_high_ms is None else f"{m.ci_high_ms:.{digits}f}"
        text += f" ({low}{EN_DASH}{high})"
    return text


def _number(value: float | None, pattern: str = "{:.4g}") -> str:
    return NONE if value is None else pattern.format(value)


def _percent(value: float | None) -> str:
    return _number(value, "{:.1f}%")


def _yes_no(value: bool | None) -> str:
    return NONE if value is None else ("yes" if value else "no")


def passes_text(result: CandidateResult) -> str:
    """The passes in order; the transformer pass with the operators it fused: "transformersOptimization
    (Attention x4, SkipLayerNormalization x8) + quantization"."""
    names = []
    for name in result.passes:
        if name == "transformersOptimization" and result.fused_operators:
            fused = ", ".join(f"{op} {TIMES}{n}" for op, n in result.fused_operators.items())
            name += f" ({fused})"
        names.append(name)
    return " + ".join(names) or NONE


def settings_text(parameters: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in parameters.items()) or NONE


def frontier_marks(report: OptimizationReport, candidate_id: str) -> str:
    """★ on the latency-accuracy frontier, ◆ on the latency-size one, both, or nothing."""
    marks = [
        mark
        for mark, ids in (
            (ACCURACY_MARK, report.frontiers.latency_accuracy),
            (SIZE_MARK, report.frontiers.latency_size),
        )
        if candidate_id in ids
    ]
    return " ".join(marks)


def status_text(result: CandidateResult) -> str:
    return f"{result.status}: {result.message}" if result.message else result.status


# --- rows and colours ------------------------------------------------------------------------------------


def rows(report: OptimizationReport) -> list[tuple[Kind, CandidateResult]]:
    """Every evaluated model in table order: the references, the original (baseline), the candidates."""
    found: list[tuple[Kind, CandidateResult]] = [("reference", r) for r in report.references]
    if report.baseline is not None:
        found.append(("original", report.baseline))
    found += [("candidate", c) for c in report.candidates]
    return found


def candidate_colours(report: OptimizationReport) -> dict[str, str]:
    """Id -> its colour, the same in every chart and in the table (the ProfileRun palette, in table order)."""
    return {result.id: colour(position) for position, (_, result) in enumerate(rows(report))}


def chosen_id(report: OptimizationReport) -> str | None:
    return report.chosen.candidate_id if report.chosen is not None else None


def _chosen_result(report: OptimizationReport) -> CandidateResult | None:
    wanted = chosen_id(report)
    return next((r for _, r in rows(report) if r.id == wanted), None)


def accuracy_metric(report: OptimizationReport) -> str | None:
    return next((r.accuracy_metric for _, r in rows(report) if r.accuracy_metric), None)


def any_candidate_succeeded(report: OptimizationReport) -> bool:
    return any(c.status == "Succeeded" for c in report.candidates)


# --- summary ---------------------------------------------------------------------------------------------


def headline(report: OptimizationReport) -> list[str]:
    """What must be read first: the phase with its reason and message, and an interruption."""
    word = "FAILED" if report.phase == "Failed" else report.phase
    line = word + (f" ({report.reason})" if report.reason and report.reason != report.phase else "")
    if report.message:
        line += f": {report.message}"
    lines = [line]
    if report.interrupted:
        lines.append(
            f"INTERRUPTED: the optimization was stopped after {len(report.candidates)} of {report.planned} "
            "candidates; the choice covers only those"
        )
    return lines


def _measured(result: CandidateResult) -> str:
    parts = [format_latency(result)]
    if result.accuracy is not None:
        parts.append(f"{result.accuracy_metric or 'accuracy'} {_number(result.accuracy)}")
    if result.model_size_bytes is not None:
        parts.append(format_size(result.model_size_bytes))
    return ", ".join(parts)


def _chosen_line(chosen: ChosenModel, result: CandidateResult | None) -> str:
    """The chosen model's figures: ChosenModel's, else its candidate row's."""
    line = f"chosen: {chosen.candidate_id}"
    if result is not None:
        line += f" ({passes_text(result)})"
    improvement = chosen.latency_improvement_percent
    if improvement is None and result is not None:
        improvement = result.latency_improvement_percent
    if improvement is not None:
        line += f", {abs(improvement):.1f}% {'faster' if improvement >= 0 else 'slower'} than the original"
    degradation = chosen.accuracy_degradation
    if degradation is None and result is not None:
        degradation = result.accuracy_degradation
    if degradation is not None:
        # Negative degradation is a gain: say so rather than print "degradation -0.002".
        line += f", accuracy {'degradation' if degradation >= 0 else 'gain'} {_number(abs(degradation))}"
    if result is not None:
        line += f"; {_measured(result)}"
    return line


def summary_lines(report: OptimizationReport) -> list[str]:
    """The headline, what was searched, the original, the chosen model, the frontiers, artifacts, warnings."""
    lines = headline(report)
    failed = sum(c.status == "Failed" for c in report.candidates)
    searched = f"{report.strategy} search, {len(report.candidates)} of {report.planned} candidates evaluated"
    lines.append(searched + (f" ({failed} failed)" if failed else ""))
    if report.target:
        lines.append("target: " + settings_text(report.target))
    if report.machine is not None:
        lines.append(machine_line(report.machine))
    if report.baseline is not None:
        lines.append(f"original: {_measured(report.baseline)}")
    if report.chosen is not None:
        result = _chosen_result(report)
        lines.append(_chosen_line(report.chosen, result))
        settings = report.chosen_settings or (result.parameters if result else {})
        lines.append(f"  settings: {settings_text(settings)}")
        if report.chosen.artifact:
            lines.append(f"  model: {report.chosen.artifact}")
    else:
        lines.append("chosen: none")
    for name, ids in (
        ("latency-accuracy", report.frontiers.latency_accuracy),
        ("latency-size", report.frontiers.latency_size),
    ):
        if ids:
            lines.append(f"{name} frontier: {', '.join(ids)}")
    if report.artifacts:
        lines.append(f"artifacts: {report.artifacts}")
    lines += [f"warning: {w}" for w in report.warnings]
    return lines


# --- the terminal ----------------------------------------------------------------------------------------


def candidates_table(report: OptimizationReport) -> Table:
    """One row per reference, the original and every candidate; the chosen one in bold green."""
    metric = accuracy_metric(report)
    latency_metric = next((r.latency.metric for _, r in rows(report) if r.latency), None)
    table = Table(
        title=f"ModelOptimization {report.name}: {len(report.candidates)} candidates ({report.strategy} search)",
        caption=(
            f"* chosen   {ACCURACY_MARK} latency-accuracy frontier   {SIZE_MARK} latency-size frontier"
            + (f"   latency: {latency_metric} with its 95% interval" if latency_metric else "")
        ),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    # Short headers and figures never cut (no_wrap), so that at 120 columns the room left goes to the passes,
    # settings and status, which wrap: a message is always whole.
    columns = (
        ("id", "left", False),
        ("passes", "left", True),
        ("settings", "left", True),
        ("latency", "right", False),
        ("faster", "right", False),
        (metric or "accuracy", "right", False),
        ("degra-\ndation", "right", False),
        ("size", "right", False),
        ("meets\ngoals", "left", False),
        ("Pareto", "left", False),
        ("status", "left", True),
    )
    for header, justify, wraps in columns:
        table.add_column(header, justify=justify, no_wrap=not wraps, overflow="fold")  # type: ignore[arg-type]
    chosen = chosen_id(report)
    for kind, result in rows(report):
        style = "bold green" if result.id == chosen else "red" if result.status == "Failed" else None
        # Text, not markup: a message with brackets ("[ONNXRuntimeError]") is shown as written.
        table.add_row(
            Text(result.id + (" *" if result.id == chosen else "")),
            Text(passes_text(result)),
            Text(settings_text(result.parameters)),
            format_latency(result),
            _percent(result.latency_improvement_percent),
            _number(result.accuracy),
            _number(result.accuracy_degradation),
            format_size(result.model_size_bytes),
            _yes_no(result.meets_goals),
            frontier_marks(report, result.id),
            Text(status_text(result)),
            style=style or ("dim" if kind == "reference" else None),
        )
    return table


def without_estimate(profile: ModelProfile) -> str:
    """The op types the FLOPs estimate leaves out, counted: "Shape x2, Gather" (with a multiplication sign)."""
    counts = Counter(profile.nodes_without_estimate)
    return ", ".join(op if n == 1 else f"{op} {TIMES}{n}" for op, n in counts.items())


def profile_caption(profile: ModelProfile) -> str:
    caption = (
        f"{profile.parameters:,} parameters; {format_flops(profile.flops)} per inference (batch {profile.batch_size})"
    )
    if profile.nodes_without_estimate:
        caption += f", a lower bound: no estimate for {without_estimate(profile)}"
    if profile.kernel_time_us is not None:
        caption += f"; kernel time {profile.kernel_time_us:,.1f} µs per inference over {profile.runs} runs"
    if profile.layout is not None:
        caption += f"; ran in {layout_text(profile.layout, profile.nchwc_block_size)}"
    return caption


def layout_text(layout: str, block_size: int | None) -> str:
    """ "NCHWc, 16-channel blocks (operator FLOPs include the padding to whole blocks)", or the layout alone."""
    if layout == "NCHWc" and block_size:
        return f"NCHWc, {block_size}-channel blocks (operator FLOPs include the padding to whole blocks)"
    return layout


def machine_line(machine: MachineInfo) -> str:
    """ "machine: AMD EPYC (x86_64: AVX2, AVX512F), ONNX Runtime 1.32.0, NCHWc blocks of 16 channels"."""
    sets = f": {', '.join(machine.instruction_sets)}" if machine.instruction_sets else ""
    block = f"NCHWc blocks of {machine.nchwc_block_size} channels" if machine.nchwc_block_size else "no NCHWc layout"
    return f"machine: {machine.cpu} ({machine.architecture}{sets}), ONNX Runtime {machine.onnxruntime}, {block}"


def _time_us(value: float | None) -> str:
    return _number(value, "{:,.1f}")


def _flops(value: int | None) -> str:
    return NONE if value is None else format_flops(value)


def profile_table(profile: ModelProfile, top: int = 10) -> Table:
    """Where the model's time goes, per operator type (the slowest `top`)."""
    shown = profile.operator_types[:top]
    more = len(profile.operator_types) - len(shown)
    table = Table(
        title=f"Profile of {profile.model}: time per operator type"
        + (f" (top {len(shown)} of {len(profile.operator_types)})" if more else ""),
        caption=profile_caption(profile),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("op type", no_wrap=True)
    for header in ("nodes", "time µs", "% of time", "FLOPs"):
        table.add_column(header, justify="right", no_wrap=True)
    for op in shown:
        table.add_row(
            Text(op.op_type), str(op.nodes), _time_us(op.time_us), _percent(op.time_percent), _flops(op.flops)
        )
    return table


def print_optimization(report: OptimizationReport, console: Console | None = None) -> None:
    """Summary, candidates table, then each profile (the original's, then the chosen model's)."""
    console = console or Console()
    if not console.is_terminal and not console.record:
        # A file or a pipe: no terminal width to fit, keep rows whole.
        console = Console(file=console.file, width=220)
    alerts = len(headline(report)) if report.phase == "Failed" or report.interrupted else 0
    for position, line in enumerate(summary_lines(report)):
        console.print(Text(line, style="bold red" if position < alerts else ""))
    console.print(candidates_table(report))
    for profile in report.profiles:
        console.print(profile_table(profile))


# --- the charts ------------------------------------------------------------------------------------------


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


def _profile_label(report: OptimizationReport, profile: ModelProfile) -> str:
    return profile.model + (" (chosen)" if profile.model == chosen_id(report) else "")


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
                name=html.escape(_profile_label(report, profile)),
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


# --- the HTML page ---------------------------------------------------------------------------------------

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
    digits = _decimals(m.value_ms)
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
        + cell(_percent(result.latency_improvement_percent))
        + cell(result.accuracy_metric or NONE)
        + cell(_number(result.accuracy))
        + cell(_number(result.accuracy_degradation))
        + cell(_number(result.agreement))
        + cell(size)
        + cell(_yes_no(result.meets_goals))
        + cell(frontier_marks(report, result.id))
        + cell(_number(result.seconds, "{:.1f}"))
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
        + cell(_time_us(op.time_us))
        + cell(_percent(op.time_percent))
        + cell(_flops(op.flops))
        + "</tr>"
        for op in profile.operator_types
    )
    nodes = "".join(
        "<tr>"
        + cell(op.node)
        + cell(op.op_type)
        + cell(_time_us(op.time_us))
        + cell(_percent(op.time_percent))
        + cell(_flops(op.flops))
        + "</tr>"
        for op in profile.operators[:top]
    )
    shown = min(top, len(profile.operators))
    return (
        f"<h3>Profile of {html.escape(_profile_label(report, profile))}</h3>"
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
