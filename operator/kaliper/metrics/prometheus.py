"""A trial's resource figures from Prometheus: cAdvisor (CPU, throttling, memory), kube-state-metrics
(restarts, OOM kills) and dcgm-exporter (GPU).

Every figure is evaluated at the end of the trial's window over the window's length. Before it trusts a
query, the layer checks that the series it relies on exist with the labels it filters on; a figure whose
series are missing (or whose value is NaN) is reported as unavailable with the reason, never as zero.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_api_client import PrometheusConnect

CONTAINER = 'container!="",container!="POD"'
DCGM_POD_LABELS = ("pod", "pod_name", "exported_pod")  # by exporter version and ServiceMonitor honorLabels


@dataclass(frozen=True)
class Window:
    namespace: str
    pod_regex: str  # the trial's pods, such as "iris-t3-.*"
    end: float  # unix seconds
    seconds: int
    scrape_interval_s: float = 15.0  # rates need at least two samples: their ranges span four intervals

    @property
    def range(self) -> str:
        return f"{self.seconds}s"


def selector(window: Window, pod_label: str = "pod") -> str:
    # A ServiceMonitor without honorLabels renames the exporter's pod and namespace labels alike.
    namespace_label = "exported_namespace" if pod_label == "exported_pod" else "namespace"
    return f'{namespace_label}="{window.namespace}",{pod_label}=~"{window.pod_regex}"'


def subquery_step(window: Window) -> str:
    """Resolution of the *_over_time subqueries: 5s, finer for short windows so each holds three points."""
    return f"{max(1, min(5, window.seconds // 3))}s"


def container_queries(window: Window) -> dict[str, str]:
    """PromQL of the CPU and memory figures (pure: tested against a real Prometheus)."""
    s, w, step = selector(window), window.range, subquery_step(window)
    rate_range = f"{max(4 * window.scrape_interval_s, 4):g}s"
    return {
        "cpu_avg_cores": f"sum(increase(container_cpu_usage_seconds_total{{{s},{CONTAINER}}}[{w}])) / {window.seconds}",
        "cpu_peak_cores": (
            f"max_over_time(sum(rate(container_cpu_usage_seconds_total{{{s},{CONTAINER}}}[{rate_range}]))[{w}:{step}])"
        ),
        "cpu_throttled_ratio": (
            f"sum(increase(container_cpu_cfs_throttled_periods_total{{{s},{CONTAINER}}}[{w}])) / "
            f"sum(increase(container_cpu_cfs_periods_total{{{s},{CONTAINER}}}[{w}]))"
        ),
        "memory_avg_bytes": f"avg_over_time(sum(container_memory_working_set_bytes{{{s},{CONTAINER}}})[{w}:{step}])",
        "memory_peak_bytes": f"max_over_time(sum(container_memory_working_set_bytes{{{s},{CONTAINER}}})[{w}:{step}])",
        "restarts": f"sum(increase(kube_pod_container_status_restarts_total{{{s}}}[{w}]))",
        "oom_kills": (
            f'sum(max_over_time(kube_pod_container_status_last_terminated_reason{{{s},reason="OOMKilled"}}[{w}]))'
        ),
    }


def gpu_queries(window: Window, pod_label: str) -> dict[str, str]:
    s, w, step = selector(window, pod_label), window.range, subquery_step(window)
    return {
        "gpu_utilization_percent": f"avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{{{s}}}[{w}]))",
        "gpu_memory_peak_mib": f"max_over_time(sum(DCGM_FI_DEV_FB_USED{{{s}}})[{w}:{step}])",
        "gpu_power_avg_watts": f"sum(avg_over_time(DCGM_FI_DEV_POWER_USAGE{{{s}}}[{w}]))",
    }


@dataclass
class Figures:
    values: dict[str, float] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)


class PrometheusMetrics:
    def __init__(self, url: str, timeout_s: float = 10) -> None:
        self.client = PrometheusConnect(url=url, disable_ssl=True)
        self.timeout_s = timeout_s

    def scalar(self, query: str, at: float) -> float | None:
        """The single value of an instant query, or None when there is no series or the value is NaN."""
        result: list[dict[str, Any]] = self.client.custom_query(
            query, params={"time": at, "timeout": f"{self.timeout_s:g}s"}
        )
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) or math.isinf(value) else value

    def has_series(self, metric: str, window: Window, pod_label: str = "pod") -> bool:
        return self.scalar(f"count({metric}{{{selector(window, pod_label)}}})", window.end) not in (None, 0)

    def scraped_past(self, window: Window) -> bool:
        """Whether a sample newer than the window's end is stored: the final scrape is in."""
        query = f"max(timestamp(container_cpu_usage_seconds_total{{{selector(window)},{CONTAINER}}}))"
        latest = self.scalar(query, time.time())
        return latest is not None and latest >= window.end

    def wait_for_scrape(self, window: Window, scrape_interval_s: float, deadline_s: float = 60) -> bool:
        """Wait until the final scrape is in, up to a deadline (the operator asks scraped_past once per step
        instead of waiting)."""
        give_up = time.time() + max(deadline_s, scrape_interval_s * 3)
        while time.time() < give_up:
            if self.scraped_past(window):
                return True
            time.sleep(min(1.0, scrape_interval_s / 2))
        return False

    def series(self, window: Window) -> list[tuple[float, float, float]]:
        """(unix seconds, CPU cores, memory working-set bytes) over the window, summed over the trial's
        pods, at the subquery resolution: what rightsizing takes its CPU percentile from."""
        s, step = selector(window), subquery_step(window)
        rate_range = f"{max(4 * window.scrape_interval_s, 4):g}s"
        queries = {
            "cpu": f"sum(rate(container_cpu_usage_seconds_total{{{s},{CONTAINER}}}[{rate_range}]))",
            "memory": f"sum(container_memory_working_set_bytes{{{s},{CONTAINER}}})",
        }
        start, end = datetime.fromtimestamp(window.end - window.seconds, UTC), datetime.fromtimestamp(window.end, UTC)
        values: dict[str, dict[float, float]] = {}
        for name, query in queries.items():
            result = self.client.custom_query_range(query, start_time=start, end_time=end, step=step)
            values[name] = {float(t): float(v) for t, v in (result[0]["values"] if result else [])}
        return [
            (t, values["cpu"][t], values["memory"][t])
            for t in sorted(values["cpu"])
            if t in values["memory"] and not math.isnan(values["cpu"][t])
        ]

    def trial_figures(self, window: Window, gpu: bool = False, dcgm_pod_label: str = "auto") -> Figures:
        figures = Figures()
        if not self.has_series("container_cpu_usage_seconds_total", window):
            figures.unavailable.append(
                f"cpu, memory: no cAdvisor series for pods {window.pod_regex} in {window.namespace} "
                "(is Prometheus scraping the kubelets' /metrics/cadvisor?)"
            )
            queries = {k: q for k, q in container_queries(window).items() if k in ("restarts", "oom_kills")}
        else:
            queries = container_queries(window)
        if not self.has_series("kube_pod_container_status_restarts_total", window):
            queries.pop("restarts", None)
            queries.pop("oom_kills", None)
            figures.unavailable.append(f"restarts, OOM kills: no kube-state-metrics series for {window.pod_regex}")
        for name, query in queries.items():
            value = self.scalar(query, window.end)
            if value is None:
                figures.unavailable.append(f"{name}: the query returned no value")
            else:
                figures.values[name] = value
        if gpu:
            self._gpu(window, dcgm_pod_label, figures)
        return figures

    def _gpu(self, window: Window, pod_label: str, figures: Figures) -> None:
        labels = DCGM_POD_LABELS if pod_label == "auto" else (pod_label,)
        found = next((label for label in labels if self.has_series("DCGM_FI_DEV_GPU_UTIL", window, label)), None)
        if found is None:
            figures.unavailable.append(
                f"gpu: no DCGM_FI_DEV_GPU_UTIL series labelled {' or '.join(labels)}=~{window.pod_regex}; is "
                "dcgm-exporter mapping GPUs to pods (and the ServiceMonitor keeping its labels)?"
            )
            return
        for name, query in gpu_queries(window, found).items():
            value = self.scalar(query, window.end)
            if value is None:
                figures.unavailable.append(f"{name}: the query returned no value")
            else:
                figures.values[name] = value
