"""How busy a trial's generation server was, from Prometheus's scrapes of every server pod. Behind several
replicas on a cluster the load generator does not read the server's endpoint (through the Service each read
would reach one replica): Prometheus sees them all. Prometheus finds the pods by the chart's PodMonitor
(serverPodMonitor.enabled) or by annotation-based discovery (the pods carry kaliper.dev/server-metrics=true
and the prometheus.io/scrape, port and path annotations); either way each series must carry the `namespace`
and `pod` labels, as both name them.

The figures are those of kaliper.loadgen.server_metrics.server_load, from the same gauges (each runtime's load_gauges),
taken from the raw samples stored inside the window, never from a sample before it:
- running and queued requests: each pod's average over the window, summed (the mean), and each pod's
  highest reading, summed (the peak; for one replica, its highest);
- the KV cache's highest share in use on any pod;
- preemptions and llama.cpp's busy slots per decode: from each pod's first and last sample inside the
  window (two scrapes at least);
- vLLM's time-weighted means of requests running and queued: each pod's seconds in that state, risen from
  its first to its last sample inside the window, per second between them, summed."""

from __future__ import annotations

import math
from itertools import pairwise

from kaliper.metrics.prometheus import PrometheusMetrics, Window, selector
from kaliper.report.schema import ServerLoad
from kaliper.runtimes import LoadGauges, load_gauges

Samples = dict[str, list[tuple[float, float]]]  # pod -> (unix seconds, value), oldest first


def raw_samples(client: PrometheusMetrics, metric: str, window: Window) -> Samples:
    """The samples stored inside the window, per pod (a pod's series are summed: labels such as model_name)."""
    found: dict[str, dict[float, float]] = {}
    for series in client.instant(f"{metric}{{{selector(window)}}}[{window.range}]", window.end):
        points = found.setdefault(series["metric"].get("pod", ""), {})
        for t, v in series["values"]:
            points[float(t)] = points.get(float(t), 0.0) + float(v)
    return {pod: sorted(points.items()) for pod, points in found.items()}


def first_present(client: PrometheusMetrics, names: tuple[str, ...], window: Window) -> Samples:
    """The samples of the first of a gauge's names (renamed across versions) that has any in the window."""
    for name in names:
        if samples := raw_samples(client, name, window):
            return samples
    return {}


def mean_and_peak(samples: Samples) -> tuple[float | None, float | None]:
    if not samples:
        return None, None
    means = [sum(v for _, v in points) / len(points) for points in samples.values()]
    peaks = [max(v for _, v in points) for points in samples.values()]
    return round(sum(means), 4), sum(peaks)


def rise(points: list[tuple[float, float]]) -> float:
    """One counter series' rise from its first sample to its last (a reset counts from zero)."""
    return sum(b - a if b >= a else b for (_, a), (_, b) in pairwise(points))


def increase(samples: Samples) -> float | None:
    """A counter's increase over the window, summed over pods with two samples in it (a reset counts from 0)."""
    spans = [points for points in samples.values() if len(points) >= 2]
    if not spans:
        return None
    return sum(rise(points) for points in spans)


def busy_slots_per_decode(average: Samples, decodes: Samples) -> float | None:
    """llama.cpp exports the running average since it started (busy slots summed over decode calls / decode
    calls): per pod, the sums at its first and last sample in the window give the window's own average."""
    busy = calls = 0.0
    for pod, points in average.items():
        counted = dict(decodes.get(pod, []))
        paired = [(v, counted[t]) for t, v in points if t in counted]  # the same scrape stamps both
        if len(paired) >= 2:
            (a0, c0), (a1, c1) = paired[0], paired[-1]
            busy, calls = busy + a1 * c1 - a0 * c0, calls + c1 - c0
    return round(busy / calls, 4) if calls > 0 else None


def per_second(samples: Samples) -> float | None:
    """A counter's rise per second between each pod's first and last sample in the window, summed over pods
    (vLLM's seconds spent running or queued: the time-weighted mean of requests in that state)."""
    rates = [rise(points) / (points[-1][0] - points[0][0]) for points in samples.values() if len(points) >= 2]
    return round(sum(rates), 4) if rates else None


def scraped_past(client: PrometheusMetrics, source: str, window: Window, now: float) -> bool:
    """Whether a scrape of the server pods newer than the window's end is stored: the window is complete."""
    latest = client.scalar(f"max(timestamp({load_gauges()[source].marker}{{{selector(window)}}}))", now)
    return latest is not None and latest >= window.end


def server_source(client: PrometheusMetrics, window: Window) -> str | None:
    """Which server the pods run, by a metric only it exports (None: Prometheus has none of their series)."""
    return next((name for name, gauges in load_gauges().items() if client.has_series(gauges.marker, window)), None)


def missing_series(window: Window) -> str:
    markers = ", ".join(gauges.marker for gauges in load_gauges().values())
    return (
        f"server load: Prometheus holds none of {markers} for pods {window.pod_regex} in {window.namespace}: "
        "let it scrape the server pods (the chart's serverPodMonitor.enabled, or pod discovery by the "
        "prometheus.io annotations, keeping the namespace and pod labels)"
    )


def server_load(client: PrometheusMetrics, source: str, window: Window) -> ServerLoad | str:
    """The window's server load, or why Prometheus cannot give it (too few scrapes inside the window)."""
    gauges: LoadGauges = load_gauges()[source]
    running = first_present(client, gauges.running, window)
    if not running:
        return (
            f"server load: no scrape of the server pods inside the {window.seconds} s window (Prometheus scrapes "
            f"every {window.scrape_interval_s:g} s): measure for at least {2 * window.scrape_interval_s:g} s "
            "(load.minDuration)"
        )
    running_mean, running_max = mean_and_peak(running)
    waiting_mean, waiting_max = mean_and_peak(first_present(client, gauges.waiting, window))
    kv_cache = first_present(client, gauges.kv_cache, window)
    kv_peaks = [v for points in kv_cache.values() for _, v in points if not math.isnan(v)]
    slots = None
    if gauges.busy_slots is not None:
        average, calls = (raw_samples(client, name, window) for name in gauges.busy_slots)
        slots = busy_slots_per_decode(average, calls)
    running_weighted = waiting_weighted = None
    if gauges.seconds_in_state is not None:
        running_weighted, waiting_weighted = (
            per_second(raw_samples(client, name, window)) for name in gauges.seconds_in_state
        )
    return ServerLoad(
        source=source,
        read_from="prometheus",
        samples=min(len(points) for points in running.values()),
        pods=len(running),
        running_mean=running_mean,
        running_max=running_max,
        waiting_mean=waiting_mean,
        waiting_max=waiting_max,
        running_time_weighted=running_weighted,
        waiting_time_weighted=waiting_weighted,
        busy_slots_per_decode=slots,
        kv_cache_usage_max=max(kv_peaks) if kv_peaks else None,
        preemptions=increase(first_present(client, gauges.preemptions, window)),
    )
