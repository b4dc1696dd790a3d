"""A Prometheus histogram's percentile and the bucket it falls in (kaliper.measure.buckets), on scripted counts:
the estimate PromQL's histogram_quantile gives, with the bucket's edges as its interval."""

from __future__ import annotations

import math

import pytest

from kaliper.measure.buckets import BucketEstimate, bucket_percentile

INF = math.inf
# 100 requests: 10 up to 5 ms, 60 more up to 10 ms, 25 more up to 25 ms, 5 above 25 ms.
BUCKETS = [(0.005, 10.0), (0.01, 70.0), (0.025, 95.0), (INF, 100.0)]


def test_a_percentile_is_interpolated_inside_its_bucket_whose_edges_bound_it() -> None:
    # Rank 50 is the 40th of the 60 in 5-10 ms: two thirds of the way.
    median = bucket_percentile(BUCKETS, 50)
    assert median is not None and (median.low, median.high) == (0.005, 0.01)
    assert median.value == pytest.approx(0.008333333)
    # Rank 90 is the 20th of the 25 in 10-25 ms.
    p90 = bucket_percentile(BUCKETS, 90)
    assert p90 is not None and (p90.value, p90.low, p90.high) == (pytest.approx(0.022), 0.01, 0.025)
    # The first bucket starts at zero; the order the buckets come in does not matter.
    assert bucket_percentile(list(reversed(BUCKETS)), 5) == BucketEstimate(0.0025, 0.0, 0.005)


def test_a_rank_in_the_inf_bucket_is_the_top_edge_and_unbounded_above() -> None:
    assert bucket_percentile(BUCKETS, 99) == BucketEstimate(0.025, 0.025, None)


def test_no_observations_or_no_inf_bucket_is_no_estimate() -> None:
    assert bucket_percentile([(0.005, 0.0), (INF, 0.0)], 50) is None
    assert bucket_percentile([(0.005, 3.0), (0.01, 4.0)], 50) is None
    assert bucket_percentile([], 50) is None
