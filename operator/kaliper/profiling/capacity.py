"""Each configuration's capacity under the SLO, and what it costs and how many replicas it takes there. Pure
functions.

A configuration's trials at different loads bracket its capacity: the highest load judged Met and the lowest
above it judged NotMet (or failed), each with 95% confidence by the stopping rule; loads judged Inconclusive
lie between. The capacity search (search.py) narrows that bracket with probes. Cost and replicas are those
measured at the highest load met, their intervals from that trial's throughput uncertainty: a configuration is
priced where it was seen to hold the SLO, within the search's resolution of its boundary, never beyond it.
"""

from __future__ import annotations

from collections.abc import Sequence

from kaliper.api.profilerun import Capacity
from kaliper.profiling.decisions import largest, relative_noise, replicas_for
from kaliper.report.schema import TrialReport


def _configuration(trial: TrialReport, level_name: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in trial.parameters.items() if k != level_name))


def _level(trial: TrialReport, level_name: str) -> float:
    return float(trial.parameters[level_name])


def throughput_of(trial: TrialReport) -> float | None:
    """What a configuration's capacity is counted in: output tokens per second for generation, requests per
    second otherwise."""
    if trial.stage is None:
        return None
    return trial.stage.tokens.output_tokens_per_s if trial.generates else trial.stage.throughput_rps  # type: ignore[union-attr]


def capacity_of(
    trials: Sequence[TrialReport], level_name: str, first_probe: int, targets: tuple[float | None, float | None]
) -> Capacity:
    """One configuration's capacity from its trials (every load level it ran, probes included), and the
    replicas it takes to serve `targets` (requests a second, output tokens a second; None: not asked)."""
    target_rps, target_output_tokens_per_s = targets
    ran = [t for t in trials if t.status != "Skipped"]
    met_trials = [t for t in ran if t.status == "Succeeded" and t.slo_verdict == "Met"]
    best = max(met_trials, key=lambda t: (_level(t, level_name), t.index), default=None)
    met = _level(best, level_name) if best is not None else None
    above = [t for t in ran if met is None or _level(t, level_name) > met]
    failing = [_level(t, level_name) for t in above if t.status == "Failed" or t.slo_verdict == "NotMet"]
    not_met = min(failing, default=None)
    inconclusive = sorted(
        _level(t, level_name)
        for t in above
        if t.status == "Succeeded"
        and t.slo_verdict == "Inconclusive"
        and (not_met is None or _level(t, level_name) < not_met)
    )
    probes = [t for t in ran if t.index >= first_probe]
    report = Capacity(
        parameters=dict(_configuration(trials[0], level_name)),
        level_name=level_name,
        met=met,
        not_met=not_met,
        inconclusive=inconclusive,
        probes=len(probes),
        probe_seconds=round(sum(t.load_seconds() for t in probes), 1),
    )
    throughput = throughput_of(best) if best is not None else None
    if best is None or not throughput:
        return report
    noise = relative_noise(best)
    report.trial, report.throughput, report.noise = best.index, throughput, round(noise, 4)
    cost = best.unit_cost()
    if cost is not None:
        report.unit_cost = cost
        report.unit_cost_low = cost / (1 + noise)
        report.unit_cost_high = cost / (1 - noise) if noise < 1 else None
    sizes = []
    assert best.stage is not None
    if target_rps and best.stage.throughput_rps > 0:
        sizes.append(replicas_for(target_rps, best.stage.throughput_rps / best.replicas_held(), noise))
    if target_output_tokens_per_s and best.generates and best.stage.tokens.output_tokens_per_s > 0:  # type: ignore[union-attr]
        per_replica = best.stage.tokens.output_tokens_per_s / best.replicas_held()  # type: ignore[union-attr]
        sizes.append(replicas_for(target_output_tokens_per_s, per_replica, noise))
    if sizes:
        report.replicas, report.replicas_low, report.replicas_high = largest(sizes)
    return report


def capacities(
    trials: Sequence[TrialReport],
    level_name: str,
    first_probe: int,
    target_rps: float | None = None,
    target_output_tokens_per_s: float | None = None,
) -> list[Capacity]:
    """Every configuration's capacity, in the order of their first trial."""
    groups: dict[tuple[tuple[str, str], ...], list[TrialReport]] = {}
    for trial in sorted(trials, key=lambda t: t.index):
        if level_name in trial.parameters:
            groups.setdefault(_configuration(trial, level_name), []).append(trial)
    return [
        capacity_of(group, level_name, first_probe, (target_rps, target_output_tokens_per_s))
        for group in groups.values()
    ]
