"""One judgement of a latency objective, whoever asks: the stopping rule while a stage runs
(kaliper.loadgen.stopping) and the SLO verdict when it is over (kaliper.profiling.decisions). Pure.

An objective is parsed once (`Bound`). The samples are the answered requests' histogram of the objective's
figure, the failed requests and those still in flight: every failure, and every request in flight, counts as
slower than any answer (it was not answered in time), so the objective's percentile of every request is a
higher percentile of the answered ones. A NotMet that rests on requests in flight not yet past the bound is
Inconclusive: answered now, they could still make it Met.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.statistics import (
    PercentileEstimate,
    best_case_among_answered,
    estimate,
    percentile_among_answered,
)

Verdict = Literal["Met", "NotMet", "Inconclusive"]


@dataclass(frozen=True)
class Bound:
    """A latency objective, parsed once (LatencyObjective.bound): its figure, percentile and bound in seconds."""

    metric: str
    percentile: float
    bound_s: float
    corrected: bool = True
    """From the intended send (what users see under open loop), or from the actual send."""

    @property
    def whole(self) -> bool:
        """A whole request's latency: a request in flight longer than the bound is known to have missed it
        (for a time to first token, its first token may have come in time)."""
        return self.metric == "latency"


@dataclass(frozen=True)
class Samples:
    """What a judgement rests on: the answered requests (how many, and their figure's percentile with its
    interval), and the requests that have none."""

    answered: int
    at: Callable[[float], PercentileEstimate]
    """A percentile of the answered requests' figure, with its interval."""
    failed: int
    in_flight: int = 0
    oldest_s: float = 0.0
    """How long the oldest request in flight had run."""

    @classmethod
    def of(cls, answered: LatencyHistogram, failed: int, in_flight: int = 0, oldest_s: float = 0.0) -> Samples:
        return cls(answered.count, lambda p: estimate(answered, p), failed, in_flight, oldest_s)


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    among: float | None
    """Which percentile of the answered requests the objective's is, every request in flight counted as
    unanswered; None where more went unanswered than the percentile leaves."""
    found: PercentileEstimate | None
    """That percentile with its interval (None with `among`)."""
    best: Verdict | None = None
    """Where the verdict rests on requests in flight: the verdict were they all answered now."""
    best_among: float | None = None
    best_found: PercentileEstimate | None = None


def interval_verdict(found: PercentileEstimate, bound_s: float) -> Verdict:
    """Met only when the whole interval is within the bound, NotMet when the whole interval is beyond it."""
    if found.value_s is None:
        return "Inconclusive"
    if found.ci_low_s is not None and found.ci_low_s > bound_s:
        return "NotMet"
    if found.ci_high_s is not None and found.ci_high_s <= bound_s:
        return "Met"
    return "Inconclusive"


def judge(bound: Bound, samples: Samples) -> Judgement:
    answered = samples.answered
    among = percentile_among_answered(bound.percentile, answered, samples.failed + samples.in_flight)
    found = samples.at(among) if among is not None else None
    worst: Verdict = interval_verdict(found, bound.bound_s) if found is not None else "NotMet"
    if worst != "NotMet" or not samples.in_flight:
        return Judgement(worst, among, found)
    best_among = best_case_among_answered(
        bound.percentile, answered, samples.failed, samples.in_flight, samples.oldest_s, bound.bound_s, bound.whole
    )
    best_found = samples.at(best_among) if best_among else None
    if best_among is None:
        best: Verdict = "NotMet"
    elif best_found is None:
        best = "Met"  # the percentile lies among the requests in flight, each answered now
    else:
        best = interval_verdict(best_found, bound.bound_s)
    verdict: Verdict = "NotMet" if best == "NotMet" else "Inconclusive"
    return Judgement(verdict, among, found, best, best_among, best_found)
