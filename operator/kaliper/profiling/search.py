"""Which configurations to run, in which order: the whole grid, or a knee search that skips what cannot win.

Knee search: configurations run from the cheapest per hour up; each climbs its load levels and stops at the
first one that misses the SLO (the knee is the level below). Once a configuration meets the SLO at every
level, any configuration that costs more per hour cannot be cheaper per request at the same load, so it is
skipped (reported as Skipped, with the reason).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.profiling.plan import Configuration
from kaliper.report.schema import TrialReport


@dataclass
class Step:
    configuration: Configuration
    run: bool = True
    reason: str = ""
    feedback: Callable[[list[TrialReport]], None] = field(default=lambda trials: None)


def order_for_search(
    spec: ProfileRunSpec, configurations: list[Configuration], hourly_cost: Callable[[Configuration], float]
) -> Iterator[Step]:
    strategy = spec.search.strategy
    if strategy == "grid":
        yield from (Step(c) for c in configurations)
        return
    if strategy != "knee":
        raise ValueError(f"search.strategy {strategy!r} is not available in the local runtime yet; use grid or knee")
    winner: list[Configuration] = []

    for config in sorted(configurations, key=lambda c: (hourly_cost(c), c.index)):
        if winner and hourly_cost(config) > hourly_cost(winner[0]):
            cheaper = ", ".join(f"{k}={v}" for k, v in winner[0].parameters.items())
            yield Step(
                config,
                run=False,
                reason=f"cannot win: costs more per hour than {cheaper}, which met the SLO at every load level",
            )
            continue

        def feedback(trials: list[TrialReport], config: Configuration = config) -> None:
            first = config.index * len(config.levels)
            mine = [t for t in trials if first <= t.index < first + len(config.levels)]
            if not winner and len(mine) == len(config.levels) and all(t.slo_met for t in mine):
                winner.append(config)

        yield Step(config, feedback=feedback)
