"""A profile report in the terminal: the trials table and the summary, with rich."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kaliper.report.profile_text import (
    HEADLINE_TOKEN_FIGURE,
    fmt,
    generates,
    headline,
    headline_figures,
    memory_peak_text,
    parameters_text,
    summary_lines,
    throttled_text,
    trial_messages,
)
from kaliper.report.schema import ProfileReport


def trials_table(report: ProfileReport) -> Table:
    # Fits 120 columns: two-line headers, no vertical rules, the figures and verdicts never cut (no_wrap);
    # only the parameters wrap (and the messages, printed whole under the table: trial_messages).
    table = Table(
        title=f"ProfileRun {report.name}: {report.target} ({report.strategy} search)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    tokens = generates(report)
    for column in (
        "trial",
        "parameters",
        "status",
        "tok/s" if tokens else "ok/s",
        f"{HEADLINE_TOKEN_FIGURE.label}\np50 ms" if tokens else "p50\nms",
        f"{HEADLINE_TOKEN_FIGURE.label}\np99 ms" if tokens else "p99\nms",
        "errors",
        "CPU\navg",
        "CPU\npeak",
        "CPU\nthrott",
        "mem\npeak",
        "gen\nCPU",
        "SLO",
        f"{report.currency}\n/1M tok" if generates(report) else f"{report.currency}\n/1M",
    ):
        wraps = column == "parameters"
        table.add_column(
            column,
            justify="left" if column in ("parameters", "status", "SLO") else "right",
            no_wrap=not wraps,
            overflow="fold",
        )
    for trial in report.trials:
        stage, resources = trial.stage, trial.resources
        usage = stage.generator_usage if stage else None
        marker = " *" if trial.index == report.best_trial else ""
        rate, p50, p99 = headline_figures(trial, tokens)
        # Text, not markup: a message or a parameter with brackets ("[Errno 111]") is shown as written.
        table.add_row(
            f"{trial.index}{marker}",
            Text(parameters_text(trial)),
            # The status only: the whole message is printed under the table (trial_messages).
            Text(trial.status),
            fmt(rate, "{:.1f}"),
            fmt(p50),
            fmt(p99),
            fmt(stage.error_rate * 100 if stage else None, "{:.2f}%"),
            fmt(resources.cpu_avg_cores if resources else None, "{:.3f}"),
            fmt(resources.cpu_peak_cores if resources else None, "{:.3f}"),
            throttled_text(trial),
            memory_peak_text(trial),
            fmt(usage.saturation * 100 if usage else None, "{:.0f}%"),
            trial.slo_verdict or "-",
            fmt(trial.unit_cost(), "{:.4f}"),
        )
    return table


def print_report(report: ProfileReport, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal and not console.record:
        # A file or a pipe: no terminal width to fit, keep rows whole.
        console = Console(file=console.file, width=220)
    for line in headline(report):
        console.print(Text(line, style="bold red"))
    console.print(trials_table(report))
    for line in trial_messages(report):  # whole: long messages wrap at the console's width
        console.print(Text(line))
    for line in summary_lines(report):
        console.print(Text(line))
