"""Whether a profile's prediction holds in production (pure): the profile measured a configuration's latency, CPU and
memory at load levels; production shows, over a window, the load each replica serves and the latency the servers'
own histograms give. At production's load the profile's figures are interpolated between the measured levels
(with their intervals), compared with what production showed, and judged:

- NotEnoughTraffic: too few requests in the window to bound the highest percentile compared (a p99 needs 368,
  as a profile's does: measure.statistics.rank_interval); nothing is judged.
- WorkloadShifted: the requests differ from the profile's (for LLMs, the mean prompt or output length moved by more
  than `shift_tolerance`): the profile speaks of other traffic.
- LoadOutsideProfile: each replica serves less or more than any level the profile measured; said, never
  extrapolated.
- SlowerThanProfiled: a latency percentile whose production bucket lies wholly above the profile's interval at
  that load (widened by `tolerance`). A Prometheus histogram places a percentile only within a bucket, so the
  bucket's edges are the observation's interval: interpolation inside a bucket never decides.
- FasterThanProfiled: the same, wholly below: the configuration may be larger than the traffic needs. Judged
  only where both sides time the same thing: a profile's latency is its load generator's (the server's time, the
  network's and the client's), a production histogram's the server's own, which reads lower by the rest; above
  the profile is slower whichever the basis, below is not faster.
- Holds: otherwise.

CPU and memory per replica are scored beside (observed against the interpolated figure, within `tolerance`) and
do not decide: the verdict is the SLO's figures'."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from kaliper.api.modeldeployment import PredictionFigure, ProductionStatus
from kaliper.measure.statistics import rank_interval
from kaliper.report.schema import ProfileReport

LatencyBasis = Literal["client", "server"]
PredictionReason = Literal[
    "Holds", "SlowerThanProfiled", "FasterThanProfiled", "LoadOutsideProfile", "WorkloadShifted", "NotEnoughTraffic"
]


@dataclass(frozen=True)
class Band:
    """A figure with its interval (None: unbounded on that side)."""

    value: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class ProfiledLevel:
    """One measured load level of a configuration, per replica."""

    rate_rps: float
    """Answers per second per replica."""
    latency_ms: dict[float, Band]
    """By percentile: the value with its 95% interval."""
    cpu_cores: float | None = None
    memory_bytes: float | None = None
    latency_basis: LatencyBasis = "client"
    """What its latency times: the load generator's whole request ("client"), or the server's own ("server")."""


@dataclass(frozen=True)
class ProductionWindow:
    """What production showed over a window: the servers' own counters and histograms, cAdvisor's figures."""

    seconds: float
    requests: int
    """Answered over the window, every replica."""
    replicas: float
    """Ready replicas, on average over the window."""
    latency_ms: dict[float, Band]
    """By percentile: histogram_quantile's estimate, with the edges of the bucket it falls in."""
    cpu_cores: float | None = None
    """Per replica."""
    memory_bytes: float | None = None
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    latency_basis: LatencyBasis = "server"

    @property
    def rate_rps(self) -> float:
        """Answers per second per replica."""
        return self.requests / self.seconds / self.replicas if self.seconds > 0 and self.replicas > 0 else 0.0


@dataclass(frozen=True)
class FigureScore:
    figure: str
    observed: Band
    predicted: Band
    error: float
    """(observed - predicted) / predicted."""
    inside: bool
    """The observation's interval meets the prediction's."""


@dataclass(frozen=True)
class PredictionScore:
    holds: bool | None
    """None: not judged (too little traffic, or a load the profile did not measure)."""
    reason: PredictionReason
    message: str
    rate_rps: float
    """The load per replica it was compared at."""
    figures: list[FigureScore]


DEFAULT_PERCENTILES = (50.0, 90.0, 99.0)


def compared_percentiles(report: ProfileReport) -> tuple[float, ...]:
    """The latency percentiles production is held to: the SLO's bounds on whole-request latency, else p50, p90
    and p99."""
    bounds = report.slo.latency if report.slo is not None and report.slo.latency else []
    found = sorted({o.percentile for o in bounds if o.metric == "latency"})
    return tuple(found) or DEFAULT_PERCENTILES


def deployed_configuration(report: ProfileReport) -> dict[str, str] | None:
    """The configuration a profile recommends, which is the one deployed: its best trial's parameters without the
    load level; None when it chose none."""
    best = next((t for t in report.trials if t.index == report.best_trial), None)
    if best is None:
        return None
    return {k: v for k, v in best.parameters.items() if k != report.level_name}


