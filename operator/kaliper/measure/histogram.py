"""Latency histograms: HdrHistogram with 3 significant digits, recorded in microseconds.

Encoded histograms travel between processes and workers and merge exactly; percentiles are never averaged.
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: longer than any request timeout Kaliper allows
SIGNIFICANT_DIGITS = 3


class LatencyHistogram:
    """Latencies in seconds in, seconds out; microseconds inside."""

    __slots__ = ("_h",)

    def __init__(self, histogram: HdrHistogram | None = None) -> None:
        self._h = histogram or HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)

    def record(self, seconds: float) -> None:
        self._h.record_value(min(max(int(seconds * 1e6 + 0.5), LOWEST_US), HIGHEST_US))

    @property
    def count(self) -> int:
        return self._h.get_total_count()

    def value_at_percentile(self, percentile: float) -> float:
        """Seconds at a percentile (0-100): the smallest recorded value with at least that share below or at it."""
        return self._h.get_value_at_percentile(percentile) / 1e6

    def value_at_rank(self, rank: int) -> float:
        """Seconds of the rank-th smallest sample (1-based)."""
        total = self.count
        if total == 0:
            return 0.0
        rank = min(max(rank, 1), total)
        # hdrh turns the percentile back into int(percentile * total / 100 + 0.5), which is `rank` again.
        return self._h.get_value_at_percentile(100.0 * rank / total) / 1e6

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
