"""The Prometheus metrics layer against a real Prometheus that scrapes a test double of cAdvisor
and dcgm-exporter (real metric names and labels, exactly known values)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from kaliper.metrics.prometheus import PrometheusMetrics, Window, container_queries
from kaliper.netutil import free_port
from tests.support import exporter
from tests.support.prometheus import prometheus

WINDOW_S = 10


@pytest.fixture(scope="module")
def metrics() -> Iterator[tuple[PrometheusMetrics, Window]]:
    port = free_port()
    server = exporter.trial_scene().serve(port)
    try:
        with prometheus([f"127.0.0.1:{port}"]) as url:
            client = PrometheusMetrics(url)
            # Prometheus needs a few seconds to start scraping; then whole windows fill, as after any trial.
            time.sleep(WINDOW_S + 12)
            window = Window(
                namespace=exporter.NAMESPACE,
                pod_regex="iris-t0-.*",
                end=time.time() - 1,
                seconds=WINDOW_S,
                scrape_interval_s=1,
            )
            assert client.wait_for_scrape(window, scrape_interval_s=1)
            yield client, window
    finally:
        server.shutdown()


def test_cpu_memory_and_throttling_are_exactly_the_exported_values(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    figures = client.trial_figures(window)
    values = figures.values
    # Only the trial's pods, only real containers (the pause container and pod cgroup would add 2000 cores).
    assert values["cpu_avg_cores"] == pytest.approx(sum(exporter.TRIAL_PODS.values()), rel=1e-6)
    assert values["cpu_peak_cores"] == pytest.approx(0.75, rel=1e-6)
    assert values["cpu_throttled_ratio"] == pytest.approx(exporter.THROTTLED_PER_S / exporter.PERIODS_PER_S)
    trial_memory = sum(v for pod, v in exporter.MEMORY.items() if pod in exporter.TRIAL_PODS)
    assert values["memory_avg_bytes"] == trial_memory and values["memory_peak_bytes"] == trial_memory
    assert "restarts" not in values and "oom_kills" not in values  # from the pods' status, not Prometheus
    assert figures.unavailable == []


def test_gpu_figures_through_the_relabelled_pod_label(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    figures = client.trial_figures(window, gpu=True)  # auto: finds exported_pod after pod and pod_name
    assert figures.values["gpu_utilization_percent"] == exporter.GPU["util"]
    assert figures.values["gpu_memory_peak_mib"] == 2 * exporter.GPU["fb_used_mib"]
    assert figures.values["gpu_power_avg_watts"] == 2 * exporter.GPU["power_w"]


def gpu_figures(client: PrometheusMetrics, window: Window, namespace: str) -> tuple[dict[str, float], list[str]]:
    figures = client.trial_figures(replace(window, namespace=namespace), gpu=True)
    return figures.values, [u for u in figures.unavailable if u.startswith("gpu")]


@pytest.mark.parametrize(
    "namespace",
    [
        "old",  # dcgm-exporter 1.x: pod_name / pod_namespace / container_name
        "shared",  # two pods time-slicing GPU-30: the GPU counts once, not once per pod
    ],
)
def test_one_whole_gpu_reads_its_own_figures(metrics, namespace: str) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    values, unavailable = gpu_figures(client, window, namespace)
    assert unavailable == []
    assert (values["gpu_utilization_percent"], values["gpu_memory_peak_mib"], values["gpu_power_avg_watts"]) == (
        60.0,
        4096.0,
        250.0,
    )


def test_mig_instances_use_the_graphics_engine_activity_and_report_power_unavailable(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    values, unavailable = gpu_figures(client, window, "mig")
    # Two 1g.10gb instances of one GPU: no DCGM_FI_DEV_GPU_UTIL, 35% graphics-engine activity each, their
    # own memory summed; the GPU's power is not theirs.
    assert values == {**{k: v for k, v in values.items() if not k.startswith("gpu")},
                      "gpu_utilization_percent": 35.0, "gpu_memory_peak_mib": 2048.0}  # fmt: skip
    assert unavailable == [
        "gpu_power_avg_watts: no DCGM_FI_DEV_POWER_USAGE series for these pods (a MIG instance has no power of its "
        "own; the whole GPU's is not attributed to one pod)"
    ]


def test_missing_series_are_unavailable_with_the_reason_not_zero(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    absent = Window(namespace="elsewhere", pod_regex="nobody-.*", end=window.end, seconds=WINDOW_S, scrape_interval_s=1)
    figures = client.trial_figures(absent, gpu=True)
    assert figures.values == {}
    reasons = " | ".join(figures.unavailable)
    assert "no cAdvisor series for pods nobody-.* in elsewhere" in reasons
    assert "no DCGM_FI_DEV_FB_USED series labelled pod or pod_name or exported_pod" in reasons
    wrong_label = client.trial_figures(window, gpu=True, dcgm_pod_label="pod")
    assert "gpu_utilization_percent" not in wrong_label.values
    assert any("labelled pod=~iris-t0-.*" in r for r in wrong_label.unavailable)


def test_with_two_samples_in_the_window_the_peak_is_the_rate_over_the_whole_window(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    sparse = replace(window, sample_spacing_s=window.seconds / 2)  # as at a 30 s scrape over a 60 s window
    query = container_queries(sparse)["cpu_peak_cores"]
    assert query == (
        'sum(rate(container_cpu_usage_seconds_total{namespace="ml",pod=~"iris-t0-.*",container!="",'
        'container!="POD"}[10s]))'
    )
    assert client.scalar(query, sparse.end) == pytest.approx(0.75, rel=1e-6)
