"""A percentile of a Prometheus histogram from its cumulative bucket counts (pure).

The estimate is PromQL's histogram_quantile: linear inside the bucket the rank falls in, the first bucket starting
at zero, and the top finite edge for a rank in the +Inf bucket. A histogram places an observation only within a
bucket, so the bucket's edges are the estimate's interval: interpolation inside a bucket never decides anything."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BucketEstimate:
    value: float
    """histogram_quantile's estimate, in the histogram's unit."""
    low: float
    """The lower edge of the bucket it falls in."""
    high: float | None
    """The upper edge; None for the +Inf bucket (unbounded above)."""


def bucket_percentile(buckets: Sequence[tuple[float, float]], percentile: float) -> BucketEstimate | None:
    """`percentile` (0-100) of a histogram given as (upper edge `le`, cumulative count) pairs, +Inf among them;
    None without observations or without the +Inf bucket (every Prometheus histogram has one)."""
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]) or ordered[-1][1] <= 0:
        return None
    rank = percentile / 100 * ordered[-1][1]
    index = next((i for i, (_, count) in enumerate(ordered[:-1]) if count >= rank), len(ordered) - 1)
    if index == len(ordered) - 1:  # in the +Inf bucket: the top finite edge, as histogram_quantile answers
        top = ordered[-2][0] if len(ordered) > 1 else 0.0
        return BucketEstimate(top, top, None)
    high, count = ordered[index]
    low, below = ordered[index - 1] if index > 0 else (0.0, 0.0)
    inside = count - below
    share = (rank - below) / inside if inside > 0 else 1.0
    return BucketEstimate(low + (high - low) * share, low, high)