def profiled_levels(report: ProfileReport, parameters: dict[str, str]) -> list[ProfiledLevel]:
    """The measured levels of the configuration `parameters` names (its trials' parameters without the load
    level), per replica, by rate: every succeeded trial of it with throughput."""
    level = report.level_name
    levels = []
    for trial in report.trials:
        own = {k: v for k, v in trial.parameters.items() if k != level}
        if own != parameters or trial.status != "Succeeded" or trial.stage is None or trial.stage.throughput_rps <= 0:
            continue
        replicas = max(trial.replicas, 1)
        latency = {
            p.percentile: Band(p.value_ms, p.ci_low_ms, p.ci_high_ms)
            for p in trial.stage.latency.percentiles
            if p.value_ms is not None
        }
        resources = trial.resources
        cpu = resources.cpu_avg_cores / replicas if resources and resources.cpu_avg_cores is not None else None
        memory = resources.memory_avg_bytes / replicas if resources and resources.memory_avg_bytes is not None else None
        levels.append(ProfiledLevel(trial.stage.throughput_rps / replicas, latency, cpu, memory))
    return sorted(levels, key=lambda lv: lv.rate_rps)


def _between(low: float | None, high: float | None, share: float) -> float | None:
    return None if low is None or high is None else low + (high - low) * share


def _band_between(low: Band | None, high: Band | None, share: float) -> Band | None:
    if low is None or high is None:
        return None
    return Band(low.value + (high.value - low.value) * share, _between(low.low, high.low, share),
                _between(low.high, high.high, share))  # fmt: skip


def interpolate(levels: Sequence[ProfiledLevel], rate_rps: float) -> ProfiledLevel | None:
    """The profile's figures at `rate_rps` per replica, linear between the two measured levels around it (and
    their intervals the same way); None outside the measured range."""
    if not levels or rate_rps < levels[0].rate_rps or rate_rps > levels[-1].rate_rps:
        return None
    upper = next(i for i, lv in enumerate(levels) if lv.rate_rps >= rate_rps)
    below, above = levels[max(upper - 1, 0)], levels[upper]
    span = above.rate_rps - below.rate_rps
    share = (rate_rps - below.rate_rps) / span if span > 0 else 1.0
    latency = {
        p: band
        for p in below.latency_ms.keys() & above.latency_ms.keys()
        if (band := _band_between(below.latency_ms[p], above.latency_ms[p], share)) is not None
    }
    return ProfiledLevel(
        rate_rps,
        latency,
        _between(below.cpu_cores, above.cpu_cores, share),
        _between(below.memory_bytes, above.memory_bytes, share),
    )


@functools.cache
def requests_to_bound(percentile: float) -> int:
    """The fewest requests whose sample bounds `percentile` from above at 95% (p99: 368)."""
    count = 1
    while rank_interval(count, percentile / 100)[1] is None:
        count += 1
    return count


def _bounds(band: Band) -> str:
    low = f"{band.low:.4g}" if band.low is not None else "unbounded"
    high = f"{band.high:.4g}" if band.high is not None else "unbounded"
    return f"{low}-{high}"


def _relative(observed: float, predicted: float) -> float:
    return (observed - predicted) / predicted if predicted else 0.0


def _latency_score(
    percentile: float, observed: Band, predicted: Band, tolerance: float, judge_below: bool = True
) -> FigureScore:
    low = predicted.low * (1 - tolerance) if predicted.low is not None else None
    high = predicted.high * (1 + tolerance) if predicted.high is not None else None
    above = high is not None and (observed.low if observed.low is not None else observed.value) > high
    below = judge_below and low is not None and (observed.high if observed.high is not None else observed.value) < low
    return FigureScore(
        f"p{percentile:g} latency (ms)", observed, Band(predicted.value, low, high),
        _relative(observed.value, predicted.value), not (above or below),
    )  # fmt: skip


def _resource_score(
    figure: str, observed: float | None, predicted: float | None, tolerance: float
) -> FigureScore | None:
    if observed is None or predicted is None:
        return None
    band = Band(predicted, predicted * (1 - tolerance), predicted * (1 + tolerance))
    inside = band.low <= observed <= band.high  # type: ignore[operator]
    return FigureScore(figure, Band(observed), band, _relative(observed, predicted), inside)


def _shift(window: ProductionWindow, workload: tuple[float, float] | None, tolerance: float) -> str | None:
    """What moved in the requests beyond `tolerance`, against the profile's (mean input, mean output) tokens."""
    if workload is None:
        return None
    moved = [
        f"mean {name} tokens {seen:.0f} against the profile's {profiled:.0f}"
        for name, seen, profiled in (
            ("prompt", window.mean_input_tokens, workload[0]),
            ("output", window.mean_output_tokens, workload[1]),
        )
        if seen is not None and profiled > 0 and abs(seen - profiled) / profiled > tolerance
    ]
    return "; ".join(moved) or None


