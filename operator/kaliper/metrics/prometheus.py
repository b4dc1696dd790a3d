"""A trial's resource figures from Prometheus: cAdvisor (CPU, throttling, memory) and dcgm-exporter (GPU).
Restarts and OOM kills come from the trial pods' own status instead (kaliper.controllers.diagnosis).

Every figure comes from samples inside the trial's measured window, never from the idle time around it:
counters from their raw samples inside the window (no extrapolation to its edges),
gauges by `*_over_time` over the window, the peak and the series by rates over sub-windows that lie
inside it. How far apart the samples are is read from Prometheus itself (the scrape interval, and the
kubelet's cAdvisor, which refreshes container stats only every 10-15 s): a figure needs two samples inside
the window, and a window that holds fewer is reported as too short, with what to change.

Before it trusts a query, the layer checks that the series it relies on exist with the labels it filters
on; a figure whose series are missing (or whose value is NaN) is reported as unavailable with the reason,
never as zero.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from kaliper.api.profilerun import CustomQuery
from kaliper.measure.statistics import nearest_rank
from kaliper.metrics.prometheus_api import PrometheusAPI
from kaliper.metrics.promql_scope import QueryScope
from kaliper.report.schema import CustomFigure, ResourceSeriesPoint, TrialResources

CONTAINER = 'container!="",container!="POD"'
CADVISOR_REFRESH_S = 15.0  # the kubelet's cAdvisor refreshes container stats every 10 s, up to 15 s when idle
# How dcgm-exporter names a series' pod and namespace: `pod`/`namespace` (2.x and later), `pod_name`/
# `pod_namespace` (1.x, with `container_name`), and `exported_pod`/`exported_namespace` when a ServiceMonitor
# without honorLabels renames them.
DCGM_NAMESPACE_LABEL = {"pod": "namespace", "pod_name": "pod_namespace", "exported_pod": "exported_namespace"}
DCGM_POD_LABELS = tuple(DCGM_NAMESPACE_LABEL)
# One physical GPU, or one MIG instance of it (GPU_I_ID is absent on a whole GPU, and `by` groups it as empty).
GPU_INSTANCE = "UUID, GPU_I_ID"


@dataclass(frozen=True)
class QueryWindow:
    namespace: str
    pod_regex: str  # the trial's server pods, such as "iris-t3-5d9c7b8f4-[a-z0-9]{5}"
    end: float  # unix seconds
    seconds: int
    scrape_interval_s: float = 15.0  # how often Prometheus scrapes (how long to wait for the final scrape)
    sample_spacing_s: float | None = None  # seconds between stored samples, as measured (samples_in)

    @property
    def range(self) -> str:
        return f"{self.seconds}s"

    @property
    def rate_range_s(self) -> int:
        """Sub-window of the peak and the series: two sample spacings (each rate needs two samples), at most
        the whole window."""
        spacing = self.sample_spacing_s or self.scrape_interval_s
        return max(1, min(self.seconds, round(2 * spacing)))


def selector(window: QueryWindow, pod_label: str = "pod") -> str:
    return f'{DCGM_NAMESPACE_LABEL[pod_label]}="{window.namespace}",{pod_label}=~"{window.pod_regex}"'


def fill_placeholders(query: str, window: QueryWindow) -> str:
    """{namespace}, {pod} (a regex of the trial's pods) and {window} in a custom query; other braces (label
    matchers) are left as they are."""
    values = {"{namespace}": window.namespace, "{pod}": window.pod_regex, "{window}": window.range}
    for placeholder, value in values.items():
        query = query.replace(placeholder, value)
    return query


def subquery_step(window: QueryWindow) -> str:
    """Resolution of the *_over_time subqueries: 5s, finer for short windows so each holds three points."""
    return f"{max(1, min(5, window.seconds // 3))}s"


def container_queries(window: QueryWindow) -> dict[str, str]:
    """PromQL of the CPU peak and the memory figures (pure: tested against a real Prometheus). The CPU average
    and the throttling come from the window's raw samples instead (counter_increases)."""
    s, w, step = selector(window), window.range, subquery_step(window)
    rate_range = window.rate_range_s
    cpu_rate = f"sum(rate(container_cpu_usage_seconds_total{{{s},{CONTAINER}}}[{rate_range}s]))"
    # The peak's sub-windows end between (start + rate range) and the end: all of them inside the window. When
    # that span is shorter than a subquery step (few samples: the rate range is the whole window), it holds
    # no evaluation point, and the one rate over the window is the peak that can be measured.
    peak_span = window.seconds - rate_range
    peak = f"max_over_time({cpu_rate}[{peak_span}s:{step}])" if peak_span >= int(step[:-1]) else cpu_rate
    return {
        "cpu_peak_cores": peak,
        # Per container over the window's own samples, then summed (a subquery would reuse a sample from before).
        "memory_avg_bytes": f"sum(avg_over_time(container_memory_working_set_bytes{{{s},{CONTAINER}}}[{w}]))",
        "memory_peak_bytes": f"sum(max_over_time(container_memory_working_set_bytes{{{s},{CONTAINER}}}[{w}]))",
    }


