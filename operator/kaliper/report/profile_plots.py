"""A profile report's charts (plotly): latency or token figures against load, cost at each configuration's
capacity and against p99, a replayed trace over time, CPU and memory over time, figures against the baseline.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from kaliper.measure.figures import ITL, TTFT
from kaliper.report.profile_text import (
    SLO_COLOUR,
    configuration_label,
    configuration_text,
    cost_unit,
    cpu_limit_cores,
    figure_at,
    generates,
    latency_at,
    slo_bounds_ms,
    trial_colours,
)
from kaliper.report.rehearsal_plots import rehearsal_figures
from kaliper.report.schema import FigureComparison, ProfileReport, TrialReport

if TYPE_CHECKING:
    from collections.abc import Callable

    import plotly.graph_objects as go


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

    by_config = _by_configuration(report, lambda t: t.stage is not None and bool(t.stage.latency.percentiles))
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
            y = [latency_at(t, percentile) for t in trials]
            if all(v is None for v in y):
                continue
            line = {"color": line_colour, "dash": dashes.get(percentile, "dot")}
            trial_names = [f"t{t.index}" for t in trials]
            figure.add_trace(_configuration_line(label, f"p{percentile:g}", x=x, y=y, text=trial_names, line=line))
    for percentile, bound in bounds.items():
        _slo_line(figure, percentile, bound)
    _capacity_marks(report, figure, max(bounds) if bounds else 99.0)
    _production_marks(report, figure)
    figure.update_layout(
        title="Latency percentiles vs throughput, per configuration",
        xaxis={"title": "successful requests/s", "rangemode": "tozero"},
        yaxis={"title": "latency (ms)", "rangemode": "tozero"},
    )
    return figure


def _production_marks(report: ProfileReport, figure: go.Figure) -> None:
    """Production held to the profile (`kaliper compare --from-prometheus --html`): each percentile it read, at
    the load it served, with its histogram bucket as the error bar (the profile's replicas of the configuration
    compared: its curves are per trial)."""
    import plotly.graph_objects as go

    production = report.production
    if production is None or not production.figures:
        return
    compared = production.configuration or {}
    replicas = next((max(t.replicas, 1) for t in report.trials if compared.items() <= t.parameters.items()), 1)
    for found in production.figures:
        if "latency" not in found.figure:
            continue
        high = found.observed_high if found.observed_high is not None else found.observed
        low = found.observed_low if found.observed_low is not None else found.observed
        figure.add_trace(
            go.Scatter(
                x=[production.load_per_replica_rps * replicas],
                y=[found.observed],
                mode="markers",
                name=html.escape(f"production {found.figure.split(' ')[0]} ({production.reason})"),
                marker={"size": 12, "symbol": "diamond", "color": "#000000"},
                error_y={"type": "data", "symmetric": False, "array": [high - found.observed],
                         "arrayminus": [found.observed - low]},
            )
        )  # fmt: skip


def _by_configuration(report: ProfileReport, drawn: Callable[[TrialReport], bool]) -> dict[str, list[TrialReport]]:
    """The trials a chart draws, by their configuration's label (a line per configuration)."""
    by_config: dict[str, list[TrialReport]] = defaultdict(list)
    for trial in report.trials:
        if drawn(trial):
            by_config[configuration_label(trial)].append(trial)
    return by_config


def _configuration_line(label: str, name: str, **fields: Any) -> Any:
    """One configuration's line of a figure (a plotly Scatter with markers), grouped with its other lines."""
    import plotly.graph_objects as go

    return go.Scatter(
        mode="lines+markers", name=html.escape(f"{label} {name}"), legendgroup=html.escape(label), **fields
    )


def _capacity_marks(report: ProfileReport, figure: go.Figure, percentile: float) -> None:
    """A star on each configuration's highest load that met the SLO: its capacity, as far as measured."""
    import plotly.graph_objects as go

    by_index = {t.index: t for t in report.trials}
    for capacity in report.capacities:
        trial = by_index.get(capacity.trial) if capacity.trial is not None else None
        if trial is None or trial.stage is None:
            continue
        figure.add_trace(
            go.Scatter(
                x=[trial.stage.throughput_rps],
                y=[latency_at(trial, percentile)],
                mode="markers",
                marker={"symbol": "star", "size": 16, "color": SLO_COLOUR},
                name=html.escape(f"capacity {configuration_label(trial)}: {capacity.interval_text()}"),
            )
        )


