"""Which configurations to run, in which order, and which load levels to measure on each.

grid: every configuration at every load level.

optuna: a TPE sampler (optuna) proposes (configuration, load level) pairs, up to search.maxTrials, and learns
from each trial's cost per million requests (a trial that misses the SLO counts as infinitely expensive).

knee: configurations run from the cheapest per hour up. On each, a binary search over the load levels finds
the highest one that meets the SLO (the knee); levels it does not need are skipped: below a level that met
the SLO, above one that missed it, and at or below the knee of a cheaper configuration this one dominates
(at least as much CPU, memory, GPU and replicas, the rest equal). Once a configuration meets the SLO at the
top level, every configuration that costs more per hour is skipped: at the same load it cannot be cheaper
per request. Every skipped trial is reported, with its reason.

Capacity probes (knee by default, grid when asked): once a configuration's listed levels are decided, its
capacity lies between the highest level that met the SLO and the lowest above it that did not. Probes bisect
that gap (whole numbers for concurrency), each a trial judged like any other, until it is no wider than the
resolution or the probes run out. An Inconclusive probe counts as not met: the search narrows below it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.profiling.plan import Configuration
from kaliper.report.schema import TrialReport

RESOURCE_AXES = {"cpu": parse_cpu, "memory": parse_quantity, "gpu": int, "replicas": int}


@dataclass(frozen=True)
class Outcome:
    """What the search learns from a finished trial: the same from a full report (`kaliper run`) as from the
    summary in a ProfileRun's status (the operator, replaying the search after a restart)."""

    status: str  # Succeeded, Failed or Skipped
    slo_verdict: str | None = None  # Met, NotMet, Inconclusive; None without an SLO
    throughput_rps: float | None = None
    cost_per_million_requests: float | None = None

    @classmethod
    def of(cls, trial: TrialReport) -> Outcome:
        return cls(
            trial.status,
            trial.slo_verdict,
            trial.stage.throughput_rps if trial.stage else None,
            trial.cost_per_million_requests,
        )

    @property
    def passed(self) -> bool:
        """Whether the trial counts as meeting the SLO at its load level (an inconclusive one does not)."""
        return self.status == "Succeeded" and self.slo_verdict in (None, "Met")


