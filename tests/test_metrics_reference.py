"""docs/reference/metrics.md lists every metric the operator and the built-in server export, with its type: the
operator's read from its own /metrics endpoint here (the built-in server's: tests/serving/test_server.py)."""

from __future__ import annotations

import urllib.request

from kaliper.controllers import metrics
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
    assert len(documented_metrics("The operator")) == 6