def _token_figures(report: ProfileReport, colours: dict[int, str]) -> list[go.Figure]:
    """Generation runs: time to first token and the gaps between tokens against the load level, and output
    tokens per second against it, a line per configuration."""
    import plotly.graph_objects as go

    by_config = _by_configuration(report, lambda t: t.stage is not None and t.stage.tokens is not None)
    if not by_config:
        return []
    level_name = report.level_name or "load level"
    latency, rates = go.Figure(), go.Figure()
    for label, trials in by_config.items():
        line_colour = colours[trials[0].index]
        trials.sort(key=lambda t: t.stage.level)  # type: ignore[union-attr]
        x = [t.stage.level for t in trials]  # type: ignore[union-attr]
        for row, percentile, dash in ((TTFT, 50, "solid"), (TTFT, 99, "dash"), (ITL, 99, "dot")):
            name = f"{row.label} p{percentile}"
            y = [figure_at(t, row, percentile) for t in trials]
            latency.add_trace(_configuration_line(label, name, x=x, y=y, line={"color": line_colour, "dash": dash}))
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


def _shown_trial(report: ProfileReport) -> int | None:
    """The trial the over-time charts show at first: the chosen one, else the first with a series."""
    with_series = [t.index for t in report.trials if t.resources and t.resources.series]
    return report.best_trial if report.best_trial in with_series else next(iter(with_series), None)


def _by_trial(trace: Any, trial: int, shown: int | None, name: str, **fields: Any) -> Any:
    """One trial's trace (a plotly Scatter, lines unless `fields` say otherwise, or a Bar), named and grouped
    by its trial: drawn for the shown trial, a click in the legend away for the others (eight trials' lines
    at once hide each other)."""
    if trace.__name__ == "Scatter":
        fields.setdefault("mode", "lines")
    visible = True if trial == shown else "legendonly"
    return trace(name=f"t{trial} {name}", legendgroup=f"t{trial}", visible=visible, **fields)


def _usage_figures(report: ProfileReport, colours: dict[int, str]) -> list[go.Figure]:
    """CPU over each trial's load, and memory, one chart each: the chosen trial drawn, every other trial one
    click away in the legend (_by_trial)."""
    import plotly.graph_objects as go

    shown = _shown_trial(report)
    cpu, memory = go.Figure(), go.Figure()
    for trial in report.trials:
        if not (trial.resources and trial.resources.series):
            continue
        series, colour = trial.resources.series, colours[trial.index]
        t = [p.t_s for p in series]
        cpu_cores = [p.cpu_cores for p in series]
        cpu.add_trace(_by_trial(go.Scatter, trial.index, shown, "CPU", x=t, y=cpu_cores, line={"color": colour}))
        limit = cpu_limit_cores(trial)
        if limit is not None:
            replicas = f" x {trial.replicas}" if trial.replicas > 1 else ""
            name = html.escape(f"limit ({trial.parameters['cpu']}{replicas})")
            line = {"color": colour, "dash": "longdash", "width": 1}
            cpu.add_trace(
                _by_trial(go.Scatter, trial.index, shown, name, x=[min(t), max(t)], y=[limit, limit], line=line)
            )
        mib = [p.memory_bytes / 2**20 for p in series]
        memory.add_trace(_by_trial(go.Scatter, trial.index, shown, "memory", x=t, y=mib, line={"color": colour}))
    if not cpu.data:
        return []
    # Both axes from zero: a memory series that wobbles by a few hundred KiB around 100 MiB is flat, not a
    # mountain range.
    cpu.update_layout(
        title=f"CPU over the load of trial {shown} (dashed: its CPU limit; click a trial in the legend to add it)",
        xaxis={"title": "seconds into the trial", "rangemode": "tozero"},
        yaxis={"title": "CPU (cores)", "rangemode": "tozero"},
    )
    memory.update_layout(
        title=f"Memory over the load of trial {shown} (click a trial in the legend to add it)",
        xaxis={"title": "seconds into the trial", "rangemode": "tozero"},
        yaxis={"title": "memory working set (MiB)", "rangemode": "tozero"},
    )
    return [cpu, memory]


def _replay_figure(report: ProfileReport, colours: dict[int, str]) -> go.Figure | None:
    """A replayed trace over time: the sends its clock asked for in each window (bars) beside the p99 from the
    intended send in that window and the late sends; the chosen trial drawn, the others a click away."""
    import plotly.graph_objects as go

    replays = [
        t for t in report.trials if t.stage is not None and any(w.scheduled is not None for w in t.stage.windows)
    ]
    if not replays:
        return None
    shown = report.best_trial if report.best_trial in {t.index for t in replays} else replays[0].index
    figure = go.Figure()
    for trial in replays:
        assert trial.stage is not None
        windows, colour = trial.stage.windows, colours[trial.index]
        t = [w.start_s for w in windows]
        asked = [w.scheduled for w in windows]
        bars = {"color": colour, "opacity": 0.35}
        figure.add_trace(
            _by_trial(go.Bar, trial.index, shown, "sends the trace asked", x=t, y=asked, marker=bars, offset=0)
        )
        late, crosses = [w.late_sends for w in windows], {"color": colour, "symbol": "x"}
        figure.add_trace(
            _by_trial(go.Scatter, trial.index, shown, "late sends", x=t, y=late, mode="markers", marker=crosses)
        )
        p99 = [w.p99_ms for w in windows]
        figure.add_trace(
            _by_trial(
                go.Scatter,
                trial.index,
                shown,
                "p99 (ms)",
                x=t,
                y=p99,
                mode="lines+markers",
                yaxis="y2",
                line={"color": colour},
            )
        )
    figure.update_layout(
        title=f"The trace over time, trial {shown}: its sends per window beside the p99 from the intended send",
        xaxis={"title": "seconds into the stage", "rangemode": "tozero"},
        yaxis={"title": "sends per window (and late sends)", "rangemode": "tozero"},
        yaxis2={"title": "p99 (ms)", "overlaying": "y", "side": "right", "rangemode": "tozero"},
    )
    return figure