def gpu_queries(window: QueryWindow, pod_label: str, utilization_metric: str) -> dict[str, str]:
    """PromQL of the GPU figures (pure: tested against a real Prometheus).

    A GPU shared by time-slicing shows the same whole-GPU series once per pod on it, and several MIG
    instances of one GPU show its power once each: so each figure is taken once per GPU (or MIG instance,
    for what an instance has of its own: utilization, memory) before it is summed or averaged over the
    trial's GPUs, never summed per pod. Power belongs to the whole GPU."""
    s, w, step = selector(window, pod_label), window.range, subquery_step(window)
    scale = "100 * " if utilization_metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" else ""  # a 0-1 ratio
    return {
        "gpu_utilization_percent": (
            f"{scale}avg(max by ({GPU_INSTANCE}) (avg_over_time({utilization_metric}{{{s}}}[{w}])))"
        ),
        "gpu_memory_peak_mib": (
            f"max_over_time(sum(max by ({GPU_INSTANCE}) (DCGM_FI_DEV_FB_USED{{{s}}}))[{w}:{step}])"
        ),
        "gpu_power_avg_watts": f"sum(max by (UUID) (avg_over_time(DCGM_FI_DEV_POWER_USAGE{{{s}}}[{w}])))",
    }


# metrics.dcgm.profilingMetrics: report figures -> DCGM profiling fields (ratios 0-1).
PROFILING_FIELDS = {
    "gpu_graphics_engine_active_percent": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "gpu_sm_active_percent": "DCGM_FI_PROF_SM_ACTIVE",
}


def profiling_query(window: QueryWindow, pod_label: str, metric: str) -> str:
    """A profiling ratio as a percentage over the window, averaged over the trial's GPUs or MIG instances."""
    return f"100 * avg(avg_over_time({metric}{{{selector(window, pod_label)}}}[{window.range}]))"


@dataclass
class Figures:
    values: dict[str, float] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)
    window: QueryWindow | None = None  # the window as queried, with its measured sample spacing


