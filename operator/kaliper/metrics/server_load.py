"""How busy a trial's generation server was, from Prometheus's scrapes of every server pod. Behind several
replicas on a cluster the load generator does not read the server's endpoint (through the Service each read
would reach one replica): Prometheus sees them all. Prometheus finds the pods by the chart's PodMonitor
(serverPodMonitor.enabled) or by annotation-based discovery (the pods carry kaliper.dev/server-metrics=true
and the prometheus.io/scrape, port and path annotations); either way each series must carry the `namespace`
and `pod` labels, as both name them.

The figures are computed as for the load generator's readings of one endpoint (kaliper.runtimes.server_load),
from the raw samples Prometheus stored inside the window, never from a sample before it."""

from __future__ import annotations

from kaliper.metrics.prometheus import PrometheusMetrics, QueryWindow, selector
from kaliper.report.schema import ServerLoad
from kaliper.runtimes import load_gauges
from kaliper.runtimes.server_load import PodSeries
from kaliper.runtimes.server_load import server_load as load_from_samples


def raw_samples(client: PrometheusMetrics, metric: str, window: QueryWindow) -> PodSeries:
    """The samples stored inside the window, per pod (a pod's series are summed: labels such as model_name)."""
    found: dict[str, dict[float, float]] = {}
    for series in client.instant(f"{metric}{{{selector(window)}}}[{window.range}]", window.end):
        points = found.setdefault(series["metric"].get("pod", ""), {})
        for t, v in series["values"]:
            points[float(t)] = points.get(float(t), 0.0) + float(v)
    return {pod: sorted(points.items()) for pod, points in found.items()}


def scraped_past(client: PrometheusMetrics, source: str, window: QueryWindow, now: float) -> bool:
    """Whether a scrape of the server pods newer than the window's end is stored: the window is complete."""
    latest = client.scalar(f"max(timestamp({load_gauges()[source].marker}{{{selector(window)}}}))", now)
    return latest is not None and latest >= window.end


def server_source(client: PrometheusMetrics, window: QueryWindow) -> str | None:
    """Which server the pods run, by a metric only it exports (None: Prometheus has none of their series)."""
    return next((name for name, gauges in load_gauges().items() if client.has_series(gauges.marker, window)), None)


def missing_series(window: QueryWindow) -> str:
    markers = ", ".join(gauges.marker for gauges in load_gauges().values())
    return (
        f"server load: Prometheus holds none of {markers} for pods {window.pod_regex} in {window.namespace}: "
        "let it scrape the server pods (the chart's serverPodMonitor.enabled, or pod discovery by the "
        "prometheus.io annotations, keeping the namespace and pod labels)"
    )


def server_load(client: PrometheusMetrics, source: str, window: QueryWindow) -> ServerLoad | str:
    """The window's server load, or why Prometheus cannot give it (too few scrapes inside the window)."""
    found = load_from_samples(
        source, load_gauges()[source], lambda name: raw_samples(client, name, window), "prometheus"
    )
    if found is None:
        return (
            f"server load: no scrape of the server pods inside the {window.seconds} s window (Prometheus scrapes "
            f"every {window.scrape_interval_s:g} s): measure for at least {2 * window.scrape_interval_s:g} s "
            "(load.minDuration)"
        )
    return found
