"""The Prometheus metrics layer against a real Prometheus that scrapes a test double of cAdvisor,
kube-state-metrics and dcgm-exporter (real metric names and labels, exactly known values)."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import pytest

from kaliper.metrics.prometheus import PrometheusMetrics, QueryWindow, container_queries
from kaliper.metrics.server_load import missing_series, server_load, server_source
from kaliper.netutil import free_port
from kaliper.report.schema import ServerLoad
from tests.support import exporter
from tests.support.controlplane import wait_for
from tests.support.prometheus import prometheus

WINDOW_S = 10
TRIAL_CPU = 'container_cpu_usage_seconds_total{namespace="ml",pod=~"iris-t0-.*",container="server"}'


def promql(url: str, query: str) -> list[dict]:
    """The result of an instant query, now, through Prometheus's HTTP API."""
    address = f"{url}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(address, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


def first_sample_s(url: str, series: str) -> float | None:
    """When the series that Prometheus began to store last has its first sample (None: none stored yet)."""
    stored = promql(url, f"{series}[5m]")
    return max(float(s["values"][0][0]) for s in stored) if stored else None


@pytest.fixture(scope="module")
def scene() -> Iterator[tuple[exporter.Exporter, str]]:
    """The trial scene, served and scraped every second: the exporter (a test may change it) and Prometheus's URL."""
    served = exporter.trial_scene()
    port = free_port()
    server = served.serve(port)
    try:
        with prometheus([f"127.0.0.1:{port}"]) as url:
            yield served, url
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def metrics(scene) -> tuple[PrometheusMetrics, QueryWindow]:  # type: ignore[no-untyped-def]
    _, url = scene
    # A whole window of samples, as after any trial: the window ends a second ago, and begins after the first
    # sample Prometheus stored of every trial series.
    wait_for(
        lambda: (first := first_sample_s(url, TRIAL_CPU)) is not None and first <= time.time() - 2 - WINDOW_S,
        timeout=60,
        what=f"Prometheus to hold {WINDOW_S + 2} s of the trial's samples",
        interval=0.5,
    )
    window = QueryWindow(
        namespace=exporter.NAMESPACE,
        pod_regex="iris-t0-.*",
        end=time.time() - 1,
        seconds=WINDOW_S,
        scrape_interval_s=1,
    )
    client = PrometheusMetrics(url)
    assert client.wait_for_scrape(window, scrape_interval_s=1)
    return client, window


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


def gpu_figures(client: PrometheusMetrics, window: QueryWindow, namespace: str) -> tuple[dict[str, float], list[str]]:
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
    absent = QueryWindow(
        namespace="elsewhere", pod_regex="nobody-.*", end=window.end, seconds=WINDOW_S, scrape_interval_s=1
    )
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


def by_pod(result: list[dict]) -> dict[str, float]:
    return {series["metric"]["pod"]: float(series["value"][1]) for series in result}


def test_restarts_and_oom_kills_are_scraped_under_the_kube_state_metrics_and_cadvisor_names(scene, metrics) -> None:  # type: ignore[no-untyped-def]
    # Kaliper takes a trial's restarts and OOM kills from its pods' status (kaliper.controllers.diagnosis), not
    # from Prometheus: this checks that the double serves them as the real exporters do, so tests can rely on it.
    served, url = scene
    # The server container of iris-t0-aaaaa was OOM-killed twice, and restarted after each.
    served.set_terminations("iris-t0-aaaaa", restarts=2, oom_events=2, last_terminated_reason="OOMKilled")
    restarts = 'kube_pod_container_status_restarts_total{namespace="ml"}'
    wait_for(lambda: by_pod(promql(url, restarts)).get("iris-t0-aaaaa") == 2, timeout=30, what="the restarts scraped")
    stored = promql(url, restarts)
    assert by_pod(stored) == {"iris-t0-aaaaa": 2.0, "iris-t0-bbbbb": 0.0, "iris-t1-ccccc": 0.0}
    assert {label for series in stored for label in series["metric"]} == {
        "__name__", "namespace", "pod", "uid", "container", "instance", "job"
    }  # fmt: skip
    oom = promql(url, 'container_oom_events_total{namespace="ml",container!="",container!="POD"}')
    assert by_pod(oom) == {"iris-t0-aaaaa": 2.0, "iris-t0-bbbbb": 0.0, "iris-t1-ccccc": 0.0}
    reasons = promql(url, 'kube_pod_container_status_last_terminated_reason{namespace="ml"}')
    assert [(r["metric"]["pod"], r["metric"]["container"], r["metric"]["reason"], r["value"][1]) for r in reasons] == [
        ("iris-t0-aaaaa", "server", "OOMKilled", "1")
    ]
    # What a query for one trial's pods reads: its restarts and OOM kills, not another trial's.
    trial = 'namespace="ml",pod=~"iris-t0-.*"'
    assert promql(url, f"sum(kube_pod_container_status_restarts_total{{{trial}}})")[0]["value"][1] == "2"
    assert promql(url, f"sum(container_oom_events_total{{{trial}}})")[0]["value"][1] == "2"


def test_llama_cpp_server_load_is_summed_over_the_trial_pods_from_their_scrapes(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    assert server_source(client, window) == "llama.cpp"
    load = server_load(client, "llama.cpp", window)
    assert isinstance(load, ServerLoad)
    # exporter.LLAMA: the trial's two pods only (the other trial's 100 requests never count).
    figures = (load.running_mean, load.running_max, load.waiting_mean, load.waiting_max, load.busy_slots_per_decode)
    assert figures == (5.0, 5.0, 1.0, 1.0, 1.75)
    assert (load.source, load.read_from, load.kv_cache_usage_max, load.preemptions) == (
        "llama.cpp",
        "prometheus",
        None,
        None,
    )
    assert load.pods == 2
    assert load.samples >= 2  # a scrape a second, over a 10 s window


def test_vllm_server_load_over_time_is_the_seconds_its_requests_spent_running_per_second(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    chat = replace(window, namespace="chat", pod_regex="chat-t0-.*")
    assert server_source(client, chat) == "vLLM"
    load = server_load(client, "vLLM", chat)
    assert isinstance(load, ServerLoad)
    # exporter.VLLM: the gauges read 3 + 1 running and 1 + 0 queued; the requests spent 2.5 + 1.5 seconds
    # running and 0.5 + 0.25 queued per second.
    figures = (load.running_mean, load.running_time_weighted, load.waiting_mean, load.waiting_time_weighted)
    assert figures == (4.0, 4.0, 1.0, 0.75)
    assert (load.kv_cache_usage_max, load.preemptions, load.busy_slots_per_decode) == (0.25, 0.0, None)
    # Both replicas' prefix caches together: 750 of 1,500 prompt tokens a second found there.
    assert load.prefix_cache_hit_rate == 0.5


def test_server_load_without_server_series_says_how_prometheus_finds_the_pods(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    elsewhere = replace(window, namespace="old")  # GPU pods, no generation server
    assert server_source(client, elsewhere) is None
    assert missing_series(elsewhere) == (
        "server load: Prometheus holds none of llamacpp:requests_processing, vllm:num_requests_running, "
        "sglang:num_running_reqs, tgi_queue_size for pods iris-t0-.* in old: let it scrape the server pods (the "
        "chart's serverPodMonitor.enabled, or pod discovery by the prometheus.io annotations, keeping the "
        "namespace and pod labels)"
    )
