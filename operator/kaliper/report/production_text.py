"""A production check in words (status.production, a report's `production`): what production served, each
percentile against the profile's, and the verdict."""

from __future__ import annotations

from kaliper.api.modeldeployment import PredictionFigure, ProductionStatus


def _edge(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else "unbounded"


def _band(value: float, low: float | None, high: float | None, unit: str) -> str:
    return f"{value:.4g}{unit} ({_edge(low)}-{_edge(high)})"


def _figure_line(figure: PredictionFigure) -> str:
    unit = " ms" if "(ms)" in figure.figure else ""
    observed = _band(figure.observed, figure.observed_low, figure.observed_high, unit)
    predicted = _band(figure.predicted, figure.predicted_low, figure.predicted_high, unit)
    seen = "inside" if figure.inside else "OUTSIDE"
    return f"  {figure.figure.split(' (')[0]}: {observed} against {predicted}, {figure.error:+.1%}, {seen}"


def production_lines(status: ProductionStatus) -> list[str]:
    profiled = status.profiled_rps
    measured = f" (profiled {profiled[0]:.4g}-{profiled[-1]:.4g} requests/s)" if profiled else ""
    lines = [
        f"production over {status.window}: {status.requests} requests on {status.replicas:g} replicas, "
        f"{status.load_per_replica_rps:.4g} requests/s per replica{measured}",
        *(_figure_line(f) for f in status.figures),
    ]
    verdict = {True: "holds", False: "does not hold", None: "not judged"}[status.holds]
    lines.append(f"prediction {verdict}: {status.reason}: {status.message}")
    return lines