def _outside(first: FigureScore, words: str, at: str) -> str:
    return (
        f"{first.figure.split(' ')[0]} {first.observed.value:.4g} ms {at}, {words} the profile's "
        f"{first.predicted.value:.4g} ms ({_bounds(first.predicted)} ms)"
    )


def score(
    levels: Sequence[ProfiledLevel],
    window: ProductionWindow,
    *,
    workload: tuple[float, float] | None = None,
    tolerance: float = 0.1,
    shift_tolerance: float = 0.25,
) -> PredictionScore:
    """Production's window against the profile's levels (see the module's docstring for each reason)."""
    rate = window.rate_rps
    compared = sorted(window.latency_ms)
    needed = requests_to_bound(compared[-1]) if compared else 0
    if window.requests < needed or not compared:
        message = (
            f"{window.requests} requests in {window.seconds:g} s; p{compared[-1]:g} needs {needed} to be bounded"
            if compared else "no latency percentile was read"
        )  # fmt: skip
        return PredictionScore(None, "NotEnoughTraffic", message, rate, [])
    if (moved := _shift(window, workload, shift_tolerance)) is not None:
        return PredictionScore(False, "WorkloadShifted", f"the requests changed: {moved}", rate, [])
    profiled = interpolate(levels, rate)
    if profiled is None:
        measured = f"{levels[0].rate_rps:.4g}-{levels[-1].rate_rps:.4g}" if levels else "no"
        message = f"{rate:.4g} requests/s per replica, outside the profiled {measured} requests/s: not extrapolated"
        return PredictionScore(None, "LoadOutsideProfile", message, rate, [])
    same_basis = all(level.latency_basis == window.latency_basis for level in levels)
    figures = [
        _latency_score(p, window.latency_ms[p], profiled.latency_ms[p], tolerance, judge_below=same_basis)
        for p in compared
        if p in profiled.latency_ms
    ]
    resources = (
        _resource_score("CPU per replica (cores)", window.cpu_cores, profiled.cpu_cores, tolerance),
        _resource_score("memory per replica (bytes)", window.memory_bytes, profiled.memory_bytes, tolerance),
    )
    figures += [f for f in resources if f is not None]
    at = f"at {rate:.4g} requests/s per replica"
    outside = [f for f in figures if "latency" in f.figure and not f.inside]
    slower, faster = [f for f in outside if f.error > 0], [f for f in outside if f.error < 0]
    if slower:
        return PredictionScore(False, "SlowerThanProfiled", _outside(slower[0], "above", at), rate, figures)
    if faster:
        return PredictionScore(False, "FasterThanProfiled", _outside(faster[0], "below", at), rate, figures)
    if same_basis:
        return PredictionScore(
            True, "Holds", f"every latency percentile within the profile's interval {at}", rate, figures
        )
    message = (
        f"no latency percentile above the profile's interval {at} (the server's own times against the load "
        "generator's: only slower is judged)"
    )
    return PredictionScore(True, "Holds", message, rate, figures)


def production_status(
    scored: PredictionScore | None,
    window: ProductionWindow | None,
    levels: Sequence[ProfiledLevel],
    *,
    profile: str,
    configuration: dict[str, str] | None,
    window_text: str,
    checked_at: datetime,
    unavailable: tuple[str, str] | None = None,
) -> ProductionStatus:
    """What a check found, as a ModelDeployment's status.production and a report's `production` say it;
    `unavailable`: (reason, message) when nothing could be scored."""
    if unavailable is not None:
        reason, message = unavailable
    else:
        assert scored is not None
        reason, message = scored.reason, scored.message
    return ProductionStatus(
        checked_at=checked_at,
        profile=profile,
        configuration=configuration,
        window=window_text,
        requests=window.requests if window else 0,
        replicas=window.replicas if window else 0,
        load_per_replica_rps=round(window.rate_rps, 6) if window else 0,
        profiled_rps=[round(levels[0].rate_rps, 6), round(levels[-1].rate_rps, 6)] if levels else [],
        holds=scored.holds if scored is not None and unavailable is None else None,
        reason=reason,
        message=message[:2048],
        figures=[
            PredictionFigure(
                figure=f.figure,
                observed=round(f.observed.value, 6),
                observed_low=f.observed.low,
                observed_high=f.observed.high,
                predicted=round(f.predicted.value, 6),
                predicted_low=f.predicted.low,
                predicted_high=f.predicted.high,
                error=round(f.error, 6),
                inside=f.inside,
            )
            for f in (scored.figures if scored else [])
        ][:8],
    )
