"""An optimization report in the terminal: the candidates table, the model's profile, with rich."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kaliper.report import optimization_text as words
from kaliper.report.optimization import ModelProfile, OptimizationReport


def candidates_table(report: OptimizationReport) -> Table:
    """One row per reference, the original and every candidate; the chosen one in bold green."""
    metric = words.accuracy_metric(report)
    latency_metric = next((r.latency.metric for _, r in words.rows(report) if r.latency), None)
    table = Table(
        title=f"ModelOptimization {report.name}: {len(report.candidates)} candidates ({report.strategy} search)",
        caption=(
            f"* chosen   {words.ACCURACY_MARK} latency-accuracy frontier   {words.SIZE_MARK} latency-size frontier"
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
    chosen = words.chosen_id(report)
    for kind, result in words.rows(report):
        style = "bold green" if result.id == chosen else "red" if result.status == "Failed" else None
        # Text, not markup: a message with brackets ("[ONNXRuntimeError]") is shown as written.
        table.add_row(
            Text(result.id + (" *" if result.id == chosen else "")),
            Text(words.passes_text(result)),
            Text(words.settings_text(result.parameters)),
            words.format_latency(result),
            words.percent_text(result.latency_improvement_percent),
            words.number_text(result.accuracy),
            words.number_text(result.accuracy_degradation),
            words.format_size(result.model_size_bytes),
            words.yes_no_text(result.meets_goals),
            words.frontier_marks(report, result.id),
            Text(words.status_text(result)),
            style=style or ("dim" if kind == "reference" else None),
        )
    return table


def profile_table(profile: ModelProfile, top: int = 10) -> Table:
    """Where the model's time goes, per operator type (the slowest `top`)."""
    shown = profile.operator_types[:top]
    more = len(profile.operator_types) - len(shown)
    table = Table(
        title=f"Profile of {profile.model}: time per operator type"
        + (f" (top {len(shown)} of {len(profile.operator_types)})" if more else ""),
        caption=words.profile_caption(profile),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("op type", no_wrap=True)
    for header in ("nodes", "time µs", "% of time", "FLOPs"):
        table.add_column(header, justify="right", no_wrap=True)
    for op in shown:
        table.add_row(
            Text(op.op_type),
            str(op.nodes),
            words.time_us_text(op.time_us),
            words.percent_text(op.time_percent),
            words.flops_text(op.flops),
        )
    return table


def print_optimization(report: OptimizationReport, console: Console | None = None) -> None:
    """Summary, candidates table, then each profile (the original's, then the chosen model's)."""
    console = console or Console()
    if not console.is_terminal and not console.record:
        # A file or a pipe: no terminal width to fit, keep rows whole.
        console = Console(file=console.file, width=220)
    alerts = len(words.headline(report)) if report.phase == "Failed" or report.interrupted else 0
    for position, line in enumerate(words.summary_lines(report)):
        console.print(Text(line, style="bold red" if position < alerts else ""))
    console.print(candidates_table(report))
    for profile in report.profiles:
        console.print(profile_table(profile))
