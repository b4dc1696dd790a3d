"""Percentiles with sample counts and confidence intervals, from HDR histograms.

The interval of a quantile comes from order statistics: with n samples, the number of samples below the
true q-quantile is Binomial(n, q), so the ranks nq ± z·sqrt(nq(1-q)) bracket it with the chosen confidence.
No distribution is assumed. When n is too small for the tail asked for (a p99.9 from 500 samples), the upper
bound does not exist and is reported as absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kaliper.measure.histogram import LatencyHistogram

REPORTED_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
_Z = {0.90: 1.6449, 0.95: 1.9600, 0.99: 2.5758}


@dataclass(frozen=True)
class PercentileEstimate:
    percentile: float
    value_s: float | None
    ci_low_s: float | None
    ci_high_s: float | None
    count: int
    confidence: float

    @property
    def relative_ci_width(self) -> float | None:
        """(high - low) / value; None when the interval is open or there is no value."""
        if self.value_s is None or self.ci_low_s is None or self.ci_high_s is None or self.value_s <= 0:
            return None
        return (self.ci_high_s - self.ci_low_s) / self.value_s


def rank_interval(count: int, quantile: float, confidence: float = 0.95) -> tuple[int, int | None]:
    """1-based ranks (low, high) of the order statistics that bracket the quantile; high is None when the
    sample is too small to bound it from above."""
    if count <= 0:
        return (0, None)
    z = _Z.get(confidence) or _z_for(confidence)
    centre = count * quantile
    spread = z * math.sqrt(count * quantile * (1 - quantile))
    low = max(1, math.floor(centre - spread))
    high = math.ceil(centre + spread) + 1
    return (low, high if high <= count else None)


def _z_for(confidence: float) -> float:
    # Inverse normal CDF by bisection on erf: only for confidence levels outside the table.
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if math.erf(mid / math.sqrt(2)) < confidence:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def percentile_rank(count: int, percentile: float) -> int:
    """Rank of the percentile: the smallest k with k/count >= percentile/100 (nearest-rank definition)."""
    return max(1, math.ceil(count * percentile / 100 - 1e-9))


def nearest_rank(values: list[float], percentile: float) -> float:
    """The percentile of a list of samples by the same nearest-rank rule (CPU samples, local and in a cluster)."""
    ordered = sorted(values)
    return ordered[percentile_rank(len(ordered), percentile) - 1]


def percentile_among_answered(percentile: float, answered: int, unanswered: int, faster: int = 0) -> float | None:
    """Which percentile of the answered requests a percentile of every request is, when each unanswered one
    (failed, or still in flight when the measurement ended) counts as slower than any answer, and each of
    `faster` (in flight, not yet past a bound, in the best case answered now) as faster than any:
    (p x all - faster) / answered. None where more went unanswered than the percentile leaves (p99 with over
    1%); 0.0 where the percentile lies among the faster ones."""
    total = answered + unanswered + faster
    if not total:
        return percentile
    ranks = percentile * total - 100 * faster  # the percentile's rank among the answered, times 100
    if ranks <= 0:
        return 0.0
    if answered <= 0 or ranks > 100 * answered:
        return None
    return min(100.0, ranks / answered)


def best_case_among_answered(
    percentile: float, answered: int, failed: int, in_flight: int, oldest_s: float, bound_s: float, whole: bool
) -> float | None:
    """percentile_among_answered in the best case the requests in flight at the end allow: each not known to be
    past the bound answered now, faster than any answer. Only the oldest is known past it, and only for a
    whole request's latency (`whole`; for a time to first token, its first token may have come in time)."""
    certain = 1 if in_flight and whole and oldest_s >= bound_s else 0
    return percentile_among_answered(percentile, answered, failed + certain, in_flight - certain)


def estimate(histogram: LatencyHistogram, percentile: float, confidence: float = 0.95) -> PercentileEstimate:
    count = histogram.count
    if count == 0:
        return PercentileEstimate(percentile, None, None, None, 0, confidence)
    low, high = rank_interval(count, percentile / 100, confidence)
    return PercentileEstimate(
        percentile=percentile,
        value_s=histogram.value_at_rank(percentile_rank(count, percentile)),
        ci_low_s=histogram.value_at_rank(low),
        ci_high_s=histogram.value_at_rank(high) if high is not None else None,
        count=count,
        confidence=confidence,
    )
