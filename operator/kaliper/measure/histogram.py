"""Latency histograms: HdrHistogram with 3 significant digits, recorded in microseconds.

Encoded histograms travel between processes and workers and merge exactly; percentiles are never averaged.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: longer than any request timeout Kaliper allows
SIGNIFICANT_DIGITS = 3


class LatencyHistogram:
    """Latencies in seconds in, seconds out; microseconds inside."""

    __slots__ = ("_cumulative", "_cumulative_total", "_h")

    def __init__(self, histogram: HdrHistogram | None = None) -> None:
        self._h = histogram or HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self._cumulative: list[int] = []
        self._cumulative_total = -1

    def record(self, seconds: float) -> None:
        self._h.record_value(min(max(int(seconds * 1e6 + 0.5), LOWEST_US), HIGHEST_US))

    @property
    def count(self) -> int:
        return self._h.get_total_count()

    def value_at_percentile(self, percentile: float) -> float:
        """Seconds at a percentile (0-100): the smallest recorded value with at least that share below or at it."""
        if percentile <= 0:
            return self._h.get_value_at_percentile(0) / 1e6
        # hdrh's own rank for a percentile (get_target_count_at_percentile)
        return self._value_at_count(max(int(min(percentile, 100.0) * self.count / 100 + 0.5), 1))

    def value_at_rank(self, rank: int) -> float:
        """Seconds of the rank-th smallest sample (1-based)."""
        total = self.count
        if total == 0:
            return 0.0
        return self._value_at_count(min(max(rank, 1), total))

    def _value_at_count(self, target: int) -> float:
        """The value hdrh's get_value_at_percentile gives for the rank `target`, found by bisecting the running
        counts, which are summed once per count of samples: hdrh walks every bucket in Python on each query
        (1-2 ms for a value of 100 ms), and the queries of a window's statistics ran on the event loop that
        times the requests, delaying the few that answered meanwhile."""
        h = self._h
        if self._cumulative_total != h.get_total_count():
            last = min(h._counts_index_for(h.max_value) + 1, h.counts_len, h.encoder.payload.counts_len)
            self._cumulative = list(accumulate(h.counts[:last]))
            self._cumulative_total = h.get_total_count()
        index = bisect_left(self._cumulative, target)
        if index >= len(self._cumulative):
            return 0.0
        return h.get_highest_equivalent_value(h.get_value_from_index(index)) / 1e6

    @property
    def mean(self) -> float:
        return self._h.get_mean_value() / 1e6 if self.count else 0.0

    @property
    def max(self) -> float:
        return self._h.get_max_value() / 1e6 if self.count else 0.0

    @property
    def min(self) -> float:
        return self._h.get_min_value() / 1e6 if self.count else 0.0

    def add(self, other: LatencyHistogram) -> LatencyHistogram:
        # hdrh's add takes an empty histogram's minimum as 0: a window without a sample would set every
        # merged minimum to 0 ms.
        if other.count:
            self._h.add(other._h)
        return self

    def encode(self) -> str:
        """Compressed, base64: what crosses process and network boundaries."""
        return self._h.encode().decode("ascii")

    @classmethod
    def decode(cls, encoded: str) -> LatencyHistogram:
        return cls(HdrHistogram.decode(encoded.encode("ascii")))
