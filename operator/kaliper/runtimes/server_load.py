"""How busy a generation server was over an interval, from its load gauges' samples (pure): one computation
for both readers. The load generator reads one server's metrics endpoint at every window edge (one pod's
samples); on a cluster Prometheus's scrapes of every server pod are read (kaliper.metrics.server_load). Which
gauges and counters a server exports is its runtime's (`load_gauges` in kaliper.runtimes); names renamed across
versions are tried in order, the first with samples wins.

- running and queued requests: each pod's average over its samples, summed (the mean), and each pod's highest
  reading, summed (the peak; for one pod, its highest);
- the KV cache's highest share in use on any pod;
- counters (preemptions, the prefix cache's lookups and hits, vLLM's seconds in each state): each pod's rise
  from its first to its last sample (two at least), a reset counting from zero, summed over pods;
- llama.cpp's busy slots per decode: from each pod's first and last pair of samples taken together."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise
from typing import Literal

from kaliper.report.schema import ServerLoad
from kaliper.runtimes.base import LoadGauges

PodSeries = dict[str, list[tuple[float, float]]]
"""pod -> (seconds, value), oldest first."""
Reader = Callable[[str], PodSeries]
"""A metric's samples inside the interval, by name; empty where there are none."""


def first_present(read: Reader, names: tuple[str, ...]) -> PodSeries:
    """The samples of the first of a gauge's names that has any."""
    for name in names:
        if samples := read(name):
            return samples
    return {}


def mean_and_peak(samples: PodSeries) -> tuple[float | None, float | None]:
    if not samples:
        return None, None
    means = [sum(v for _, v in points) / len(points) for points in samples.values()]
    peaks = [max(v for _, v in points) for points in samples.values()]
    return round(sum(means), 4), sum(peaks)


def rise(points: list[tuple[float, float]]) -> float:
    """One counter series' rise from its first sample to its last (a reset counts from zero)."""
    return sum(b - a if b >= a else b for (_, a), (_, b) in pairwise(points))


def increase(samples: PodSeries) -> float | None:
    """A counter's increase, summed over the pods with two samples at least."""
    spans = [points for points in samples.values() if len(points) >= 2]
    return sum(rise(points) for points in spans) if spans else None


def per_second(samples: PodSeries) -> float | None:
    """A counter's rise per second between each pod's first and last sample, summed over pods (vLLM's seconds
    spent running or queued: the time-weighted mean of requests in that state, by Little's law)."""
    rates = [
        rise(points) / (points[-1][0] - points[0][0])
        for points in samples.values()
        if len(points) >= 2 and points[-1][0] > points[0][0]
    ]
    return round(sum(rates), 4) if rates else None


def busy_slots_per_decode(average: PodSeries, decodes: PodSeries) -> float | None:
    """llama.cpp exports the running average since it started (busy slots summed over decode calls / decode
    calls): per pod, the sums at its first and last sample give the interval's own average."""
    busy = calls = 0.0
    for pod, points in average.items():
        counted = dict(decodes.get(pod, []))
        paired = [(v, counted[t]) for t, v in points if t in counted]  # the same reading stamps both
        if len(paired) >= 2:
            (a0, c0), (a1, c1) = paired[0], paired[-1]
            busy, calls = busy + a1 * c1 - a0 * c0, calls + c1 - c0
    return round(busy / calls, 4) if calls > 0 else None


def hit_rate(queries: PodSeries, hits: PodSeries) -> float | None:
    asked, found = increase(queries), increase(hits)
    return round(found / asked, 4) if asked and found is not None else None


def server_load(
    source: str, gauges: LoadGauges, read: Reader, read_from: Literal["endpoint", "prometheus"]
) -> ServerLoad | None:
    """The server's load from its gauges' samples; None where it has no sample of requests running."""
    running = first_present(read, gauges.running)
    if not running:
        return None
    running_mean, running_max = mean_and_peak(running)
    waiting_mean, waiting_max = mean_and_peak(first_present(read, gauges.waiting))
    kv_peaks = [v for points in first_present(read, gauges.kv_cache).values() for _, v in points if not math.isnan(v)]
    slots = busy_slots_per_decode(*(read(name) for name in gauges.busy_slots)) if gauges.busy_slots else None
    running_weighted = waiting_weighted = None
    if gauges.seconds_in_state is not None:
        running_weighted, waiting_weighted = (per_second(read(name)) for name in gauges.seconds_in_state)
    prefix = hit_rate(*(read(name) for name in gauges.prefix_cache)) if gauges.prefix_cache else None
    return ServerLoad(
        source=source,
        read_from=read_from,
        samples=min(len(points) for points in running.values()),
        pods=len(running) if read_from == "prometheus" else None,
        running_mean=running_mean,
        running_max=running_max,
        waiting_mean=waiting_mean,
        waiting_max=waiting_max,
        running_time_weighted=running_weighted,
        waiting_time_weighted=waiting_weighted,
        busy_slots_per_decode=slots,
        kv_cache_usage_max=max(kv_peaks) if kv_peaks else None,
        preemptions=increase(first_present(read, gauges.preemptions)),
        prefix_cache_hit_rate=prefix,
    )
