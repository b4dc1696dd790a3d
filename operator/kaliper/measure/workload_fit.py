"""Fitting a workload to what a server's own metrics say about it: token-length distributions from Prometheus
histograms, and how bursty the arrivals are from a request counter's increases.

Pure functions: the numbers come from metrics/workload_query.py, which reads them from Prometheus.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

STANDARD = NormalDist()


@dataclass(frozen=True)
class Bucket:
    """One bucket of a histogram: the counts in (low, high], high None for +Inf; observed and fitted shares."""

    low: float
    high: float | None
    observed: float
    fitted: float


@dataclass(frozen=True)
class LengthFit:
    """A lognormal fitted to a token-count histogram, its mean held to the histogram's own sum / count."""

    count: float
    mean: float
    stddev: float
    sigma: float  # of the logarithm
    smallest: int  # the lowest count the histogram's occupied buckets allow
    largest: int | None  # the highest, None when the +Inf bucket holds some
    buckets: list[Bucket]

    @property
    def largest_gap(self) -> tuple[float, float]:
        """(points, at edge): the largest difference between the fitted and the observed share of counts at
        or below a bucket's upper edge, in percentage points; how well the lognormal matches the histogram."""
        observed = fitted = 0.0
        worst = (0.0, 0.0)
        total = sum(b.observed for b in self.buckets) or 1.0
        for bucket in self.buckets:
            if bucket.high is None:
                break
            observed += bucket.observed / total
            fitted += bucket.fitted
            gap = abs(observed - fitted) * 100
            if gap > worst[0]:
                worst = (gap, bucket.high)
        return worst


class FitError(ValueError):
    """The metrics hold too little to fit (no observations, one bucket)."""


def fit_lognormal(edges: Sequence[float], cumulative: Sequence[float], total: float, value_sum: float) -> LengthFit:
    """Fit a lognormal to a Prometheus histogram of integer counts (token lengths).

    edges: the finite upper bounds (`le`) in increasing order; cumulative: the observations at or below each
    edge, then the +Inf bucket's; total, value_sum: the histogram's _count and _sum over the same window.

    The mean is the histogram's own (sum / count, exact where the buckets are coarse), so one parameter is
    left, the logarithm's spread, chosen by maximum likelihood of the bucket counts. Integers are read as a
    continuous lognormal rounded to the nearest whole number (as Kaliper's lognormal prompt lengths are
    drawn), so a bucket (a, b] of integers is the interval (a + 0.5, b + 0.5].
    """
    if len(cumulative) != len(edges) + 1:
        raise ValueError("cumulative needs one count per edge and one for +Inf")
    if total <= 0:
        raise FitError("the histogram has no observations in the window")
    mean = value_sum / total
    counts = [cumulative[0], *(cumulative[i] - cumulative[i - 1] for i in range(1, len(cumulative)))]
    counts = [max(c, 0.0) for c in counts]
    lows = [0.0, *edges]
    highs: list[float | None] = [*edges, None]
    occupied = [i for i, c in enumerate(counts) if c > 0]
    if not occupied:
        raise FitError("the histogram's buckets are empty in the window")

    def shares(sigma: float) -> list[float]:
        mu = math.log(mean) - sigma * sigma / 2
        below = [STANDARD.cdf((math.log(edge + 0.5) - mu) / sigma) for edge in edges]
        return [b - a for a, b in zip([0.0, *below], [*below, 1.0], strict=True)]

    def log_likelihood(sigma: float) -> float:
        return sum(c * math.log(max(p, 1e-300)) for c, p in zip(counts, shares(sigma), strict=True) if c > 0)

    sigma = _maximise(log_likelihood, 0.01, 4.0)
    stddev = mean * math.sqrt(math.exp(sigma * sigma) - 1)
    first, last = occupied[0], occupied[-1]
    smallest = int(lows[first]) + 1
    last_high = highs[last]
    buckets = [
        Bucket(low, high, observed, fitted)
        for low, high, observed, fitted in zip(lows, highs, counts, shares(sigma), strict=True)
    ]
    return LengthFit(
        count=total,
        mean=mean,
        stddev=stddev,
        sigma=sigma,
        smallest=smallest,
        largest=int(last_high) if last_high is not None else None,
        buckets=buckets,
    )