def _capacity_cost_figure(report: ProfileReport, colours: dict[int, str]) -> go.Figure | None:
    """What each configuration costs at its capacity, with the 95% interval: the chart the choice is made on."""
    import plotly.graph_objects as go

    by_index = {t.index: t for t in report.trials}
    priced = [
        (c, by_index[c.trial])
        for c in report.capacities
        if c.unit_cost is not None and c.trial is not None and c.trial in by_index
    ]
    if not priced:
        return None
    priced.sort(key=lambda pair: pair[0].unit_cost or 0.0, reverse=True)  # the cheapest on top
    figure = go.Figure()
    for capacity, trial in priced:
        cost = capacity.unit_cost or 0.0
        chosen = trial.index == report.best_trial
        label = f"{configuration_label(trial)} at {capacity.level_name} {capacity.met:g}"
        figure.add_trace(
            go.Scatter(
                x=[cost],
                y=[html.escape(label)],
                mode="markers",
                name=html.escape(label + (" (chosen)" if chosen else "")),
                marker={
                    "size": 16 if chosen else 11,
                    "symbol": "star" if chosen else "circle",
                    "color": colours[trial.index],
                },
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [(capacity.unit_cost_high or cost) - cost],
                    "arrayminus": [cost - (capacity.unit_cost_low or cost)],
                },
                showlegend=False,
            )
        )
    figure.update_layout(
        title=f"Cost per million {cost_unit(report)} at each configuration's capacity (95% interval; the choice is a "
        "star)",
        xaxis={"title": f"{html.escape(report.currency)} per million {cost_unit(report)}", "rangemode": "tozero"},
        yaxis={"automargin": True},
        height=max(260, 90 + 40 * len(priced)),
    )
    return figure


def _quality_figure(report: ProfileReport) -> go.Figure | None:
    """Each configuration's quality score (95% interval) against its cost, the floor drawn: what the choice
    weighed besides the SLO. Without prices, the scores side by side."""
    import plotly.graph_objects as go

    scored = [r for r in report.configurations if r.quality is not None and r.quality.verdict != "Unknown"]
    if not scored:
        return None
    priced = all(r.cost is not None for r in scored)
    figure = go.Figure()
    for row in scored:
        quality = row.quality
        assert quality is not None
        label = configuration_text(row.parameters)
        held = quality.verdict == "Below"
        figure.add_trace(
            go.Scatter(
                x=[row.cost if priced else html.escape(label)],
                y=[quality.score * 100],
                mode="markers",
                name=html.escape(label + (" (chosen)" if row.chosen else " (held back)" if held else "")),
                text=[html.escape(f"{label}: {quality.observed}")],
                hoverinfo="text",
                marker={
                    "size": 16 if row.chosen else 11,
                    "symbol": "star" if row.chosen else "x" if held else "circle",
                    "color": SLO_COLOUR if held else None,
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [(quality.ci_high - quality.score) * 100],
                    "arrayminus": [(quality.score - quality.ci_low) * 100],
                },
            )
        )
    floor = next((r.quality.floor for r in scored if r.quality is not None and r.quality.floor is not None), None)
    if floor is not None:
        figure.add_hline(y=floor * 100, line={"color": SLO_COLOUR, "dash": "dash"}, annotation_text="floor")
    x_title = f"{html.escape(report.currency)} per million {cost_unit(report)}" if priced else "configuration"
    figure.update_layout(
        title="Quality against cost (95% interval; the choice is a star, a configuration held back a cross)",
        xaxis={"title": x_title},
        yaxis={"title": "rows answered right, %", "range": [0, 105]},
    )
    return figure


