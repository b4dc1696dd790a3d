"""Percentiles with sample counts and confidence intervals, from HDR histograms.

The interval of a quantile comes from order statistics: with n samples, the number of samples below the
true q-quantile is Binomial(n, q), so the order statistics of ranks l and u bracket it with probability
P(l <= B <= u - 1), computed from the binomial distribution itself (Hahn and Meeker's distribution-free
interval, as SciPy's quantile_test gives it), not its normal approximation, which at a few dozen samples puts
the upper rank of a p90 past the last sample where the exact one is the last sample. No distribution of the
latencies is assumed. When n is too small for the tail asked for (a p99.9 from 500 samples), the upper bound
does not exist and is reported as absent.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from kaliper.measure.histogram import LatencyHistogram

REPORTED_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


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


@functools.lru_cache(maxsize=4096)
def rank_interval(count: int, quantile: float, confidence: float = 0.95) -> tuple[int, int | None]:
    """1-based ranks (low, high) of the order statistics that bracket the quantile with at least `confidence`,
    equal-tailed: low the largest rank with P(B <= low - 1) <= (1 - confidence) / 2, high the smallest with
    P(B <= high - 1) >= (1 + confidence) / 2, B ~ Binomial(count, quantile). high is None when the sample is too
    small to bound the quantile from above; low is 1 when it is too small to bound it from below."""
    if count <= 0:
        return (0, None)
    tail = (1 - confidence) / 2
    first, cdf = _binomial_cdf(count, quantile)
    # P(B <= k) for k = low - 1 and high - 1; below the window it is under 1e-30, within any tail.
    below = [k for k, p in enumerate(cdf, start=first) if p <= tail]
    above = [k for k, p in enumerate(cdf, start=first) if p >= 1 - tail and k <= count - 1]
    low = below[-1] + 1 if below else first
    return (max(1, low), above[0] + 1 if above else None)


def _binomial_cdf(count: int, quantile: float) -> tuple[int, list[float]]:
    """P(B <= k) for k from `first` on, B ~ Binomial(count, quantile), over the window where its mass lies (the
    mean plus or minus 12 standard deviations and 10: what lies outside is under 1e-30 of it), each term from its
    neighbour from the mode outwards, so that no term underflows or overflows at a million samples."""
    if quantile <= 0 or quantile >= 1:
        return 0, [0.0 if quantile >= 1 else 1.0] * count + [1.0]
    mean, spread = count * quantile, 12 * math.sqrt(count * quantile * (1 - quantile)) + 10
    first, last = max(0, math.floor(mean - spread)), min(count, math.ceil(mean + spread))
    mode = min(max(math.floor((count + 1) * quantile), first), last)
    odds = quantile / (1 - quantile)
    mass = [0.0] * (last - first + 1)
    mass[mode - first] = 1.0
    for k in range(mode, last):  # pmf(k + 1) = pmf(k) (n - k) / (k + 1) q / (1 - q)
        mass[k + 1 - first] = mass[k - first] * (count - k) / (k + 1) * odds
    for k in range(mode, first, -1):
        mass[k - 1 - first] = mass[k - first] * k / (count - k + 1) / odds
    total = math.fsum(mass)
    cdf, running = [], 0.0
    for value in mass:
        running += value / total
        cdf.append(min(running, 1.0))
    return first, cdf


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


def share_interval(share: float, count: int) -> tuple[float, float]:
    """The Wilson 95% interval of a share measured over `count` trials (requests, scored rows): unlike the
    normal interval it stays within 0-1 and is not zero-wide at a share of 0 or 1."""
    z = 1.96
    centre = (share + z * z / (2 * count)) / (1 + z * z / count)
    half = z * math.sqrt(share * (1 - share) / count + z * z / (4 * count * count)) / (1 + z * z / count)
    return max(0.0, centre - half), min(1.0, centre + half)