class PrometheusMetrics:
    def __init__(self, url: str, timeout_s: float = 10, scope: QueryScope | None = None) -> None:
        # Bounded at every level: PromQL's own timeout on the server, an HTTP timeout on each request, and
        # few retries (prometheus_api), so one query costs at most about three timeouts.
        self.client = PrometheusAPI(url, timeout_s)
        self.timeout_s = timeout_s
        # What a namespace's own PromQL may read (the operator's runs); None: `kaliper run`, or the CLI's user.
        self.scope = scope

    def instant(self, query: str, at: float) -> list[dict[str, Any]]:
        return self.client.query(query, at, self.timeout_s)

    def written_instant(self, query: str, at: float) -> list[dict[str, Any]]:
        """An instant query a user wrote (in part): confined to the run's namespace first, where it has one;
        QueryRefused says why not. The queries this module builds name the trial's namespace themselves."""
        return self.instant(self.scope.confine(query) if self.scope else query, at)

    def scalar(self, query: str, at: float) -> float | None:
        """The single value of an instant query, or None when there is no series or the value is NaN."""
        result = self.instant(query, at)
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) or math.isinf(value) else value

    def has_series(self, metric: str, window: QueryWindow, pod_label: str = "pod") -> bool:
        return self.scalar(f"count({metric}{{{selector(window, pod_label)}}})", window.end) not in (None, 0)

    def samples_in(self, window: QueryWindow) -> int:
        """The fewest samples any of the trial's CPU series holds inside the window."""
        query = (
            f"min(count_over_time(container_cpu_usage_seconds_total{{{selector(window)},{CONTAINER}}}[{window.range}]))"
        )
        count = self.scalar(query, window.end)
        return int(count or 0)

    def scraped_past(self, window: QueryWindow) -> bool:
        """Whether a sample newer than the window's end is stored: the final scrape is in."""
        query = f"max(timestamp(container_cpu_usage_seconds_total{{{selector(window)},{CONTAINER}}}))"
        latest = self.scalar(query, time.time())
        return latest is not None and latest >= window.end

    def wait_for_scrape(self, window: QueryWindow, scrape_interval_s: float, deadline_s: float = 60) -> bool:
        """Wait until the final scrape is in, up to a deadline (the operator asks scraped_past once per step
        instead of waiting)."""
        give_up = time.time() + max(deadline_s, scrape_interval_s * 3)
        while time.time() < give_up:
            if self.scraped_past(window):
                return True
            time.sleep(min(1.0, scrape_interval_s / 2))
        return False

    def series(self, window: QueryWindow) -> list[tuple[float, float, float]]:
        """(unix seconds, CPU cores, memory working-set bytes) over the window, summed over the trial's
        pods, at the subquery resolution: what rightsizing takes its CPU percentile from."""
        s, step, rate_range = selector(window), subquery_step(window), window.rate_range_s
        queries = {
            "cpu": f"sum(rate(container_cpu_usage_seconds_total{{{s},{CONTAINER}}}[{rate_range}s]))",
            "memory": f"sum(container_memory_working_set_bytes{{{s},{CONTAINER}}})",
        }
        # From the first point whose rate range lies inside the window.
        first = window.end - window.seconds + rate_range
        start, end = datetime.fromtimestamp(min(first, window.end), UTC), datetime.fromtimestamp(window.end, UTC)
        values: dict[str, dict[float, float]] = {}
        for name, query in queries.items():
            result = self.client.query_range(query, start, end, step)
            values[name] = {float(t): float(v) for t, v in (result[0]["values"] if result else [])}
        return [
            (t, values["cpu"][t], values["memory"][t])
            for t in sorted(values["cpu"])
            if t in values["memory"] and not math.isnan(values["cpu"][t])
        ]

    def custom(self, window: QueryWindow, queries: list[CustomQuery]) -> tuple[list[CustomFigure], list[str]]:
        """A ProfileRun's metrics.customQueries over the trial window: {namespace}, {pod} and {window} filled
        in, the series over the window reduced to one figure by the query's aggregate. A query that fails or
        returns other than one series is reported unavailable, with the reason."""
        figures, unavailable = [], []
        over_time = {"avg": "avg_over_time", "max": "max_over_time", "min": "min_over_time"}
        for query in queries:
            promql = fill_placeholders(query.query, window)
            if query.aggregate != "last":
                promql = f"{over_time[query.aggregate]}(({promql})[{window.range}:{subquery_step(window)}])"
            try:
                result = self.written_instant(promql, window.end)
            except Exception as exc:  # a PromQL error (or a refusal) is the user's to fix: say which query and why
                unavailable.append(f"customQueries {query.name}: {exc}")
                continue
            if len(result) != 1:
                unavailable.append(
                    f"customQueries {query.name}: returned {len(result)} series, not one; aggregate it in PromQL "
                    "(such as sum(...))"
                )
                continue
            value = float(result[0]["value"][1])
            if math.isnan(value) or math.isinf(value):
                unavailable.append(f"customQueries {query.name}: the value is {value}")
                continue
            figures.append(CustomFigure(name=query.name, value=value, unit=query.unit))
        return figures, unavailable

    def _read(self, queries: dict[str, str], at: float, figures: Figures) -> None:
        """Each query's single value into `figures`, or why there is none (never a zero)."""
        for name, query in queries.items():
            value = self.scalar(query, at)
            if value is None:
                figures.unavailable.append(f"{name}: the query returned no value")
            else:
                figures.values[name] = value

    def trial_figures(
        self, window: QueryWindow, gpu: bool = False, dcgm_pod_label: str = "auto", profiling: bool = False
    ) -> Figures:
        """The trial's figures; `window` comes back in `Figures.window` with its measured sample spacing."""
        figures = Figures(window=window)
        queries: dict[str, str] = {}
        samples = self.samples_in(window) if self.has_series("container_cpu_usage_seconds_total", window) else None
        if samples is None:
            figures.unavailable.append(
                f"cpu, memory: no cAdvisor series for pods {window.pod_regex} in {window.namespace} "
                "(is Prometheus scraping the kubelets' /metrics/cadvisor?)"
            )
        elif samples < 2:
            # Samples carry cAdvisor's own timestamps, up to one refresh older than the scrape: two of them
            # are apart by up to a scrape interval plus a refresh, and only twice that holds two for sure.
            needed = 2 * (window.scrape_interval_s + CADVISOR_REFRESH_S)
            figures.unavailable.append(
                f"cpu, memory: the {window.seconds} s measurement window holds {samples} sample(s) per container; "
                f"figures need two (Prometheus scrapes every {window.scrape_interval_s:g} s, cAdvisor refreshes "
                f"every 10-15 s): measure for at least {needed:g} s (load.minDuration)"
            )
        else:
            window = replace(window, sample_spacing_s=window.seconds / samples)
            figures.window = window
            queries = container_queries(window)
            self._counters(window, figures)
        self._read(queries, window.end, figures)
        if gpu:
            self._gpu(window, dcgm_pod_label, figures, profiling)
        return figures

    def counter_increases(self, metric: str, window: QueryWindow) -> list[tuple[float, float]]:
        """Per series with two samples or more inside the window: (its increase from the first to the last of
        them, the seconds between them). No extrapolation: with few samples (a 30 s scrape, cAdvisor's irregular
        10-15 s stamps) `increase` extrapolates only part of the way to the window's edges and reads low."""
        query = f"{metric}{{{selector(window)},{CONTAINER}}}[{window.range}]"
        result = self.instant(query, window.end)
        found = []
        for series in result:
            points = [(float(t), float(v)) for t, v in series["values"]]
            if len(points) >= 2:
                # A counter that went down was reset (a restarted container): count from zero again.
                increase = sum(b - a if b >= a else b for (_, a), (_, b) in pairwise(points))
                found.append((increase, points[-1][0] - points[0][0]))
        return found

    def _counters(self, window: QueryWindow, figures: Figures) -> None:
        """The CPU average (each container's rate over its sampled span, summed) and the throttled share."""
        cpu = self.counter_increases("container_cpu_usage_seconds_total", window)
        if cpu:
            figures.values["cpu_avg_cores"] = sum(increase / span for increase, span in cpu)
        else:
            figures.unavailable.append("cpu_avg_cores: no CPU series with two samples inside the window")
        periods = sum(i for i, _ in self.counter_increases("container_cpu_cfs_periods_total", window))
        throttled = sum(i for i, _ in self.counter_increases("container_cpu_cfs_throttled_periods_total", window))
        if periods > 0:
            figures.values["cpu_throttled_ratio"] = throttled / periods
        else:
            figures.unavailable.append("cpu_throttled_ratio: no CFS periods counted in the window (no CPU limit?)")

    def _gpu(self, window: QueryWindow, pod_label: str, figures: Figures, profiling: bool = False) -> None:
        """GPU figures from dcgm-exporter. Memory is exported for whole GPUs and MIG instances alike, so its
        series tell which label set the exporter uses; each figure is then available or not on its own (a
        MIG instance has no DCGM_FI_DEV_GPU_UTIL, and no power of its own)."""
        labels = DCGM_POD_LABELS if pod_label == "auto" else (pod_label,)
        found = next((label for label in labels if self.has_series("DCGM_FI_DEV_FB_USED", window, label)), None)
        if found is None:
            figures.unavailable.append(
                f"gpu: no DCGM_FI_DEV_FB_USED series labelled {' or '.join(labels)}=~{window.pod_regex}; is "
                "dcgm-exporter mapping GPUs to pods (and the ServiceMonitor keeping its labels)?"
            )
            return
        utilization = next(
            (m for m in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE") if self.has_series(m, window, found)),
            None,
        )
        queries = gpu_queries(window, found, utilization or "DCGM_FI_DEV_GPU_UTIL")
        if utilization is None:
            del queries["gpu_utilization_percent"]
            figures.unavailable.append(
                "gpu_utilization_percent: neither DCGM_FI_DEV_GPU_UTIL nor DCGM_FI_PROF_GR_ENGINE_ACTIVE is exported "
                "for these pods (MIG instances have only the second, which needs DCGM's profiling module: add it "
                "to dcgm-exporter's collectors)"
            )
        if not self.has_series("DCGM_FI_DEV_POWER_USAGE", window, found):
            del queries["gpu_power_avg_watts"]
            figures.unavailable.append(
                "gpu_power_avg_watts: no DCGM_FI_DEV_POWER_USAGE series for these pods (a MIG instance has no power "
                "of its own; the whole GPU's is not attributed to one pod)"
            )
        if profiling:  # metrics.dcgm.profilingMetrics: DCGM's profiling fields, as percentages
            for name, metric in PROFILING_FIELDS.items():
                if self.has_series(metric, window, found):
                    queries[name] = profiling_query(window, found, metric)
                else:
                    figures.unavailable.append(
                        f"{name}: no {metric} series for these pods (metrics.dcgm.profilingMetrics needs DCGM's "
                        "profiling module in dcgm-exporter's collectors)"
                    )
        self._read(queries, window.end, figures)


def trial_resources(
    client: PrometheusMetrics,
    window: QueryWindow,
    wait_for_scrape: bool,
    gpu: bool = False,
    dcgm_pod_label: str = "auto",
    profiling: bool = False,
    custom_queries: list[CustomQuery] | None = None,
) -> TrialResources | None:
    """A trial's resource figures over its load window, as the report holds them: the figures, the CPU and
    memory series (with the CPU P90 by the same rank rule as the local sampler's), the custom queries, and
    what could not be measured. None while waiting for a scrape after the window (wait_for_scrape); a
    Prometheus that cannot be queried is reported, not raised."""
    try:
        if wait_for_scrape and not client.scraped_past(window):
            return None
        figures = client.trial_figures(window, gpu, dcgm_pod_label, profiling)
    except Exception as exc:  # any failure to query is reported, not fatal
        url = client.client.shown
        return TrialResources(source="prometheus", unavailable=[f"Prometheus at {url} could not be queried: {exc}"])
    values = dict(figures.values)
    resources = TrialResources(source="prometheus", unavailable=figures.unavailable, **values)
    window = figures.window or window
    if "cpu_avg_cores" in values:
        try:
            points = client.series(window)
        except Exception as exc:  # the figures stand without the series
            resources.unavailable.append(f"cpu series: {exc}")
            points = []
        start = window.end - window.seconds
        resources.series = [ResourceSeriesPoint(t_s=t - start, cpu_cores=c, memory_bytes=m) for t, c, m in points]
        if points:
            resources.cpu_p90_cores = nearest_rank([c for _, c, _ in points], 90)
    if custom_queries:
        try:
            resources.custom, missing = client.custom(window, custom_queries)
        except Exception as exc:  # the other figures stand without them
            missing = [f"customQueries: {exc}"]
        resources.unavailable.extend(missing)
    return resources
