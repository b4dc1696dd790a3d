"""Histograms and percentile statistics against exact computations on the raw samples."""

from __future__ import annotations

import math
import random

import pytest

from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.judgement import Bound, Samples, judge
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


# The 95% intervals SciPy 1.17's quantile_test(...).confidence_interval() gives for x = 1..n (its values are then
# the ranks; None where it gives nan, an upper bound beyond the last sample), and for a hundred thousand and a
# million samples scipy.stats.binom's quantiles by the same rule.
SCIPY_RANKS = {
    (10, 0.5): (2, 9), (10, 0.9): (7, None), (10, 0.99): (9, None), (10, 0.999): (10, None),
    (20, 0.5): (6, 15), (20, 0.9): (15, None), (20, 0.95): (17, None), (20, 0.99): (19, None),
    (48, 0.5): (17, 32), (48, 0.9): (39, 48), (48, 0.95): (42, None), (48, 0.99): (46, None),
    (100, 0.5): (40, 61), (100, 0.9): (84, 96), (100, 0.95): (90, 100), (100, 0.99): (97, None),
    (100, 0.999): (99, None),
    (1000, 0.5): (469, 532), (1000, 0.9): (881, 919), (1000, 0.95): (936, 964), (1000, 0.99): (983, 997),
    (1000, 0.999): (997, None),
    (10000, 0.5): (4902, 5099), (10000, 0.9): (8941, 9059), (10000, 0.95): (9457, 9543),
    (10000, 0.99): (9880, 9920), (10000, 0.999): (9983, 9997),
    (100000, 0.5): (49690, 50311), (100000, 0.99): (98938, 99062), (100000, 0.999): (99880, 99920),
    (1000000, 0.5): (499020, 500981), (1000000, 0.99): (989805, 990196), (1000000, 0.999): (998938, 999062),
}  # fmt: skip


@pytest.mark.parametrize(("n", "q"), sorted(SCIPY_RANKS))
def test_rank_interval_is_the_exact_binomial_one(n: int, q: float) -> None:
    """At the edges too: 48 samples bound a p90 by the last one (the normal approximation put it past the end, so
    a healthy stage of long answers read Inconclusive), and 47 of 48 do not bound a p95."""
    assert rank_interval(n, q) == SCIPY_RANKS[n, q]


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


def test_a_healthy_stage_of_long_answers_is_met_on_a_few_dozen_samples_and_too_few_stay_inconclusive() -> None:
    """A 20 s stage of 24 users with 11 s answers gives 48 answers, each first token at about 0.6 s against a
    p90 bound of 3 s: the exact interval's upper end is the 48th sample, so Met. 36 answers are the fewest that bound
    a p90 at 95% (all 35 below the true p90 happens with probability 0.9^35 = 0.02503, over the 0.025 a tail may
    leave), so 35 and fewer stay Inconclusive however fast they were."""
    ttft = Bound("ttft", 90, 3.0)
    for answers, verdict in ((48, "Met"), (36, "Met"), (35, "Inconclusive"), (21, "Inconclusive")):
        fast = histogram_of([0.6 + 0.001 * i for i in range(answers)])
        assert judge(ttft, Samples.of(fast, failed=0)).verdict == verdict, answers
