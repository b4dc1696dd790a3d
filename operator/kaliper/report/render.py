"""A profile report for people: a terminal table and an HTML page with plots that opens offline."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kaliper.api.units import format_memory
from kaliper.report.schema import ProfileReport, TrialReport


def _latency(trial: TrialReport, percentile: float) -> float | None:
    if trial.stage is None:
        return None
    figure = trial.stage.latency.at(percentile)
    return figure.value_ms if figure else None


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def configuration_label(trial: TrialReport, level_keys: tuple[str, ...] = ("concurrency", "rate")) -> str:
    return ", ".join(f"{k}={v}" for k, v in trial.parameters.items() if k not in level_keys) or "as deployed"


def trials_table(report: ProfileReport) -> Table:
    table = Table(title=f"ProfileRun {report.name}: {report.target} ({report.strategy} search)", show_lines=False)
    for column in (
        "trial",
        "parameters",
        "status",
        "ok/s",
        "p50 ms",
        "p99 ms",
        "errors",
        "CPU avg",
        "CPU peak",
        "throttled",
        "mem peak",
        "SLO",
        f"{report.currency}/1M",
    ):
        table.add_column(column, justify="right" if column not in ("parameters", "status", "SLO") else "left")
    for trial in report.trials:
        stage, resources = trial.stage, trial.resources
        slo = trial.slo_verdict or "-"
        marker = " *" if trial.index == report.best_trial else ""
        table.add_row(
            f"{trial.index}{marker}",
            ", ".join(f"{k}={v}" for k, v in trial.parameters.items()),
            trial.status if trial.status == "Succeeded" else f"{trial.status}: {(trial.message or '')[:50]}",
            _fmt(stage.throughput_rps if stage else None, "{:.1f}"),
            _fmt(_latency(trial, 50)),
            _fmt(_latency(trial, 99)),
            _fmt(stage.error_rate * 100 if stage else None, "{:.2f}%"),
            _fmt(resources.cpu_avg_cores if resources else None, "{:.3f}"),
            _fmt(resources.cpu_peak_cores if resources else None, "{:.3f}"),
            _fmt(
                resources.cpu_throttled_ratio * 100
                if resources and resources.cpu_throttled_ratio is not None
                else None,
                "{:.0f}%",
            ),
            format_memory(resources.memory_peak_bytes) if resources and resources.memory_peak_bytes else "-",
            slo,
            _fmt(trial.cost_per_million_requests, "{:.4f}"),
        )
    return table


def summary_lines(report: ProfileReport) -> list[str]:
    lines = [f"verdict: {report.verdict}"]
    if report.error:
        lines.append(f"error: {report.error}")
    if report.best_trial is not None:
        best = next(t for t in report.trials if t.index == report.best_trial)
        lines.append(
            f"best: trial {best.index} ({', '.join(f'{k}={v}' for k, v in best.parameters.items())}), "
            f"{best.stage.throughput_rps:.1f} ok/s, p99 {_fmt(_latency(best, 99))} ms, "
            f"{_fmt(best.cost_per_million_requests, '{:.4f}')} {report.currency} per million requests"
        )
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
        for flag in trial.limited_by:
            lines.append(f"trial {trial.index} limited: {flag}")
    lines.append(f"load generation: {report.load_generation_s:.0f} s over {len(report.trials)} trials")
    return lines


def print_report(report: ProfileReport, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal:
        console = Console(width=220)  # a file or a pipe: no terminal width to fit, keep rows whole
    console.print(trials_table(report))
    for line in summary_lines(report):
        console.print(line, highlight=False)


def pareto_front(points: list[tuple[float, float, int]]) -> list[int]:
    """Indices of the points no other point beats on both cost and latency (lower is better for both)."""
    front = []
    for cost, latency, index in points:
        dominated = any(c <= cost and lt <= latency and (c, lt) != (cost, latency) for c, lt, _ in points)
        if not dominated:
            front.append(index)
    return front


def html_report(report: ProfileReport) -> str:
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    figures = []
    by_config: dict[str, list[TrialReport]] = defaultdict(list)
    for trial in report.trials:
        if trial.stage is not None:
            by_config[configuration_label(trial)].append(trial)

    latency = go.Figure()
    for label, trials in by_config.items():
        trials.sort(key=lambda t: t.stage.throughput_rps)  # type: ignore[union-attr]
        x = [t.stage.throughput_rps for t in trials]  # type: ignore[union-attr]
        latency.add_trace(
            go.Scatter(x=x, y=[_latency(t, 50) for t in trials], mode="lines+markers", name=f"{label} p50")
        )
        latency.add_trace(
            go.Scatter(
                x=x,
                y=[_latency(t, 99) for t in trials],
                mode="lines+markers",
                name=f"{label} p99",
                line={"dash": "dash"},
            )
        )
    latency.update_layout(
        title="Latency percentiles vs throughput, per configuration",
        xaxis_title="successful requests/s",
        yaxis_title="latency (ms)",
    )
    figures.append(latency)

    usage = go.Figure()
    for trial in report.trials:
        if trial.resources and trial.resources.series:
            series = trial.resources.series
            usage.add_trace(
                go.Scatter(
                    x=[p.t_s for p in series],
                    y=[p.cpu_cores for p in series],
                    mode="lines",
                    name=f"t{trial.index} CPU (cores)",
                )
            )
            usage.add_trace(
                go.Scatter(
                    x=[p.t_s for p in series],
                    y=[p.memory_bytes / 2**20 for p in series],
                    mode="lines",
                    name=f"t{trial.index} memory (MiB)",
                    yaxis="y2",
                    line={"dash": "dot"},
                )
            )
    usage.update_layout(
        title="CPU and memory over each trial's load",
        xaxis_title="seconds into the trial",
        yaxis={"title": "CPU (cores)"},
        yaxis2={"title": "memory working set (MiB)", "overlaying": "y", "side": "right"},
        legend={"orientation": "h", "y": -0.25},
    )
    figures.append(usage)

    points = [
        (t.cost_per_million_requests, _latency(t, 99), t.index)
        for t in report.trials
        if t.cost_per_million_requests is not None and _latency(t, 99) is not None
    ]
    front = set(pareto_front(points))  # type: ignore[arg-type]
    cost = go.Figure()
    cost.add_trace(
        go.Scatter(
            x=[p[0] for p in points],
            y=[p[1] for p in points],
            mode="markers+text",
            name="trials",
            text=[f"t{p[2]}" for p in points],
            textposition="top center",
            marker={
                "size": [14 if p[2] in front else 8 for p in points],
                "color": ["crimson" if p[2] in front else "steelblue" for p in points],
            },
        )
    )
    frontier = sorted((p for p in points if p[2] in front), key=lambda p: p[0])
    cost.add_trace(
        go.Scatter(
            x=[p[0] for p in frontier],
            y=[p[1] for p in frontier],
            mode="lines",
            name="Pareto frontier",
            line={"color": "crimson"},
        )
    )
    cost.update_layout(
        title="Cost vs p99 (Pareto frontier in red)",
        xaxis_title=f"{report.currency} per million requests",
        yaxis_title="p99 latency (ms)",
    )
    figures.append(cost)

    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>"
        for row in (
            (
                t.index,
                ", ".join(f"{k}={v}" for k, v in t.parameters.items()),
                t.status,
                _fmt(t.stage.throughput_rps if t.stage else None, "{:.1f}"),
                _fmt(_latency(t, 50)),
                _fmt(_latency(t, 99)),
                t.slo_verdict or "-",
                _fmt(t.cost_per_million_requests, "{:.4f}"),
                t.message or "",
            )
            for t in report.trials
        )
    )
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report))
    plots = "".join(f.to_html(full_html=False, include_plotlyjs=False) for f in figures)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Kaliper report: {html.escape(report.name)}</title>
<script type="text/javascript">{get_plotlyjs()}</script>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px}}</style></head>
<body><h1>ProfileRun {html.escape(report.name)}</h1>
<p>Target {html.escape(report.target)}, {html.escape(report.strategy)} search,
started {report.started_at:%Y-%m-%d %H:%M:%S} UTC.</p>
<ul>{summary}</ul>
<table><tr><th>trial</th><th>parameters</th><th>status</th><th>ok/s</th><th>p50 ms</th><th>p99 ms</th><th>SLO</th>
<th>{html.escape(report.currency)}/1M</th><th>message</th></tr>{rows}</table>
{plots}
</body></html>
"""


def write_html(report: ProfileReport, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_report(report))
    return path
