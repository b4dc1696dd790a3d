"""What production showed over a window, read from the Prometheus that scrapes the servers: how many requests
they answered, on how many replicas, and the latency percentiles their own histogram gives, each with the edges of
the bucket it falls in (kaliper.measure.buckets). The figures come from the raw samples inside the window, as the
workload's do (kaliper.metrics.workload_query): never extrapolated to the window's edges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx

from kaliper.measure.buckets import bucket_percentile
from kaliper.metrics.prometheus import PrometheusMetrics
from kaliper.metrics.prometheus_api import PrometheusError
from kaliper.metrics.promql_scope import QueryRefused
from kaliper.metrics.workload_query import (
    WindowReader,
    WorkloadError,
    normalise_selector,
    replica_of,
    series_increase,
)
from kaliper.profiling.prediction import (
    Band,
    PredictionScore,
    ProductionWindow,
    ProfiledLevel,
    compared_percentiles,
    deployed_configuration,
    profiled_levels,
    score,
)
from kaliper.report.schema import ProfileReport


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


class NotScored(Exception):
    """Nothing to score: the profile has no figures of the configuration, or production could not be read.
    `reason` is PredictionHolds's; the message names the setting to change."""

    def __init__(self, reason: str, message: str, configuration: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.configuration = reason, message, configuration


@dataclass(frozen=True)
class Scored:
    score: PredictionScore
    window: ProductionWindow
    levels: list[ProfiledLevel]
    configuration: dict[str, str]


def score_production(
    report: ProfileReport,
    configuration: dict[str, str] | None,
    client: PrometheusMetrics,
    query: tuple[str, str, float, float],
    tolerance: float,
    configuration_field: str,
) -> Scored:
    """A profile's prediction held to production, for `kaliper compare --from-prometheus` and the operator alike:
    the configuration (`configuration`, else the profile's choice), its measured levels, production over the
    window `query` names (selector, histogram, seconds, end) and the score; NotScored says why not, naming
    `configuration_field` where the configuration is at fault."""
    chosen = configuration or deployed_configuration(report)
    if chosen is None:
        raise NotScored("ProfileUnavailable", f"{report.name} chose no configuration: name the one deployed in "
                        f"{configuration_field}")  # fmt: skip
    levels = profiled_levels(report, chosen)
    if not levels:
        shown = " ".join(f"{k}={v}" for k, v in chosen.items())
        message = f"{report.name} has no succeeded trial of {shown}: check {configuration_field}"
        raise NotScored("ProfileUnavailable", message, chosen)
    selector, histogram, window_s, end = query
    try:
        window = read_production(client, selector, histogram, window_s, end, compared_percentiles(report))
    except (ProductionError, WorkloadError, PrometheusError, QueryRefused) as exc:
        raise NotScored("ProductionUnavailable", str(exc), chosen) from exc  # their messages carry no password
    except httpx.TransportError as exc:
        message = f"cannot reach Prometheus at {client.client.shown}: {exc}"
        raise NotScored("ProductionUnavailable", message, chosen) from exc
    return Scored(score(levels, window, tolerance=tolerance), window, levels, chosen)
