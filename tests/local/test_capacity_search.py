"""The capacity search under `kaliper run`, against a server of known capacity (tests/support/capacity.py): 4
users under its p95 objective."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import groundtruth
from tests.support.capacity import CAPACITY_RUN, SLOTS_SERVER_FLAGS
from tests.support.local_run import deployment, profile_run, run_manifests


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory, model: Path):  # type: ignore[no-untyped-def]
    serve = f"exec {groundtruth.binary()} -addr 127.0.0.1:$KALIPER_PORT {' '.join(SLOTS_SERVER_FLAGS)}"
    runtime = {"type": "custom", "command": ["sh", "-c", serve], "port": 8080, "protocol": "oip-v2"}
    return run_manifests(
        tmp_path_factory.mktemp("capacity"),
        [
            deployment(model, runtime=runtime, resources={"limits": {"cpu": "500m", "memory": "256Mi"}}),
            profile_run(**CAPACITY_RUN, cost={"perCoreHour": 0.04, "perGibHour": 0.0}),
        ],
        favoured=True,
    )


def test_the_knee_search_probes_to_the_capacity_of_a_server_of_known_slots(searched) -> None:  # type: ignore[no-untyped-def]
    report, process = searched
    # The listed levels first (8, then 2), then the probes: 5 (not met), 3 (met), 4 (met).
    ran = [(t.index, t.parameters["concurrency"], t.slo_verdict) for t in report.trials]
    assert ran == [(0, "2", "Met"), (1, "8", "NotMet"), (2, "5", "NotMet"), (3, "3", "Met"), (4, "4", "Met")], (
        process.stdout
    )
    (capacity,) = report.capacities
    assert (capacity.met, capacity.not_met, capacity.inconclusive, capacity.trial, capacity.probes) == (4, 5, [], 4, 3)
    assert capacity.interval_text() == "met at 4, not met at 5"
    # Priced at 4 users, where it held the SLO: about 20 requests per second for 0.02 per hour.
    best = report.trials[4]
    assert report.best_trial == 4 and best.stage is not None and 17 < best.stage.throughput_rps < 20.5
    assert capacity.unit_cost == best.cost_per_million_requests
    assert capacity.unit_cost_low <= capacity.unit_cost <= capacity.unit_cost_high  # type: ignore[operator]
    # 50 requests per second at about 20 per replica: 3 replicas.
    assert capacity.replicas == 3 and report.recommendation is not None and report.recommendation.replicas == 3
    assert "capacity search added 3 probes" in report.recommendation.rationale
    assert "capacity: concurrency met at 4, not met at 5;" in process.stdout
