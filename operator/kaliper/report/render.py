"""A profile report for people: a terminal table and an HTML page with plots that opens offline."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kaliper.api.units import UnitError, format_memory, parse_cpu, parse_duration
from kaliper.report.page import cell, header_row, page, write_page
from kaliper.report.schema import ProfileReport, TrialReport
from kaliper.report.token_text import token_summary

if TYPE_CHECKING:
    import plotly.graph_objects as go

# One colour per trial, never reused within a report: plotly's ten, then its 24 darker ones, then hues spaced
# by the golden angle (distinct however many trials there are).
PALETTE = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52",
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86", "#EB663B", "#511CFB",
    "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16", "#A777F1", "#620042", "#1616A7",
    "#DA60CA", "#6C4516", "#0D2A63", "#AF0038",
)  # fmt: skip
SLO_COLOUR = "crimson"
_LATENCY_OBJECTIVE = re.compile(r"^\s*p(\d+(?:\.\d+)?)\s*<=\s*(\S+)\s*$")


def _latency(trial: TrialReport, percentile: float) -> float | None:
    if trial.stage is None:
        return None
    figure = trial.stage.latency.at(percentile)
    return figure.value_ms if figure else None


def _ttft(trial: TrialReport, percentile: float) -> float | None:
    tokens = trial.stage.tokens if trial.stage is not None else None
    figure = tokens.ttft.at(percentile) if tokens is not None else None
    return figure.value_ms if figure else None


def _headline(trial: TrialReport, tokens: bool) -> tuple[float | None, float | None, float | None]:
    """(throughput, p50, p99) the tables show: output tokens per second and time to first token for a
    generation run, requests per second and latency otherwise."""
    if tokens:
        figures = trial.stage.tokens if trial.stage is not None else None
        rate = figures.output_tokens_per_s if figures is not None else None
        return rate, _ttft(trial, 50), _ttft(trial, 99)
    return trial.stage.throughput_rps if trial.stage else None, _latency(trial, 50), _latency(trial, 99)


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def _parameters(trial: TrialReport) -> str:
    return ", ".join(f"{k}={v}" for k, v in trial.parameters.items())


def configuration_label(trial: TrialReport, level_keys: tuple[str, ...] = ("concurrency", "rate")) -> str:
    return ", ".join(f"{k}={v}" for k, v in trial.parameters.items() if k not in level_keys) or "as deployed"


def colour(position: int) -> str:
    """The colour of the position-th trial of a report."""
    if position < len(PALETTE):
        return PALETTE[position]
    return f"hsl({(position - len(PALETTE)) * 137.508 % 360:.1f}, 70%, 42%)"


def trial_colours(report: ProfileReport) -> dict[int, str]:
    """Trial index -> its colour, the same in every chart and in the table."""
    return {trial.index: colour(position) for position, trial in enumerate(report.trials)}


def parse_latency_objective(objective: str) -> tuple[float, float] | None:
    """(percentile, bound in ms) of a latency SLO check's objective such as "p99 <= 25ms"; None for other
    objectives (error rate, throughput) and anything unreadable."""
    found = _LATENCY_OBJECTIVE.match(objective)
    if found is None:
        return None
    try:
        return float(found.group(1)), parse_duration(found.group(2)) * 1000
    except UnitError:
        return None


def slo_bounds_ms(report: ProfileReport) -> dict[float, float]:
    """The latency bounds of the run's SLO, percentile -> ms, read from its trials' checks (the report does
    not carry the spec)."""
    bounds: dict[float, float] = {}
    for trial in report.trials:
        for check in trial.slo:
            parsed = parse_latency_objective(check.objective)
            if parsed is not None:
                bounds.setdefault(*parsed)
    return dict(sorted(bounds.items()))


def cpu_limit_cores(trial: TrialReport) -> float | None:
    """The trial's CPU limit summed over its replicas, when CPU is one of the swept parameters; None when it
    is not known from the report."""
    value = trial.parameters.get("cpu")
    if value is None:
        return None
    try:
        return float(parse_cpu(value)) * max(trial.replicas, 1)
    except UnitError:
        return None


def all_failed(report: ProfileReport) -> bool:
    return bool(report.trials) and not any(t.status == "Succeeded" for t in report.trials)


def headline(report: ProfileReport) -> list[str]:
    """What must be read first: a run that failed, a run that was interrupted (one line each)."""
    lines = []
    if report.error:
        lines.append(f"FAILED: {report.error}")
    elif all_failed(report):
        first = next((t.message for t in report.trials if t.status == "Failed" and t.message), None)
        lines.append("FAILED: no trial succeeded" + (f"; the first failure: {first}" if first else ""))
    if report.interrupted:
        finished = sum(t.status != "Skipped" for t in report.trials)
        lines.append(
            f"INTERRUPTED: the run was stopped after {finished} of {len(report.trials)} trials; the verdict "
            "and the best configuration cover only those"
        )
    return lines


def _slo_detail(trial: TrialReport) -> list[str]:
    return [f"{c.objective}: {c.observed} ({c.verdict})" for c in trial.slo]


def _generator(trial: TrialReport) -> str:
    usage = trial.stage.generator_usage if trial.stage else None
    if usage is None:
        return "-"
    return f"{usage.cpu_cores:.2f} of {usage.capacity_cores:g} cores ({usage.saturation:.0%})"


def _throttled(trial: TrialReport) -> str:
    r = trial.resources
    return _fmt(r.cpu_throttled_ratio * 100 if r and r.cpu_throttled_ratio is not None else None, "{:.0f}%")


def _memory_peak(trial: TrialReport) -> str:
    r = trial.resources
    return format_memory(r.memory_peak_bytes) if r and r.memory_peak_bytes else "-"


# --- the terminal ----------------------------------------------------------------------------------------


def generates(report: ProfileReport) -> bool:
    """A generation run: its costs are per million output tokens."""
    return any(t.generates for t in report.trials)


def cost_unit(report: ProfileReport) -> str:
    return "output tokens" if generates(report) else "requests"


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
        "ttft\np50 ms" if tokens else "p50\nms",
        "ttft\np99 ms" if tokens else "p99\nms",
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
        rate, p50, p99 = _headline(trial, tokens)
        # Text, not markup: a message or a parameter with brackets ("[Errno 111]") is shown as written.
        table.add_row(
            f"{trial.index}{marker}",
            Text(_parameters(trial)),
            # The status only: the whole message is printed under the table (trial_messages).
            Text(trial.status),
            _fmt(rate, "{:.1f}"),
            _fmt(p50),
            _fmt(p99),
            _fmt(stage.error_rate * 100 if stage else None, "{:.2f}%"),
            _fmt(resources.cpu_avg_cores if resources else None, "{:.3f}"),
            _fmt(resources.cpu_peak_cores if resources else None, "{:.3f}"),
            _throttled(trial),
            _memory_peak(trial),
            _fmt(usage.saturation * 100 if usage else None, "{:.0f}%"),
            trial.slo_verdict or "-",
            _fmt(trial.unit_cost(), "{:.4f}"),
        )
    return table


def trial_messages(report: ProfileReport) -> list[str]:
    """The whole message of every trial that did not succeed (trials skipped for the same reason together)."""
    lines = []
    skipped: dict[str, list[int]] = defaultdict(list)
    for trial in report.trials:
        if trial.status == "Succeeded" or not trial.message:
            continue
        if trial.status == "Skipped":
            skipped[trial.message].append(trial.index)
        else:
            lines.append(f"trial {trial.index} {trial.status}: {trial.message}")
    for message, indices in skipped.items():
        which = f"trial {indices[0]}" if len(indices) == 1 else "trials " + ", ".join(map(str, indices))
        lines.append(f"{which} Skipped: {message}")
    return lines


def summary_lines(report: ProfileReport) -> list[str]:
    lines = [f"verdict: {report.verdict}"]
    if report.best_trial is not None:
        best = next(t for t in report.trials if t.index == report.best_trial)
        throughput = f"{best.stage.throughput_rps:.1f}" if best.stage else "-"
        tokens = best.stage.tokens if best.stage else None
        if tokens is not None:
            tpot = tokens.tpot.at(99)
            figures = (
                f"{tokens.output_tokens_per_s:.0f} output tok/s ({throughput} ok/s), ttft p99 "
                f"{_fmt(_ttft(best, 99))} ms, tpot p99 {_fmt(tpot.value_ms if tpot else None)} ms"
            )
            cost = (
                f"{_fmt(best.cost_per_million_output_tokens, '{:.4f}')} {report.currency} per million output tokens "
                f"({_fmt(best.cost_per_million_tokens, '{:.4f}')} per million tokens in and out)"
            )
        else:
            figures = f"{throughput} ok/s, p99 {_fmt(_latency(best, 99))} ms"
            cost = f"{_fmt(best.cost_per_million_requests, '{:.4f}')} {report.currency} per million requests"
        lines.append(f"best: trial {best.index} ({_parameters(best)}), {figures}, {cost}")
        for detail in _slo_detail(best):
            lines.append(f"  SLO {detail}")
        if report.choice is not None:
            lines.append(f"  choice {report.choice.certainty.lower()}: {report.choice.explanation}")
    r = report.recommendation
    if r is not None:
        lines.append(
            f"recommendation: requests cpu={r.cpu_request} memory={r.memory_request}; limits cpu={r.cpu_limit} "
            f"memory={r.memory_limit}; replicas={r.replicas}"
        )
        lines.append(f"  ({r.rationale})")
    for trial in report.trials:
        if trial.stage is not None and trial.stage.tokens is not None:
            lines.append(f"trial {trial.index} tokens: {token_summary(trial.stage.tokens)}")
        for flag in trial.limited_by:
            lines.append(f"trial {trial.index} limited: {flag}")
        if trial.repetitions:
            verdicts = ", ".join(r.slo_verdict or "-" for r in trial.repetitions)
            rates = ", ".join(f"{r.throughput_rps:.1f}" for r in trial.repetitions)
            lines.append(
                f"trial {trial.index} repetitions: {rates} ok/s (spread {_fmt(trial.spread, '{:.1%}')}); SLO {verdicts}"
            )
    for warning in report.warnings:
        lines.append(f"warning: {warning}")
    lines.append(f"load generation: {report.load_generation_s:.0f} s over {len(report.trials)} trials")
    return lines


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


# --- the HTML page ---------------------------------------------------------------------------------------


def _slo_line(figure: go.Figure, percentile: float, bound_ms: float) -> None:
    figure.add_hline(
        y=bound_ms,
        line={"color": SLO_COLOUR, "dash": "dot", "width": 2},
        annotation_text=html.escape(f"SLO p{percentile:g} <= {bound_ms:g} ms"),
        annotation_position="top left",
        annotation_font_color=SLO_COLOUR,
    )


def _latency_figure(report: ProfileReport, colours: dict[int, str], bounds: dict[float, float]) -> go.Figure | None:
    import plotly.graph_objects as go

    by_config: dict[str, list[TrialReport]] = defaultdict(list)
    for trial in report.trials:
        if trial.stage is not None and trial.stage.latency.percentiles:
            by_config[configuration_label(trial)].append(trial)
    if not by_config:
        return None
    percentiles = sorted({50.0, 99.0, *bounds})
    dashes = {50.0: "solid", 99.0: "dash"}
    figure = go.Figure()
    for label, trials in by_config.items():
        line_colour = colours[trials[0].index]  # a configuration takes the colour of its first trial
        trials.sort(key=lambda t: t.stage.throughput_rps)  # type: ignore[union-attr]
        x = [t.stage.throughput_rps for t in trials]  # type: ignore[union-attr]
        for percentile in percentiles:
            y = [_latency(t, percentile) for t in trials]
            if all(v is None for v in y):
                continue
            figure.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines+markers",
                    name=html.escape(f"{label} p{percentile:g}"),
                    text=[f"t{t.index}" for t in trials],
                    legendgroup=html.escape(label),
                    line={"color": line_colour, "dash": dashes.get(percentile, "dot")},
                )
            )
    for percentile, bound in bounds.items():
        _slo_line(figure, percentile, bound)
    figure.update_layout(
        title="Latency percentiles vs throughput, per configuration",
        xaxis={"title": "successful requests/s", "rangemode": "tozero"},
        yaxis={"title": "latency (ms)", "rangemode": "tozero"},
    )
    return figure


def _token_figures(report: ProfileReport, colours: dict[int, str]) -> list[go.Figure]:
    """Generation runs: time to first token and the gaps between tokens against the load level, and output
    tokens per second against it, a line per configuration."""
    import plotly.graph_objects as go

    by_config: dict[str, list[TrialReport]] = defaultdict(list)
    for trial in report.trials:
        if trial.stage is not None and trial.stage.tokens is not None:
            by_config[configuration_label(trial)].append(trial)
    if not by_config:
        return []
    level_name = "rate" if any("rate" in t.parameters for t in report.trials) else "concurrency"
    latency, rates = go.Figure(), go.Figure()
    for label, trials in by_config.items():
        line_colour = colours[trials[0].index]
        trials.sort(key=lambda t: t.stage.level)  # type: ignore[union-attr]
        x = [t.stage.level for t in trials]  # type: ignore[union-attr]
        series = (
            ("ttft p50", lambda t: t.stage.tokens.ttft.at(50), "solid"),
            ("ttft p99", lambda t: t.stage.tokens.ttft.at(99), "dash"),
            ("itl p99", lambda t: t.stage.tokens.itl_chunk.at(99), "dot"),
        )
        for name, figure_of, dash in series:
            y = [found.value_ms if (found := figure_of(t)) else None for t in trials]
            latency.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    mode="lines+markers",
                    name=html.escape(f"{label} {name}"),
                    legendgroup=html.escape(label),
                    line={"color": line_colour, "dash": dash},
                )
            )
        rates.add_trace(
            go.Scatter(
                x=x,
                y=[t.stage.tokens.output_tokens_per_s for t in trials],  # type: ignore[union-attr]
                mode="lines+markers",
                name=html.escape(label),
                line={"color": line_colour},
            )
        )
    latency.update_layout(
        title=f"Time to first token and gaps between tokens vs {level_name}, per configuration",
        xaxis={"title": level_name, "rangemode": "tozero"},
        yaxis={"title": "ms", "rangemode": "tozero"},
    )
    rates.update_layout(
        title=f"Output tokens/s vs {level_name}, per configuration",
        xaxis={"title": level_name, "rangemode": "tozero"},
        yaxis={"title": "output tokens/s", "rangemode": "tozero"},
    )
    return [latency, rates]


def _usage_figure(report: ProfileReport, colours: dict[int, str]) -> go.Figure | None:
    import plotly.graph_objects as go

    figure = go.Figure()
    for trial in report.trials:
        if not (trial.resources and trial.resources.series):
            continue
        series, group, trial_colour = trial.resources.series, f"t{trial.index}", colours[trial.index]
        t = [p.t_s for p in series]
        figure.add_trace(
            go.Scatter(
                x=t,
                y=[p.cpu_cores for p in series],
                mode="lines",
                name=f"t{trial.index} CPU (cores)",
                legendgroup=group,
                line={"color": trial_colour},
            )
        )
        figure.add_trace(
            go.Scatter(
                x=t,
                y=[p.memory_bytes / 2**20 for p in series],
                mode="lines",
                name=f"t{trial.index} memory (MiB)",
                legendgroup=group,
                yaxis="y2",
                line={"color": trial_colour, "dash": "dot"},
            )
        )
        limit = cpu_limit_cores(trial)
        if limit is not None:
            replicas = f" x {trial.replicas}" if trial.replicas > 1 else ""
            figure.add_trace(
                go.Scatter(
                    x=[min(t), max(t)],
                    y=[limit, limit],
                    mode="lines",
                    name=html.escape(f"t{trial.index} CPU limit ({trial.parameters['cpu']}{replicas})"),
                    legendgroup=group,
                    line={"color": trial_colour, "dash": "longdash", "width": 1},
                )
            )
    if not figure.data:
        return None
    # Both axes from zero: a memory series that wobbles by a few hundred KiB around 100 MiB is flat, not a
    # mountain range.
    figure.update_layout(
        title="CPU and memory over each trial's load (dashed: the trial's CPU limit)",
        xaxis={"title": "seconds into the trial", "rangemode": "tozero"},
        yaxis={"title": "CPU (cores)", "rangemode": "tozero"},
        yaxis2={"title": "memory working set (MiB)", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def _cost_figure(report: ProfileReport, colours: dict[int, str], bounds: dict[float, float]) -> go.Figure | None:
    import plotly.graph_objects as go

    points = [
        (cost, p99, t.index)
        for t in report.trials
        if (cost := t.unit_cost()) is not None and (p99 := t.frontier_p99_ms()) is not None
    ]
    if not points:
        return None
    front = set(report.frontier)
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=[p[0] for p in points],
            y=[p[1] for p in points],
            mode="markers+text",
            name="trials",
            text=[f"t{p[2]}" for p in points],
            textposition="top center",
            marker={
                "size": [16 if p[2] in front else 10 for p in points],
                "color": [colours[p[2]] for p in points],
                "symbol": ["star" if p[2] == report.best_trial else "circle" for p in points],
                "line": {"color": [SLO_COLOUR if p[2] in front else "white" for p in points], "width": 2},
            },
        )
    )
    frontier = sorted((p for p in points if p[2] in front), key=lambda p: p[0])
    figure.add_trace(
        go.Scatter(
            x=[p[0] for p in frontier],
            y=[p[1] for p in frontier],
            mode="lines",
            name="Pareto frontier",
            line={"color": SLO_COLOUR},
        )
    )
    tokens = generates(report)
    if 99.0 in bounds and not tokens:  # the latency objective's line; a generation run's y axis is TTFT
        _slo_line(figure, 99.0, bounds[99.0])
    figure.update_layout(
        title=f"Cost vs p99{' time to first token' if tokens else ''} (Pareto frontier in red; the best trial is a "
        "star)",
        xaxis={"title": f"{html.escape(report.currency)} per million {cost_unit(report)}", "rangemode": "tozero"},
        yaxis={"title": "p99 time to first token (ms)" if tokens else "p99 latency (ms)", "rangemode": "tozero"},
    )
    return figure


def figures(report: ProfileReport) -> list[go.Figure]:
    """The report's charts: latency vs throughput (for generation runs, time to first token and gaps
    between tokens vs load, and output tokens/s vs load), CPU and memory over time, cost vs p99. A chart with
    nothing to show is left out (none at all when every trial failed)."""
    colours = trial_colours(report)
    bounds = slo_bounds_ms(report)
    load = _token_figures(report, colours) if generates(report) else [_latency_figure(report, colours, bounds)]
    found = (*load, _usage_figure(report, colours), _cost_figure(report, colours, bounds))
    return [f for f in found if f is not None]


def _trial_row(report: ProfileReport, trial: TrialReport, trial_colour: str) -> str:
    stage, resources = trial.stage, trial.resources
    marker = " (best)" if trial.index == report.best_trial else ""
    index = (
        f'<td><span class="swatch" style="background:{html.escape(trial_colour)}"></span>'
        f"{trial.index}{html.escape(marker)}</td>"
    )
    message = html.escape(trial.message or "")
    if trial.server_log_tail:
        message += f"<details><summary>server log</summary><pre>{html.escape(trial.server_log_tail)}</pre></details>"
    errors = _fmt(stage.error_rate * 100 if stage else None, "{:.2f}%")
    if stage and stage.errors_by_kind:
        errors += " (" + ", ".join(f"{k} x{n}" for k, n in stage.errors_by_kind.items()) + ")"
    slo = html.escape(trial.slo_verdict or "-")
    if trial.slo:
        slo = f"<b>{slo}</b><br>" + "<br>".join(html.escape(detail) for detail in _slo_detail(trial))
    limited = "<br>".join(html.escape(flag) for flag in trial.limited_by) or "-"
    rate, p50, p99 = _headline(trial, generates(report))
    return (
        "<tr>"
        + index
        + cell(_parameters(trial))
        + cell(trial.status)
        + f'<td class="message">{message}</td>'
        + cell(_fmt(rate, "{:.1f}"))
        + cell(_fmt(p50))
        + cell(_fmt(p99))
        + cell(errors)
        + cell(_fmt(resources.cpu_avg_cores if resources else None, "{:.3f}"))
        + cell(_throttled(trial))
        + cell(_memory_peak(trial))
        + cell(_generator(trial))
        + f"<td>{slo}</td>"
        + cell(_fmt(trial.unit_cost(), "{:.4f}"))
        + f'<td class="message">{limited}</td>'
        + "</tr>"
    )


def html_report(report: ProfileReport) -> str:
    colours = trial_colours(report)
    charts = figures(report)
    alerts = "".join(f'<p class="alert">{html.escape(line)}</p>' for line in headline(report))
    rows = "".join(_trial_row(report, trial, colours[trial.index]) for trial in report.trials)
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report))
    if charts:
        plots = "".join(f.to_html(full_html=False, include_plotlyjs=False) for f in charts)
    elif all_failed(report):
        plots = '<p class="notice">No charts: no trial succeeded, so nothing was measured to plot.</p>'
    else:
        plots = '<p class="notice">No charts: no trial has measurements to plot.</p>'
    headers = (
        "trial",
        "parameters",
        "status",
        "message",
        *(("output tok/s", "ttft p50 ms", "ttft p99 ms") if generates(report) else ("ok/s", "p50 ms", "p99 ms")),
        "errors",
        "CPU avg (cores)",
        "CPU throttled",
        "memory peak",
        "load generator CPU",
        "SLO",
        f"{report.currency} per 1M {cost_unit(report)}",
        "limited by",
    )
    body = f"""{alerts}<h1>ProfileRun {html.escape(report.name)}</h1>
<p>Target {html.escape(report.target)}, {html.escape(report.strategy)} search,
started {report.started_at:%Y-%m-%d %H:%M:%S} UTC.</p>
<ul>{summary}</ul>
<div class="scroll"><table>{header_row(headers)}{rows}</table></div>
{plots}
"""
    return page(f"Kaliper report: {report.name}", body)


def write_html(report: ProfileReport, path: Path) -> Path:
    return write_page(html_report(report), path)