def _maximise(function, low: float, high: float) -> float:  # type: ignore[no-untyped-def]
    """The argument in [low, high] where a function of one unimodal peak is highest: a coarse grid over the
    logarithm of the range (sigma spans two decades), then golden-section search around the best point."""
    grid = [low * (high / low) ** (i / 60) for i in range(61)]
    best = max(range(len(grid)), key=lambda i: function(grid[i]))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if function(c) >= function(d):
            b = d
        else:
            a = c
    return (a + b) / 2


@dataclass(frozen=True)
class BurstinessFit:
    """Arrivals' burstiness as a gamma process's shape (vLLM's and Kaliper's `burstiness`: 1 is Poisson, below
    1 burstier), from the counts of requests in equal intervals (those of the pairs with requests), with a 95%
    interval."""

    burstiness: float
    low: float
    high: float
    intervals: int
    interval_s: float
    dispersion: float  # variance over mean of the counts per interval
    busiest_rate: float  # requests per second in the busiest interval


def fit_burstiness(counts: Sequence[float], interval_s: float) -> BurstinessFit:
    """For a renewal process whose gaps have coefficient of variation c, the count in an interval much longer
    than a gap has variance c^2 times its mean; a gamma process of shape k has c^2 = 1/k. So the shape is
    the counts' mean over their variance.

    The variance is read from the differences of neighbouring intervals taken in disjoint pairs ((n1, n2),
    (n3, n4), ...): a slow change of rate over the window (a daily cycle) then does not read as burstiness,
    and the pairs are independent, so the interval is chi-square's with one degree of freedom per pair. Pairs
    with no request at all are left out: a server idle at night says nothing of how its traffic comes."""
    pairs = [(counts[i], counts[i + 1]) for i in range(0, len(counts) - 1, 2) if counts[i] + counts[i + 1] > 0]
    mean = sum(a + b for a, b in pairs) / (2 * len(pairs)) if pairs else 0.0
    if len(pairs) < 2 or mean <= 0:
        raise FitError(
            f"{len(counts)} intervals of {interval_s:g}s with {sum(counts):g} requests: too few to tell how bursty "
            "the arrivals are (at least 4 intervals with requests; widen the window)"
        )
    variance = sum((b - a) ** 2 for a, b in pairs) / (2 * len(pairs))
    if variance <= 0:
        raise FitError("the same number of requests in every interval: no burstiness to fit (a constant rate)")
    dispersion = variance / mean
    freedom = len(pairs)
    # (freedom * variance / true variance) follows chi-square with `freedom` degrees; the shape is 1/dispersion.
    high = 1 / (dispersion * freedom / _chi_square_quantile(0.975, freedom))
    low = 1 / (dispersion * freedom / _chi_square_quantile(0.025, freedom))
    return BurstinessFit(1 / dispersion, low, high, 2 * len(pairs), interval_s, dispersion, max(counts) / interval_s)


def _chi_square_quantile(p: float, freedom: int) -> float:
    from scipy.stats import chi2  # scikit-learn's own dependency; imported when a fit needs it

    return float(chi2.ppf(p, freedom))


@dataclass
class WorkloadFit:
    """What the fleet served over the window, fitted."""

    window_s: float
    selector: str
    input_tokens: LengthFit
    output_tokens: LengthFit
    requests: float
    rate: float  # finished requests per second, all matching series together
    replicas: int
    burstiness: BurstinessFit | None
    prefix_hit_share: float | None
    notes: list[str] = field(default_factory=list)