@dataclass
class ConfigurationSearch:
    """One configuration: whether to run it, and which level to measure next given the verdicts so far."""

    configuration: Configuration
    run: bool = True
    reason: str = ""
    knee_search: bool = False
    floor: float | None = None  # levels up to here are known to meet the SLO (from a dominated configuration)
    only_level: float | None = None  # optuna: measure just this level
    probes: int = 0  # capacity probes allowed after the listed levels
    resolution: float | None = None  # None: 1 for whole-number levels, 5% of the met level otherwise
    on_done: Callable[[dict[float, bool], list[Outcome]], None] = field(default=lambda verdicts, trials: None)

    @property
    def levels(self) -> list[float]:
        return [self.only_level] if self.only_level is not None else self.configuration.levels

    def next_level(self, verdicts: dict[float, bool]) -> float | None:
        levels = self.levels
        if not self.knee_search:
            return next((level for level in levels if level not in verdicts), None)
        passing = [lv for lv in levels if self.passing(lv, verdicts)]
        failing = [lv for lv in levels if verdicts.get(lv) is False]
        low, high = max(passing, default=None), min(failing, default=None)
        candidates = [lv for lv in levels if (low is None or lv > low) and (high is None or lv < high)]
        return candidates[len(candidates) // 2] if candidates else None

    def passing(self, level: float, verdicts: dict[float, bool]) -> bool:
        return verdicts.get(level) is True or (self.floor is not None and level <= self.floor)

    def bracket(self, verdicts: dict[float, bool]) -> tuple[float | None, float | None]:
        """(highest level known to meet the SLO, measured or implied by a dominated configuration, and the
        lowest level above it measured not to)."""
        implied = [self.floor] if self.floor is not None else []
        low = max([lv for lv, ok in verdicts.items() if ok] + implied, default=None)
        high = min((lv for lv, ok in verdicts.items() if not ok and (low is None or lv > low)), default=None)
        return low, high

    def next_probe(self, verdicts: dict[float, bool]) -> float | None:
        """The next capacity probe, once every listed level this search wants is decided: the middle of the
        gap between met and not met, or None when it is narrow enough, open-ended, or the probes are spent."""
        if len([lv for lv in verdicts if lv not in self.levels]) >= self.probes:
            return None
        low, high = self.bracket(verdicts)
        if low is None or high is None:
            return None
        if self.configuration.level_name == "concurrency":
            middle: float = (low + high) // 2
            resolution = self.resolution or 1
        else:
            middle = float(f"{(low + high) / 2:.3g}")  # a level a person can read back
            resolution = self.resolution or 0.05 * low
        if high - low <= resolution or not low < middle < high:
            return None
        return middle

    def skip_reason(self, level: float, verdicts: dict[float, bool]) -> str:
        if any(met is False and lv < level for lv, met in verdicts.items()):
            return "a lower load level did not meet the SLO"
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
) -> Iterator[ConfigurationSearch]:
    strategy = spec.search.strategy
    probes, resolution = spec.search.capacity_probes(), spec.search.capacity.resolution
    if strategy == "grid":
        yield from (ConfigurationSearch(c, probes=probes, resolution=resolution) for c in configurations)
        return
    if strategy == "optuna":
        yield from _optuna_searches(spec, configurations)
        return
    knees: dict[int, float] = {}  # configuration index -> highest level that met the SLO
    winner: list[Configuration] = []
    by_index = {c.index: c for c in configurations}

    for config in sorted(configurations, key=lambda c: (hourly_cost(c), c.index)):
        if winner and hourly_cost(config) > hourly_cost(winner[0]):
            cheaper = ", ".join(f"{k}={v}" for k, v in winner[0].parameters.items())
            reason = f"cannot win: costs more per hour than {cheaper}, which met the SLO at the highest load level"
            yield ConfigurationSearch(config, run=False, reason=reason)
            continue
        implied = [level for index, level in knees.items() if dominates(config, by_index[index])]

        def done(verdicts: dict[float, bool], trials: list[Outcome], config: Configuration = config) -> None:
            met = [level for level, ok in verdicts.items() if ok]
            if met:
                knees[config.index] = max(met)
            if not winner and config.levels[-1] in met:
                winner.append(config)

        yield ConfigurationSearch(
            config,
            knee_search=True,
            floor=max(implied, default=None),
            on_done=done,
            probes=probes,
            resolution=resolution,
        )


INFEASIBLE = float("inf")


def objective(trial: Outcome) -> float:
    """What optuna minimises: money per million requests (or, without prices, 1 / throughput); a trial that
    failed or missed the SLO is infeasible."""
    if not trial.passed or not trial.throughput_rps:
        return INFEASIBLE
    if trial.cost_per_million_requests is not None:
        return trial.cost_per_million_requests
    return 1 / trial.throughput_rps


def _optuna_searches(spec: ProfileRunSpec, configurations: list[Configuration]) -> Iterator[ConfigurationSearch]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    keys = list(configurations[0].parameters)
    choices = {key: sorted({c.parameters[key] for c in configurations}) for key in keys}
    by_parameters = {tuple(c.parameters[k] for k in keys): c for c in configurations}
    levels = configurations[0].levels
    distributions = {key: optuna.distributions.CategoricalDistribution(values) for key, values in choices.items()}
    distributions["level"] = optuna.distributions.CategoricalDistribution(levels)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=spec.search.seed))
    total = len(configurations) * len(levels)
    measured: dict[tuple[int, float], float] = {}
    for _ in range(min(spec.search.max_trials, total) * 4):  # proposals; repeats are answered from memory
        if len(measured) >= min(spec.search.max_trials, total):
            return
        proposal = study.ask(distributions)
        config = by_parameters[tuple(proposal.params[k] for k in keys)]
        level = proposal.params["level"]
        if (config.index, level) in measured:
            study.tell(proposal, measured[(config.index, level)])
            continue

        def done(
            verdicts: dict[float, bool], trials: list[Outcome], proposal=proposal, key=(config.index, level)
        ) -> None:  # type: ignore[no-untyped-def]
            value = min((objective(t) for t in trials), default=INFEASIBLE)
            measured[key] = value
            study.tell(proposal, value if value != INFEASIBLE else 1e18)

        yield ConfigurationSearch(config, only_level=level, on_done=done)
