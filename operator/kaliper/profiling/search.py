"""Which configurations to run, in which order, and which load levels to measure on each.

grid: every configuration at every load level.

knee: configurations run from the cheapest per hour up. On each, a binary search over the load levels finds
the highest one that meets the SLO (the knee); levels it does not need are skipped: below a level that met
the SLO, above one that missed it, and at or below the knee of a cheaper configuration this one dominates
(at least as much CPU, memory, GPU and replicas, the rest equal). Once a configuration meets the SLO at the
top level, every configuration that costs more per hour is skipped: at the same load it cannot be cheaper
per request. Every skipped trial is reported, with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.profiling.plan import Configuration

RESOURCE_AXES = {"cpu": parse_cpu, "memory": parse_quantity, "gpu": int, "replicas": int}


@dataclass
class Step:
    """One configuration: whether to run it, and which level to measure next given the verdicts so far."""

    configuration: Configuration
    run: bool = True
    reason: str = ""
    knee_search: bool = False
    floor: float | None = None  # levels up to here are known to meet the SLO (from a dominated configuration)
    on_done: Callable[[dict[float, bool]], None] = field(default=lambda verdicts: None)

    def next_level(self, verdicts: dict[float, bool]) -> float | None:
        levels = self.configuration.levels
        if not self.knee_search:
            return next((level for level in levels if level not in verdicts), None)
        passing = [lv for lv in levels if verdicts.get(lv) is True or (self.floor is not None and lv <= self.floor)]
        failing = [lv for lv in levels if verdicts.get(lv) is False]
        low, high = max(passing, default=None), min(failing, default=None)
        candidates = [lv for lv in levels if (low is None or lv > low) and (high is None or lv < high)]
        return candidates[len(candidates) // 2] if candidates else None

    def skip_reason(self, level: float, verdicts: dict[float, bool]) -> str:
        if any(met is False and lv < level for lv, met in verdicts.items()):
            return "a lower load level already missed the SLO"
        if self.floor is not None and level <= self.floor:
            return "implied: a configuration with fewer resources met the SLO at this load"
        return "a higher load level met the SLO; this one would too"


def dominates(a: Configuration, b: Configuration) -> bool:
    """a has at least b's resources on every resource axis, and the same value on every other axis."""
    for key in a.parameters.keys() | b.parameters.keys():
        va, vb = a.parameters.get(key), b.parameters.get(key)
        if key in RESOURCE_AXES and va is not None and vb is not None:
            if RESOURCE_AXES[key](va) < RESOURCE_AXES[key](vb):
                return False
        elif va != vb:
            return False
    return True


def order_for_search(
    spec: ProfileRunSpec, configurations: list[Configuration], hourly_cost: Callable[[Configuration], float]
) -> Iterator[Step]:
    strategy = spec.search.strategy
    if strategy == "grid":
        yield from (Step(c) for c in configurations)
        return
    if strategy != "knee":
        raise ValueError(f"search.strategy {strategy!r} is not available in the local runtime yet; use grid or knee")
    knees: dict[int, float] = {}  # configuration index -> highest level that met the SLO
    winner: list[Configuration] = []
    by_index = {c.index: c for c in configurations}

    for config in sorted(configurations, key=lambda c: (hourly_cost(c), c.index)):
        if winner and hourly_cost(config) > hourly_cost(winner[0]):
            cheaper = ", ".join(f"{k}={v}" for k, v in winner[0].parameters.items())
            reason = f"cannot win: costs more per hour than {cheaper}, which met the SLO at the highest load level"
            yield Step(config, run=False, reason=reason)
            continue
        implied = [level for index, level in knees.items() if dominates(config, by_index[index])]

        def done(verdicts: dict[float, bool], config: Configuration = config) -> None:
            met = [level for level, ok in verdicts.items() if ok]
            if met:
                knees[config.index] = max(met)
            if not winner and config.levels[-1] in met:
                winner.append(config)

        yield Step(config, knee_search=True, floor=max(implied, default=None), on_done=done)
