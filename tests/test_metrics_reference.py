"""docs/reference/metrics.md lists every metric the operator and the built-in server export, with its type: the
operator's read from its own /metrics endpoint here (the built-in server's: tests/serving/test_server.py)."""

from __future__ import annotations

import re
import urllib.request

from kaliper.controllers import metrics
from kaliper.netutil import free_port
from tests.support.paths import REPO

PAGE = REPO / "docs" / "reference" / "metrics.md"


def documented(section: str) -> dict[str, str]:
    """The metrics (name -> type) of a section of the page."""
    text = PAGE.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (\w+) \|", text, re.M))


def exported(exposition: str, prefix: str) -> dict[str, str]:
    """The metrics (name -> type) an exposition declares, whether or not they have samples yet, but the _created
    gauges prometheus_client adds beside each counter and histogram (the page says so once): each of those is
    checked to stand beside a metric declared."""
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M))
    created = {name.removesuffix("_created") for name in declared if name.endswith("_created")}
    assert all(f"{name}_total" in declared or name in declared for name in created), created
    assert "counters and histograms also a `_created` gauge" in PAGE.read_text()
    return {name: kind for name, kind in declared.items() if name.startswith(prefix) and not name.endswith("_created")}


def test_every_metric_the_operator_exports_is_documented_with_its_type() -> None:
    port = free_port()
    metrics.serve(port)
    with metrics.reconciling("ProfileRun"):
        pass
    exposition = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert exported(exposition, "kaliper_") == documented("The operator")
    assert documented("The operator")["kaliper_reconcile_seconds"] == "histogram"
    assert len(documented("The operator")) == 6
