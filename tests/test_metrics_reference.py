"""docs/reference/metrics.md lists every metric the operator and the built-in server export, with its type: the
operator's read from its own /metrics endpoint here (the built-in server's: tests/serving/test_server.py)."""

from __future__ import annotations

import urllib.request

from kaliper.controllers import metrics
from kaliper.controllers.store import STORE
from kaliper.netutil import free_port
from tests.support.docs_site import documented_metrics, exported_metrics


def test_every_metric_the_operator_exports_is_documented_with_its_type() -> None:
    port = free_port()
    metrics.serve(port)
    with metrics.reconciling("ProfileRun"):
        pass
    exposition = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert exported_metrics(exposition, "kaliper_") == documented_metrics("The operator")
    assert documented_metrics("The operator")["kaliper_reconcile_seconds"] == "histogram"
    assert len(documented_metrics("The operator")) == 8


def test_each_prediction_check_is_exported_from_the_deployments_status() -> None:
    production = {
        "reason": "SlowerThanProfiled",
        "figures": [{"figure": "p50 latency (ms)", "error": 0.097}, {"figure": "p99 latency (ms)", "error": 2.184}],
    }
    checked = {
        "metadata": {"namespace": "prod", "name": "iris", "resourceVersion": "7"},
        "status": {"production": production},
    }
    unchecked = {
        "metadata": {"namespace": "prod", "name": "bert", "resourceVersion": "8"},
        "status": {"phase": "Ready"},
    }
    STORE.seen("ModelDeployment", checked)
    STORE.seen("ModelDeployment", unchecked)
    try:
        families = {family.name: family for family in metrics.Predictions().collect()}
    finally:
        STORE.gone("ModelDeployment", "prod", "iris")
        STORE.gone("ModelDeployment", "prod", "bert")
    assert [(s.labels, s.value) for s in families["kaliper_prediction"].samples] == [
        ({"namespace": "prod", "name": "iris", "reason": "SlowerThanProfiled"}, 1.0)
    ]
    assert [(s.labels["figure"], s.value) for s in families["kaliper_prediction_error"].samples] == [
        ("p50 latency (ms)", 0.097),
        ("p99 latency (ms)", 2.184),
    ]
