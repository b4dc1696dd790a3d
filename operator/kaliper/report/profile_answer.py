"""The answer a profile report leads with (pure): which configuration to run, what it costs at its capacity,
how many replicas, how certain the choice is, and what held each other configuration back. The HTML page
opens with it; the figures it rests on follow in the table and the charts."""

from __future__ import annotations

from collections import defaultdict

from kaliper.api.profilerun.status import Capacity
from kaliper.report.profile_text import (
    configuration_label,
    cost_unit,
    fmt,
    parameters_text,
    replicas_interval,
)
from kaliper.report.schema import ProfileReport, TrialReport

LEVEL_KEYS = ("concurrency", "rate")


def configurations(report: ProfileReport) -> dict[str, list[TrialReport]]:
    """Each configuration's trials (its load levels), in the order the report lists them."""
    grouped: dict[str, list[TrialReport]] = defaultdict(list)
    for trial in report.trials:
        grouped[configuration_label(trial)].append(trial)
    return dict(grouped)


def capacity_for(report: ProfileReport, trial: TrialReport) -> Capacity | None:
    """The capacity of the configuration `trial` belongs to, where the report has one."""
    configuration = {k: v for k, v in trial.parameters.items() if k not in LEVEL_KEYS}
    return next((c for c in report.capacities if c.parameters == configuration), None)


def _cost_text(report: ProfileReport, cost: float, low: float | None, high: float | None) -> str:
    interval = f" (95%: {fmt(low, '{:.4f}')}-{fmt(high, '{:.4f}')})" if low is not None else ""
    return f"{cost:.4f} {report.currency} per million {cost_unit(report)}{interval}"


def _unit_cost(trials: list[TrialReport]) -> float | None:
    """What a configuration costs as the choice weighs it: at its cheapest trial that met the SLO (that
    succeeded, without one)."""
    return min((c for t in trials if _qualifies(t) and (c := t.unit_cost()) is not None), default=None)


def _qualifies(trial: TrialReport) -> bool:
    """Succeeded and met the SLO (a succeeded trial has no verdict only when the run has no SLO)."""
    return trial.status == "Succeeded" and trial.slo_verdict in ("Met", None)


def answer_rows(report: ProfileReport) -> list[tuple[str, str]]:
    """(what, the answer) rows: the verdict, then for the chosen trial its configuration, cost, capacity,
    replicas, resources and how certain the choice is, then the baseline comparison."""
    reason = f" ({report.verdict_reason})" if report.verdict_reason and report.verdict != "Met" else ""
    rows = [("verdict", f"{report.verdict}{reason}")]
    best = next((t for t in report.trials if t.index == report.best_trial), None)
    if best is not None:
        level = ", ".join(f"{k}={v}" for k, v in best.parameters.items() if k in LEVEL_KEYS)
        at = f" at {level}" if level else ""
        rows.append(("run", f"{configuration_label(best)}{at} (trial {best.index})"))
        capacity = capacity_for(report, best)
        priced = capacity is not None and capacity.unit_cost is not None
        at_capacity = priced and capacity.trial == best.index  # type: ignore[union-attr]
        if at_capacity:
            assert capacity is not None and capacity.unit_cost is not None
            cost = _cost_text(report, capacity.unit_cost, capacity.unit_cost_low, capacity.unit_cost_high)
            rows.append(("cost at its capacity", cost))
        elif (cost_value := best.unit_cost()) is not None:
            rows.append(("cost", _cost_text(report, cost_value, None, None) + at))
        if capacity is not None:
            bracket = f"{capacity.level_name} {capacity.interval_text()}"
            if priced and not at_capacity:  # cheaper below its capacity: what the capacity costs, for sizing
                assert capacity.unit_cost is not None
                there = _cost_text(report, capacity.unit_cost, capacity.unit_cost_low, capacity.unit_cost_high)
                bracket += f"; {there} there"
            rows.append(("capacity under the SLO", bracket))
    r = report.recommendation
    if r is not None:
        if r.replicas is not None and r.replicas_low is not None:
            rows.append(("replicas", f"{r.replicas}{replicas_interval(r.replicas_low, r.replicas_high)}"))
        elif r.replicas is not None:
            rows.append(("replicas", f"{r.replicas}, as measured (the SLO sets no target throughput to size for)"))
        rows.append(
            (
                "resources per replica",
                f"requests cpu={r.cpu_request} memory={r.memory_request}; "
                f"limits cpu={r.cpu_limit} memory={r.memory_limit}",
            )
        )
    if report.choice is not None:
        rows.append(("how certain", f"{report.choice.certainty}: {report.choice.explanation}"))
    measured = f"{len(report.trials)} trials, {report.load_generation_s:.0f} s of load"
    probes = sum(c.probes for c in report.capacities)
    if probes:
        seconds = sum(c.probe_seconds for c in report.capacities)
        measured += f", of them {probes} capacity probes ({seconds:.0f} s)"
    rows.append(("measured", measured))
    if report.baseline is not None:
        found = report.baseline
        rows.append(
            (
                "against the baseline",
                f"{found.source}: {found.worse} of {found.figures} figures worse and {found.better} better beyond the "
                f"noise, {len(found.regressions)} regressed beyond the tolerance",
            )
        )
    return rows


def _held_back(report: ProfileReport, trials: list[TrialReport], chosen_cost: float | None) -> str:
    """Why one configuration was not chosen, in a line."""
    if all(t.status != "Succeeded" for t in trials):
        first = next((t for t in trials if t.message), trials[0])
        return f"{first.status.lower()}: {first.message or 'no trial ran'}"
    capacity = capacity_for(report, trials[0])
    cost = _unit_cost(trials)
    parts = []
    if capacity is not None:
        parts.append(f"{capacity.level_name} {capacity.interval_text()}")
    if cost is None:
        lowest = min((t for t in trials if t.stage is not None), key=lambda t: t.stage.level)  # type: ignore[union-attr]
        missed = next((c for c in lowest.slo if c.verdict != "Met"), None)
        parts.append(
            f"never met the SLO ({missed.objective}: {missed.observed} at {parameters_text(lowest)})"
            if missed is not None
            else "no trial met the SLO"
        )
    else:
        change = cost / chosen_cost - 1 if chosen_cost else None
        more = f", {change:+.1%} against the choice" if change is not None else ""
        if change is not None and change < 0:
            more += " (a tie within the noise, decided by latency headroom)"
        parts.append(f"{cost:.4f} {report.currency} per million {cost_unit(report)}{more}")
    where = capacity.trial if capacity is not None and capacity.trial is not None else None
    limiting = next((t for t in trials if t.index == where), None) or trials[-1]
    if limiting.limited_by:
        parts.append(f"limited by {limiting.limited_by[0]}")
    return "; ".join(parts)


def others(report: ProfileReport) -> list[tuple[str, str]]:
    """(configuration, what held it back) for every configuration but the chosen one."""
    best = next((t for t in report.trials if t.index == report.best_trial), None)
    chosen = configuration_label(best) if best is not None else None
    grouped = configurations(report)
    chosen_cost = best.unit_cost() if best is not None else None
    return [(label, _held_back(report, trials, chosen_cost)) for label, trials in grouped.items() if label != chosen]
