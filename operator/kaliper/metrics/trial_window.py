"""The resource query of one cluster trial: which Prometheus, which pods, which window, and whether to wait
for the scrape that closes it. The run's spec.metrics decides, over the operator's defaults (the chart's
values); the figures themselves come from kaliper.metrics.prometheus."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kaliper.api.modeldeployment import ModelDeploymentTemplate
from kaliper.api.profilerun import MetricsSpec
from kaliper.api.units import parse_duration
from kaliper.metrics import server_load as prometheus_server_load
from kaliper.metrics.prometheus import PrometheusMetrics, QueryWindow, trial_resources
from kaliper.metrics.promql_scope import QueryScope
from kaliper.report.schema import ServerLoad, StageResult, TrialResources

# How long after the window's end a trial waits for Prometheus's next scrape: three intervals and a little
# slack (a scrape can be late), after which the figures are read from what is there.
SCRAPE_WAITS = 3
SCRAPE_SLACK_S = 10


@dataclass(frozen=True)
class MetricsDefaults:
    """What the operator was started with (KALIPER_PROMETHEUS_URL and friends)."""

    prometheus_url: str | None
    scrape_interval: str
    dcgm_enabled: bool
    dcgm_pod_label: str
    query_namespaces: tuple[str, ...] = ()  # besides a run's own, whose series its customQueries may read


@dataclass(frozen=True)
class TrialQuery:
    """Everything the resource query of a trial needs, decided from the spec and the operator's defaults."""

    prometheus_url: str
    timeout_s: float
    scrape_interval_s: float
    gpu: bool
    dcgm_pod_label: str
    profiling: bool


def trial_query(metrics: MetricsSpec, defaults: MetricsDefaults, gpus: int) -> TrialQuery | None:
    """None when no Prometheus is configured at all."""
    prometheus, dcgm = metrics.prometheus, metrics.dcgm  # dcgm unset: the operator's defaults
    url = str(prometheus.url) if prometheus else defaults.prometheus_url
    if url is None:
        return None
    return TrialQuery(
        prometheus_url=url,
        timeout_s=parse_duration(prometheus.timeout) if prometheus else 10,
        scrape_interval_s=parse_duration(prometheus.scrape_interval if prometheus else defaults.scrape_interval),
        gpu=bool(gpus and (dcgm.enabled if dcgm else defaults.dcgm_enabled)),
        dcgm_pod_label=dcgm.pod_label if dcgm else defaults.dcgm_pod_label,
        profiling=bool(dcgm and dcgm.profiling_metrics),
    )


def load_window(namespace: str, pod_regex: str, stage: StageResult, scrape_interval_s: float) -> QueryWindow:
    """The measured part of the stage: after the warm-up, for as long as it was measured."""
    start = stage.started_at.timestamp() + stage.warmup_s
    return QueryWindow(
        namespace=namespace,
        pod_regex=pod_regex,
        end=start + stage.measured_s,
        seconds=max(1, round(stage.measured_s)),
        scrape_interval_s=scrape_interval_s,
    )


def gpus_of(deployment: ModelDeploymentTemplate) -> int:
    return deployment.resources.gpu.count if deployment.resources and deployment.resources.gpu else 0


@dataclass(frozen=True)
class TrialMeasurement:
    """One cluster trial's load window as Prometheus scraped it: the server pods' resources and, for a
    generation trial behind several replicas, the servers' own load."""

    metrics: MetricsSpec
    defaults: MetricsDefaults
    deployment: ModelDeploymentTemplate | None  # None: the run loads a URL, not a deployment of its own
    namespace: str
    trial: str
    pod_regex: str | None  # None: no server pods found
    stage: StageResult
    now: datetime

    @property
    def scope(self) -> QueryScope:
        """What the run's own PromQL (customQueries) may read: its namespace, and those the admin allowed."""
        return QueryScope(self.namespace, self.defaults.query_namespaces)

    def waiting_for_scrape(self, query: TrialQuery, window: QueryWindow) -> bool:
        return self.now.timestamp() <= window.end + SCRAPE_WAITS * query.scrape_interval_s + SCRAPE_SLACK_S

    def resources(self) -> TrialResources | None:
        """The trial's figures for its load window; None while waiting for the scrape that closes it. What
        cannot be measured (no Prometheus, no server pods) is said in `unavailable`, never raised."""
        if self.deployment is None:
            return TrialResources(source="prometheus", unavailable=["resources: the target is a URL, not a deployment"])
        query = trial_query(self.metrics, self.defaults, gpus_of(self.deployment))
        if query is None:
            return TrialResources(
                source="prometheus", unavailable=["resources: no Prometheus configured (spec.metrics.prometheus)"]
            )
        if self.pod_regex is None:
            return TrialResources(source="prometheus", unavailable=[f"resources: no server pods of {self.trial} found"])
        window = load_window(self.namespace, self.pod_regex, self.stage, query.scrape_interval_s)
        return trial_resources(
            PrometheusMetrics(query.prometheus_url, query.timeout_s, self.scope),
            window,
            wait_for_scrape=self.waiting_for_scrape(query, window),
            gpu=query.gpu,
            dcgm_pod_label=query.dcgm_pod_label,
            profiling=query.profiling,
            custom_queries=self.metrics.custom_queries or [],
        )

    def server_load(self) -> ServerLoad | str | None:
        """The servers' load from Prometheus's scrapes of every server pod; None while waiting for the scrape
        that closes the window; a sentence when Prometheus cannot give it. Asked once resources() has its
        figures."""
        if self.deployment is None or self.pod_regex is None:
            return f"server load: no server pods of {self.trial} found"
        query = trial_query(self.metrics, self.defaults, gpus_of(self.deployment))
        if query is None:
            return "server load: no Prometheus configured (spec.metrics.prometheus)"
        window = load_window(self.namespace, self.pod_regex, self.stage, query.scrape_interval_s)
        client = PrometheusMetrics(query.prometheus_url, query.timeout_s)
        try:
            source = prometheus_server_load.server_source(client, window)
            if source is None:
                return prometheus_server_load.missing_series(window)
            if self.waiting_for_scrape(query, window) and not prometheus_server_load.scraped_past(
                client, source, window, self.now.timestamp()
            ):
                return None
            return prometheus_server_load.server_load(client, source, window)
        except Exception as exc:  # any failure to query is reported, not fatal
            return f"server load: Prometheus at {query.prometheus_url} could not be queried: {exc}"
