"""The answer a profile report leads with (pure): which configuration to run, what it costs at its capacity,
how many replicas and how certain the choice is (what held each other configuration back is
profile_text.others, from the choice's rows). The HTML page opens with it; the figures it rests on follow in
the table and the charts."""

from __future__ import annotations

from kaliper.report.profile_text import (
    capacity_for,
    configuration_label,
    cost_unit,
    fmt,
    replicas_interval,
)
from kaliper.report.recommend import resources_text
from kaliper.report.schema import ProfileReport


def _cost_text(report: ProfileReport, cost: float, low: float | None, high: float | None) -> str:
    interval = f" (95%: {fmt(low, '{:.4f}')}-{fmt(high, '{:.4f}')})" if low is not None else ""
    return f"{cost:.4f} {report.currency} per million {cost_unit(report)}{interval}"


def answer_rows(report: ProfileReport) -> list[tuple[str, str]]:
    """(what, the answer) rows: the verdict, then for the chosen trial its configuration, cost, capacity,
    replicas, resources and how certain the choice is, then the baseline comparison."""
    reason = f" ({report.verdict_reason})" if report.verdict_reason and report.verdict != "Met" else ""
    rows = [("verdict", f"{report.verdict}{reason}")]
    best = next((t for t in report.trials if t.index == report.best_trial), None)
    if best is not None:
        level = ", ".join(f"{k}={v}" for k, v in best.load_level().items())
        at = f" at {level}" if level else ""
        rows.append(("run", f"{configuration_label(best)}{at} (trial {best.index})"))
        capacity = capacity_for(report, best.configuration())
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
        resources = resources_text(r)
        if resources is not None:
            rows.append(("resources per replica", resources))
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
