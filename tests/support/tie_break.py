"""Two configurations that tie on noise, and the run that measures them again, for the tie-break tests of
both paths (tests/local/test_tie_break_run.py, tests/cluster/test_profilerun_operator.py).

The ground-truth server stalls for 750 ms of every 1.5 s: half-second windows see it stalled for all, half or
none of their time, so a trial's throughput windows spread from nearly nothing to twice their mean and its 95%
noise is tens of percent. Measured for three whole periods, every trial is stalled for the same 2.25 s
whatever the phase, so its throughput over the trial holds steady, while the two configurations (the same
server under 500m and 600m of CPU, which it never uses) cost 20% apart per request. The first two trials tie
on noise, certainly; one round then measures each once more, and the choice is made from both trials of each."""

from __future__ import annotations

STALLING_SERVER_FLAGS = ("-median", "10ms", "-sigma", "0.1", "-stall-every", "1500ms", "-stall-for", "750ms")

TIE_BREAK_RUN: dict = {
    "load": {
        "closedLoop": {"concurrency": 2},
        "warmup": "500ms",
        "minDuration": "4500ms",
        "maxDuration": "4500ms",
        "stopping": {"window": "500ms"},
    },
    "sweep": {"cpu": ["500m", "600m"]},
    "search": {"tieBreak": {"budget": "30s", "rounds": 1}},
    "slo": {"latency": [{"percentile": 90, "max": "2s"}]},  # a p99 needs more requests than stalls let through
}