def _workload_figure(report: ProfileReport) -> go.Figure | None:
    """The token histograms a workload was fitted to (payload.prompts.fromPrometheus), bucket by bucket, beside
    the fitted lognormals' shares: how well the prompts sent resemble what the servers served."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fitted = report.workload
    if fitted is None or not (fitted.input_buckets or fitted.output_buckets):
        return None
    figure = make_subplots(rows=1, cols=2, subplot_titles=("input tokens", "output tokens"))
    for column, buckets in ((1, fitted.input_buckets), (2, fitted.output_buckets)):
        labels = [f"≤{b.upper:g}" if b.upper is not None else "more" for b in buckets]
        first = column == 1
        figure.add_trace(
            go.Bar(
                x=labels,
                y=[b.observed for b in buckets],
                name="the servers' histogram",
                showlegend=first,
                marker={"color": "#9aa5b1"},
            ),
            row=1,
            col=column,
        )
        figure.add_trace(
            go.Scatter(
                x=labels,
                y=[b.fitted for b in buckets],
                mode="lines+markers",
                name="the fitted lognormal",
                showlegend=first,
                line={"color": "#c0392b"},
            ),
            row=1,
            col=column,
        )
    figure.update_yaxes(title_text="share of requests", tickformat=".0%", rangemode="tozero")
    figure.update_layout(title="The workload fitted from Prometheus against the histograms it came from", height=360)
    return figure


def comparison_figures(report: ProfileReport) -> list[go.Figure]:
    """Against the baseline, one chart per figure: each configuration and load in both runs, with their
    intervals (a figure beyond every answer has no point)."""
    import plotly.graph_objects as go

    by_figure: dict[str, list[FigureComparison]] = defaultdict(list)
    for found in report.comparison:
        by_figure[found.figure].append(found)
    charts = []
    for name, found in by_figure.items():
        labels = [html.escape(", ".join(f"{k}={v}" for k, v in f.parameters.items()) or "as deployed") for f in found]
        figure = go.Figure()
        for run, value, low, high, colour_of in (
            ("baseline", "baseline", "baseline_low", "baseline_high", "#777777"),
            ("this run", "value", "low", "high", "#636EFA"),
        ):
            points = [getattr(f, value) for f in found]
            figure.add_trace(
                go.Scatter(
                    x=labels,
                    y=points,
                    mode="markers",
                    name=run,
                    marker={"size": 11, "color": colour_of},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [_above(getattr(f, high), p) for f, p in zip(found, points, strict=True)],
                        "arrayminus": [_above(p, getattr(f, low)) for f, p in zip(found, points, strict=True)],
                    },
                )
            )
        verdicts = ", ".join(sorted({f.verdict for f in found}))
        unit = found[0].unit or report.currency
        figure.update_layout(
            title=html.escape(f"{name} against the baseline ({verdicts})"),
            yaxis={"title": html.escape(f"{name} ({unit})"), "rangemode": "tozero"},
            xaxis={"automargin": True},
            height=360,
        )
        charts.append(figure)
    return charts


def _above(upper: float | None, lower: float | None) -> float:
    """How far `upper` lies above `lower` (0 where either is unknown): an error bar's length."""
    return upper - lower if upper is not None and lower is not None else 0.0


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
    costs, p99s, indexes = (list(column) for column in zip(*points, strict=True))
    marker = {
        "size": [16 if i in front else 10 for i in indexes],
        "color": [colours[i] for i in indexes],
        "symbol": ["star" if i == report.best_trial else "circle" for i in indexes],
        "line": {"color": [SLO_COLOUR if i in front else "white" for i in indexes], "width": 2},
    }
    names = [f"t{i}" for i in indexes]
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=costs, y=p99s, mode="markers+text", name="trials", text=names, textposition="top center", marker=marker
        )
    )
    frontier = sorted((cost, p99) for cost, p99, i in points if i in front)
    figure.add_trace(
        go.Scatter(
            x=[cost for cost, _ in frontier],
            y=[p99 for _, p99 in frontier],
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
    """The report's charts, one per question: where each configuration stops meeting the SLO (latency vs
    throughput; for generation runs, time to first token and gaps between tokens vs load, and output tokens/s vs
    load), what each costs at its capacity, cost against p99, quality against cost, a replayed trace's sends, an
    autoscaler's rehearsal (replicas and attainment over time, its scale-ups, cost against attainment), a fitted
    workload's histograms, CPU and memory over time, and each figure against the baseline. A chart with nothing to
    show is left out (none at all when every trial failed)."""
    colours = trial_colours(report)
    bounds = slo_bounds_ms(report)
    load = _token_figures(report, colours) if generates(report) else [_latency_figure(report, colours, bounds)]
    found = (
        *load,
        _capacity_cost_figure(report, colours),
        _cost_figure(report, colours, bounds),
        _quality_figure(report),
        _replay_figure(report, colours),
        *rehearsal_figures(report, colours),
        _workload_figure(report),
        *_usage_figures(report, colours),
        *comparison_figures(report),
    )
    return [f for f in found if f is not None]
