"""An autoscaler's rehearsal in charts (plotly): the replicas and the SLO's attainment on one time axis with the
load, each scale-up's way to serving, and each rehearsed setting's cost against its attainment."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from kaliper.report.profile_text import SLO_COLOUR, cost_unit, parameters_text
from kaliper.report.schema import ProfileReport, Rehearsal, TrialReport

if TYPE_CHECKING:
    import plotly.graph_objects as go


def rehearsal_figures(report: ProfileReport, colours: dict[int, str]) -> list[go.Figure]:
    """The rehearsal's charts, none for a run without an autoscaled target."""
    rehearsed = [t for t in report.trials if t.rehearsal is not None and t.stage is not None]
    if not rehearsed:
        return []
    shown = report.best_trial if report.best_trial in {t.index for t in rehearsed} else rehearsed[0].index
    found = [_over_time(rehearsed, shown, colours), _scale_ups(rehearsed), _cost_against_attainment(report, rehearsed)]
    return [f for f in found if f is not None]


def _visible(trial: TrialReport, shown: int) -> bool | str:
    return True if trial.index == shown else "legendonly"


def _over_time(rehearsed: list[TrialReport], shown: int, colours: dict[int, str]) -> go.Figure:
    """Requests per window (bars), the replicas desired and ready (steps) and the share of each window's requests
    within the SLO (right axis), the chosen trial drawn and the others a click away."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for trial in rehearsed:
        rehearsal, stage, colour = trial.rehearsal, trial.stage, colours[trial.index]
        assert rehearsal is not None and stage is not None
        end = stage.warmup_s + stage.measured_s
        group = {"legendgroup": f"t{trial.index}", "visible": _visible(trial, shown)}
        windows = rehearsal.windows
        figure.add_trace(
            go.Bar(
                name=f"t{trial.index} requests per window",
                x=[w.start_s for w in windows],
                y=[w.requests for w in windows],
                offset=0,
                marker={"color": colour, "opacity": 0.25},
                **group,
            )
        )
        times = [c.at_s for c in rehearsal.replicas] + [end]
        steps = [
            ("replicas desired", [c.desired for c in rehearsal.replicas], "dot"),
            ("replicas ready", [c.ready for c in rehearsal.replicas], "solid"),
        ]
        if all(c.serving is not None for c in rehearsal.replicas):
            steps.append(("replicas serving", [c.serving for c in rehearsal.replicas], "dash"))
        for name, values, dash in steps:
            figure.add_trace(
                go.Scatter(
                    name=f"t{trial.index} {name}",
                    x=times,
                    y=[*values, values[-1]],
                    mode="lines",
                    line={"shape": "hv", "color": colour, "dash": dash},
                    yaxis="y2",
                    **group,
                )
            )
        figure.add_trace(
            go.Scatter(
                name=f"t{trial.index} within the SLO",
                x=[w.start_s for w in windows],
                y=[100 * w.attainment for w in windows],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [100 * (w.attainment_ci_high - w.attainment) for w in windows],
                    "arrayminus": [100 * (w.attainment - w.attainment_ci_low) for w in windows],
                },
                mode="lines+markers",
                line={"color": SLO_COLOUR},
                marker={"symbol": ["x" if w.scaling else "circle" for w in windows]},
                yaxis="y3",
                **group,
            )
        )
    figure.update_layout(
        title=f"The autoscaler under the load, trial {shown}: replicas and the share of requests within the SLO "
        "(x: a window while a scale-up was under way)",
        xaxis={"title": "seconds into the stage", "rangemode": "tozero", "domain": [0, 0.88]},
        yaxis={"title": "requests per window", "rangemode": "tozero"},
        yaxis2={"title": "replicas", "overlaying": "y", "side": "right", "rangemode": "tozero", "dtick": 1},
        yaxis3={
            "title": "% within the SLO",
            "overlaying": "y",
            "side": "right",
            "position": 0.96,
            "anchor": "free",
            "range": [0, 105],
        },
    )
    return figure


STAGES = (
    ("created", "created_s"),
    ("scheduled", "scheduled_s"),
    ("running", "started_s"),
    ("ready", "ready_s"),
    ("first answer", "first_answer_s"),
)


def _scale_ups(rehearsed: list[TrialReport]) -> go.Figure | None:
    """Each replica added under the load, from the autoscaler's decision: to its pod's creation, to being bound to
    a node, to its container running, to ready, to its first answer where its server says (stacked)."""
    import plotly.graph_objects as go

    rows = [(t, s) for t in rehearsed for s in _rehearsal(t).scale_ups]
    if not rows:
        return None
    labels = [f"t{t.index} {s.replica}" for t, s in rows]
    figure = go.Figure()
    for stage, (name, field) in enumerate(STAGES):
        before = STAGES[stage - 1][1] if stage else None
        spans = []
        for _, scale_up in rows:
            at, previous = getattr(scale_up, field), getattr(scale_up, before) if before else 0.0
            spans.append(at - (previous or 0.0) if at is not None else None)
        figure.add_trace(go.Bar(name=f"to {name}", y=labels, x=spans, orientation="h"))
    figure.update_layout(
        title="Each scale-up, from the autoscaler's decision to serving",
        barmode="stack",
        xaxis={"title": "seconds from the decision", "rangemode": "tozero"},
        yaxis={"autorange": "reversed"},
    )
    return figure


def _cost_against_attainment(report: ProfileReport, rehearsed: list[TrialReport]) -> go.Figure | None:
    """Each rehearsed trial's cost over the whole shape (priced for the replicas it held) against its share of
    requests within the SLO, with that share's interval."""
    import plotly.graph_objects as go

    priced = [t for t in rehearsed if t.unit_cost() is not None and _rehearsal(t).attainment is not None]
    if not priced:
        return None
    figure = go.Figure()
    for trial in priced:
        rehearsal = _rehearsal(trial)
        assert rehearsal.attainment is not None
        low, high = rehearsal.attainment_ci_low or 0.0, rehearsal.attainment_ci_high or 0.0
        figure.add_trace(
            go.Scatter(
                name=f"t{trial.index} {parameters_text(trial)}",
                x=[trial.unit_cost()],
                y=[100 * rehearsal.attainment],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [100 * (high - rehearsal.attainment)],
                    "arrayminus": [100 * (rehearsal.attainment - low)],
                },
                mode="markers",
                marker={"size": 12, "symbol": "star" if trial.index == report.best_trial else "circle"},
                text=[f"{rehearsal.mean_replicas:.2f} replicas held on average"],
            )
        )
    figure.update_layout(
        title="Each autoscaler setting: its cost over the load's shape against its requests within the SLO (the "
        "chosen one is a star)",
        xaxis={"title": f"{html.escape(report.currency)} per million {cost_unit(report)}", "rangemode": "tozero"},
        yaxis={"title": "% of requests within the SLO", "range": [0, 105]},
    )
    return figure


def _rehearsal(trial: TrialReport) -> Rehearsal:
    assert trial.rehearsal is not None
    return trial.rehearsal
