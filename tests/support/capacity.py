"""A server of known capacity and the ProfileRun settings that find it, for the capacity search's tests on both
paths (tests/local/test_capacity_search.py, tests/cluster/test_profilerun_operator.py).

The ground-truth server with four slots and a 100 ms service time (lognormal, sigma 0.05) serves up to four
users in about 100 ms; a fifth waits for a slot, so from five users on a fifth of the requests wait up to
another service time. Under a p95 objective of 140 ms its capacity is exactly 4 users: at four the p95 is about
110 ms, at five about 175. (With a 50 ms server and a bound of 80 ms, five users came out Inconclusive beside a
cold build: the waits shorten as the users drift out of step. A p90 sits too near that slow fifth; a p99 needs
more requests than these rates give in a few seconds.) The bound is 30 ms clear of both sides, enough beside
the other pytest worker.
"""

from __future__ import annotations

SLOTS_SERVER_FLAGS = ("-median", "100ms", "-sigma", "0.05", "-slots", "4")

# Levels 2 and 8, three probes: the knee search measures 8 (not met), 2 (met), then probes 5 (not), 3, 4 (met).
CAPACITY_RUN: dict = {
    # Measured until every objective is decided (its interval clear of the bound), up to 8 s.
    "load": {
        "closedLoop": {"concurrency": 2},
        "warmup": "1s",
        "minDuration": "3s",
        "maxDuration": "8s",
        "stopping": {"window": "1s", "percentile": 95},
    },
    "sweep": {"concurrency": [2, 8]},
    "search": {"strategy": "knee", "capacity": {"probes": 3}},
    # 100 requests per second at about 40 per replica: 3 replicas.
    "slo": {"latency": [{"percentile": 95, "max": "140ms"}], "targetThroughput": 100},
}
