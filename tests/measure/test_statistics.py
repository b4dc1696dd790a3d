"""Histograms and percentile statistics against exact computations on the raw samples."""

from __future__ import annotations

import math
import random

import pytest

from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.statistics import estimate, percentile_rank, rank_interval

RESOLUTION = 1e-3  # 3 significant digits


def samples(n: int, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [0.105 * math.exp(0.35 * rng.gauss(0, 1)) for _ in range(n)]


def histogram_of(values: list[float]) -> LatencyHistogram:
    h = LatencyHistogram()
    for v in values:
        h.record(v)
    return h


def exact(values: list[float], rank: int) -> float:
    return sorted(values)[rank - 1]


@pytest.mark.parametrize("percentile", [50, 90, 95, 99, 99.9])
def test_percentile_matches_the_exact_order_statistic(percentile: float) -> None:
    values = samples(20_000)
    e = estimate(histogram_of(values), percentile)
    truth = exact(values, percentile_rank(len(values), percentile))
    assert e.value_s == pytest.approx(truth, rel=RESOLUTION)
    assert e.count == 20_000


def test_confidence_interval_uses_the_order_statistics_at_the_binomial_ranks() -> None:
    values = samples(5_000, seed=3)
    low_rank, high_rank = rank_interval(5_000, 0.99)
    e = estimate(histogram_of(values), 99)
    assert e.ci_low_s == pytest.approx(exact(values, low_rank), rel=RESOLUTION)
    assert e.ci_high_s == pytest.approx(exact(values, high_rank), rel=RESOLUTION)
    assert e.ci_low_s <= e.value_s <= e.ci_high_s


def exact_binomial_interval(n: int, q: float, confidence: float) -> tuple[int, int]:
    """Smallest symmetric-tail ranks (l, u) with P(l <= B < u) >= confidence, B ~ Binomial(n, q)."""
    pmf = [math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(n + 1)]
    tail = (1 - confidence) / 2
    cumulative, low = 0.0, 0
    while cumulative + pmf[low] <= tail:
        cumulative += pmf[low]
        low += 1
    cumulative, high = 0.0, n
    while cumulative + pmf[high] <= tail:
        cumulative += pmf[high]
        high -= 1
    return low, high + 1


@pytest.mark.parametrize(("n", "q"), [(200, 0.5), (1000, 0.9), (1000, 0.99), (400, 0.95)])
def test_rank_interval_is_close_to_the_exact_binomial_one(n: int, q: float) -> None:
    low, high = rank_interval(n, q)
    exact_low, exact_high = exact_binomial_interval(n, q, 0.95)
    assert abs(low - exact_low) <= 2
    assert high is not None and abs(high - exact_high) <= 2


def test_coverage_of_the_interval_is_about_the_confidence() -> None:
    """Simulate: the true p90 of Exp(1) is ln(10); the interval should contain it about 95% of the time."""
    truth = math.log(10)
    rng = random.Random(11)
    covered = 0
    for _ in range(400):
        values = sorted(rng.expovariate(1.0) for _ in range(300))
        low, high = rank_interval(300, 0.9)
        assert high is not None
        covered += values[low - 1] <= truth <= values[high - 1]
    assert 0.91 <= covered / 400 <= 0.99


def test_upper_bound_is_absent_when_the_sample_is_too_small() -> None:
    assert rank_interval(100, 0.999)[1] is None
    e = estimate(histogram_of(samples(100)), 99.9)
    assert e.ci_high_s is None and e.relative_ci_width is None


def test_empty_histogram() -> None:
    e = estimate(LatencyHistogram(), 99)
    assert e.value_s is None and e.count == 0


def test_merging_encoded_histograms_is_exact() -> None:
    values = samples(30_000, seed=5)
    parts = [values[i::3] for i in range(3)]  # three "processes"
    merged = LatencyHistogram()
    for part in parts:
        merged.add(LatencyHistogram.decode(histogram_of(part).encode()))
    whole = histogram_of(values)
    assert merged.count == whole.count
    for p in (50, 90, 99, 99.9):
        assert merged.value_at_percentile(p) == whole.value_at_percentile(p)
    assert merged.max == whole.max and merged.mean == pytest.approx(whole.mean)


def test_averaging_percentiles_would_be_wrong() -> None:
    """Why histograms are merged: the mean of per-process p99s is not the p99 of the whole."""
    fast, slow = samples(10_000, seed=1), [v * 3 for v in samples(10_000, seed=2)]
    averaged = (estimate(histogram_of(fast), 99).value_s + estimate(histogram_of(slow), 99).value_s) / 2
    merged = estimate(histogram_of(fast).add(histogram_of(slow)), 99).value_s
    true = exact(fast + slow, percentile_rank(20_000, 99))
    assert merged == pytest.approx(true, rel=RESOLUTION)
    assert abs(averaged - true) / true > 0.1


def test_a_window_without_a_sample_leaves_the_merged_minimum_alone() -> None:
    """hdrh's own add takes an empty histogram's minimum as 0: minMs read 0.0 whenever a window had no sample."""
    merged = LatencyHistogram()
    for window in ([0.120, 0.250], [], [0.105]):
        histogram = LatencyHistogram()
        for seconds in window:
            histogram.record(seconds)
        merged.add(LatencyHistogram.decode(histogram.encode()))
    assert (merged.count, round(merged.min * 1000, 1), round(merged.max * 1000)) == (3, 105.0, 250)


def test_percentiles_are_hdrhs_own_without_its_walk_over_every_bucket() -> None:
    """value_at_percentile and value_at_rank bisect running counts instead of walking every bucket in Python
    as hdrh does (1-2 ms a query on the loop that times requests): the same value as hdrh's, on recorded and
    on decoded histograms, after more samples arrive, at every percentile and rank."""
    rng = random.Random(3)
    for trial, count in enumerate([1, 2, 7, 50, 1000, 20000] * 5):
        histogram = LatencyHistogram()
        for _ in range(count):
            histogram.record(rng.lognormvariate(rng.uniform(-9, 3), rng.uniform(0.01, 2)))
        if trial % 2:
            histogram = LatencyHistogram.decode(histogram.encode())
        for _ in range(2):  # and again once a sample more has changed the running counts
            hdrh = histogram._h
            total = histogram.count
            for p in (0.001, 1, 10, 50, 90, 95, 99, 99.9, 99.99, 100):
                assert histogram.value_at_percentile(p) == hdrh.get_value_at_percentile(p) / 1e6, (count, p)
            for rank in (1, (total + 1) // 2, total):
                assert histogram.value_at_rank(rank) == hdrh.get_value_at_percentile(100.0 * rank / total) / 1e6
            histogram.record(rng.lognormvariate(-3, 1))
