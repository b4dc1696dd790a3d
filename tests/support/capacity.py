"""A server of known capacity and the ProfileRun settings that find it, for the capacity search's benchmark
(bench/capacity_runs.py: whether `kaliper run` finds a real server's true boundary, run after run). The search's
decisions are tested on scripted measurements (tests/cluster/test_contract.py, tests/profiling/test_scripted_plan.py),
which no busy machine can move.

The ground-truth server with four slots and a 200 ms service time (lognormal, sigma 0.05) serves up to four
users in about 200 ms; a fifth waits for a slot, so from five users on a fifth of the requests wait up to
another service time. Under a p95 objective of 280 ms its capacity is exactly 4 users: at four the p95 is about
220 ms, at five about 350. The bound is 60 ms clear of both sides. A busy machine only adds to the latencies,
and by the same milliseconds whatever the service time: beside the kind tier creating its cluster, a 100 ms
server's p95 at two users rose to 125 ms, too near a 140 ms bound for 20 s of requests to decide it. (With a
50 ms server and a bound of 80 ms, five users came out Inconclusive beside a cold build: the waits shorten as
the users drift out of step. A p90 sits too near that slow fifth; a p99 needs more requests than these rates
give in a few seconds.)
"""

from __future__ import annotations

SLOTS_SERVER_FLAGS = ("-median", "200ms", "-sigma", "0.05", "-slots", "4")

# Levels 2 and 8, three probes: the knee search measures 8 (not met), 2 (met), then probes 5 (not), 3, 4 (met).
CAPACITY_RUN: dict = {
    # Measured until every objective is decided (its interval clear of the bound), up to 30 s; the stability
    # asked for is looser than the default, as windows of 1 s hold only 10-20 of these slow requests. 20 s was
    # once too short in a full run: two users' 192 answers, eight of them slowed to 259 ms or more by the busy
    # machine (one to 428 ms), put the p95's interval (at p95.99, with the two requests in flight at the end) up
    # to 428 ms: Inconclusive. A trial already decided still ends as soon as it is.
    "load": {
        "closedLoop": {"concurrency": 2},
        "warmup": "1s",
        "minDuration": "3s",
        "maxDuration": "30s",
        "stopping": {"window": "1s", "percentile": 95, "tolerance": 0.2, "maxRelativeCiWidth": 0.1},
    },
    "sweep": {"concurrency": [2, 8]},
    "search": {"strategy": "knee", "capacity": {"probes": 3}},
    # 50 requests per second at about 20 per replica: 3 replicas.
    "slo": {"latency": [{"percentile": 95, "max": "280ms"}], "targetThroughput": 50},
}
