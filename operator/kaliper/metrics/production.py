"""What production showed over a window, read from the Prometheus that scrapes the servers: how many requests
they answered, on how many replicas, and the latency percentiles their own histogram gives, each with the edges of
the bucket it falls in (kaliper.measure.buckets). The figures come from the raw samples inside the window, as the
workload's do (kaliper.metrics.workload_query): never extrapolated to the window's edges."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from kaliper.measure.buckets import bucket_percentile
from kaliper.metrics.prometheus import PrometheusMetrics
from kaliper.metrics.workload_query import WindowReader, normalise_selector, replica_of, series_increase
from kaliper.profiling.prediction import Band, ProductionWindow


class ProductionError(Exception):
    """Prometheus holds too little of production's series in the window to read it; the message says what."""


def read_production(
    client: PrometheusMetrics, selector: str, histogram: str, window_s: float, end: float, percentiles: Sequence[float]
) -> ProductionWindow:
    """Production over the `window_s` seconds before unix time `end`: the series of `histogram` (a server's own
    histogram of each request's time, in seconds) that `selector`'s label matchers select, every replica (a
    series' pod, else its scrape target) together."""
    matchers = normalise_selector(selector)
    reader = WindowReader(client, matchers, window_s, end)
    counts = {labels: points for labels, points in reader.samples(f"{histogram}_count").items() if len(points) >= 2}
    at = datetime.fromtimestamp(end, UTC).isoformat(timespec="seconds")
    if not counts:
        raise ProductionError(
            f"no {histogram}_count{{{matchers}}} series with two samples in the {window_s:g} s before {at} at "
            f"{client.client.shown}: check the selector, and that Prometheus scrapes the servers' metrics"
        )
    requests = round(sum(series_increase(points) for points in counts.values()))
    # Each series' own span: the replicas are scraped alike, and a replica that came or went counts for its part.
    spans = [points[-1][0] - points[0][0] for points in counts.values()]
    replicas = len({replica_of(labels) for labels in counts})
    seconds = sum(spans) / len(spans)
    buckets = reader.bucket_increases(histogram)
    latency = {}
    for percentile in percentiles:
        found = bucket_percentile(list(buckets.items()), percentile)
        if found is not None:  # seconds to milliseconds
            high = found.high * 1000 if found.high is not None else None
            latency[percentile] = Band(found.value * 1000, found.low * 1000, high)
    return ProductionWindow(seconds, requests, float(replicas), latency)
