"""metrics.customQueries and metrics.dcgm.profilingMetrics against a real Prometheus scraping the exporter
double (cAdvisor and dcgm-exporter series with their real names and labels, exactly known values)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from kaliper.api.profilerun import CustomQuery
from kaliper.metrics.prometheus import PrometheusMetrics, QueryWindow
from kaliper.metrics.promql_scope import QueryScope
from kaliper.netutil import free_port
from tests.support import exporter
from tests.support.controlplane import wait_for
from tests.support.prometheus import prometheus

WINDOW_S = 10
MEMORY = 'container_memory_working_set_bytes{namespace="{namespace}",pod=~"{pod}",container!="",container!="POD"}'


@pytest.fixture(scope="module")
def metrics() -> Iterator[tuple[PrometheusMetrics, QueryWindow]]:
    port = free_port()
    server = exporter.trial_scene().serve(port)
    try:
        with prometheus([f"127.0.0.1:{port}"]) as url:
            client = PrometheusMetrics(url)
            held = f'min(count_over_time(container_memory_working_set_bytes{{namespace="ml"}}[{WINDOW_S}s]))'
            # Scraped every second: a whole window holds about WINDOW_S samples of every series.
            wait_for(lambda: (client.scalar(held, time.time()) or 0) >= WINDOW_S - 1, 90, "a full window scraped")
            window = QueryWindow(exporter.NAMESPACE, "iris-t0-.*", time.time() - 1, WINDOW_S, scrape_interval_s=1)
            yield client, window
    finally:
        server.shutdown()


def query(name: str, promql: str, aggregate: str = "avg", unit: str = "") -> CustomQuery:
    return CustomQuery(name=name, query=promql, aggregate=aggregate, unit=unit)  # type: ignore[arg-type]


def test_custom_queries_fill_the_placeholders_and_aggregate_over_the_window(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    trial_memory = sum(v for pod, v in exporter.MEMORY.items() if pod in exporter.TRIAL_PODS)  # 300 MiB
    figures, unavailable = client.custom(
        window,
        [
            query("memory_max", f"sum({MEMORY})", "max", "bytes"),
            query("memory_last", f"sum({MEMORY})", "last", "bytes"),
            query("pods", f"count({MEMORY})", "avg"),
        ],
    )
    assert unavailable == []
    assert [(f.name, f.value, f.unit) for f in figures] == [
        ("memory_max", trial_memory, "bytes"),
        ("memory_last", trial_memory, "bytes"),
        ("pods", 2.0, ""),  # iris-t0-aaaaa and iris-t0-bbbbb; not the other pod of the namespace
    ]


def test_a_custom_query_that_cannot_be_one_figure_says_why(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    figures, unavailable = client.custom(
        window, [query("per_pod", MEMORY, "last"), query("typo", "sum(rate(x[{window}]", "avg")]
    )
    assert figures == []
    assert unavailable[0] == (
        "customQueries per_pod: returned 2 series, not one; aggregate it in PromQL (such as sum(...))"
    )
    assert unavailable[1].startswith("customQueries typo: ")


def test_a_namespaces_custom_query_reads_only_its_namespaces_series(metrics) -> None:  # type: ignore[no-untyped-def]
    """The operator's client for a run of namespace ml: a query without a namespace reads ml's series alone
    (every namespace of the scene exports memory), one naming another namespace is refused with the reason."""
    client, window = metrics
    confined = PrometheusMetrics(client.client.url, scope=QueryScope(exporter.NAMESPACE))
    every_container = 'sum(container_memory_working_set_bytes{container!="",container!="POD"})'
    figures, unavailable = confined.custom(
        window,
        [
            query("memory", every_container, "last", "bytes"),
            query("chat_memory", 'sum(container_memory_working_set_bytes{namespace="chat"})', "last"),
        ],
    )
    assert [(f.name, f.value) for f in figures] == [("memory", 200 * 2**20 + 100 * 2**20 + 9 * 2**30)]
    assert unavailable == [
        'customQueries chat_memory: container_memory_working_set_bytes{namespace="chat"} reads namespace chat; a '
        "run of namespace ml reads only its own series, unless the cluster admin allows more (the chart's "
        "tenancy.queries.namespaces)"
    ]
    # The same query unconfined (`kaliper run`, or the admin's "*") reads every namespace's containers.
    everything, _ = client.custom(window, [query("memory", every_container, "last", "bytes")])
    others = 2**28 + 2 * 2**28 + 2 * 2**28 + 2 * 2**30  # old's pod, mig's and shared's two, chat's two
    assert everything[0].value == 200 * 2**20 + 100 * 2**20 + 9 * 2**30 + others


def test_profiling_metrics_add_the_engine_and_sm_activity_where_exported(metrics) -> None:  # type: ignore[no-untyped-def]
    client, window = metrics
    mig = replace(window, namespace="mig")  # two MIG instances with the profiling module: GR_ENGINE_ACTIVE 0.35
    figures = client.trial_figures(mig, gpu=True, profiling=True)
    assert figures.values["gpu_graphics_engine_active_percent"] == pytest.approx(100 * exporter.GPU["gr_engine_active"])
    assert (
        "gpu_sm_active_percent: no DCGM_FI_PROF_SM_ACTIVE series for these pods (metrics.dcgm.profilingMetrics "
        "needs DCGM's profiling module in dcgm-exporter's collectors)"
    ) in figures.unavailable
    without = client.trial_figures(mig, gpu=True)
    assert "gpu_graphics_engine_active_percent" not in without.values
    assert not any(u.startswith("gpu_sm_active_percent") for u in without.unavailable)
