"""Is a server's capacity reported at its true boundary every time? The capacity search of `kaliper run` run N
times in a row against the ground-truth server of known capacity that the test suite uses
(tests/support/capacity.py: four slots of 200 ms, a p95 objective of 280 ms, so capacity exactly 4 users), each
run printed with the levels it measured, their verdicts and the capacity it reported.

    .venv/bin/python bench/capacity_runs.py [--runs 5]

A closed loop ends every trial with each user's request in flight; the graceful stop awaits and records them,
so the boundary does not move with a stage's edge from one run to the next.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH.parent / "operator"))

from tests.support import groundtruth  # noqa: E402
from tests.support.capacity import CAPACITY_RUN, SLOTS_SERVER_FLAGS  # noqa: E402
from tests.support.local_run import deployment, profile_run, run_manifests  # noqa: E402
from tests.support.paths import KALIPER  # noqa: E402

TRUE_CAPACITY = 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    serve = f"exec {groundtruth.binary()} -addr 127.0.0.1:$KALIPER_PORT {' '.join(SLOTS_SERVER_FLAGS)}"
    runtime = {"type": "custom", "command": ["sh", "-c", serve], "port": 8080, "protocol": "oip-v2"}
    print("| run | levels measured (users: verdict) | capacity reported | at the true boundary | seconds |")
    print("|---|---|---|---|---|")
    right = 0
    with tempfile.TemporaryDirectory() as scratch:
        models = Path(scratch) / "models"
        subprocess.run(
            [str(KALIPER), "make-example-models", str(models), "--only", "iris.onnx"], check=True, capture_output=True
        )
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            report, _ = run_manifests(
                Path(scratch) / f"run-{run}",
                [
                    deployment(models / "iris.onnx", runtime=runtime, resources={"limits": {"cpu": "500m"}}),
                    profile_run(**CAPACITY_RUN, cost={"perCoreHour": 0.04, "perGibHour": 0.0}),
                ],
            )
            seconds = time.monotonic() - started
            levels = ", ".join(f"{t.parameters['concurrency']}: {t.slo_verdict}" for t in report.trials)
            (capacity,) = report.capacities
            exact = capacity.met == TRUE_CAPACITY and capacity.not_met == TRUE_CAPACITY + 1
            right += exact
            print(f"| {run} | {levels} | {capacity.interval_text()} | {'yes' if exact else 'no'} | {seconds:.0f} |")
    boundary = f"met at {TRUE_CAPACITY}, not met at {TRUE_CAPACITY + 1}"
    print(f"\nAt the true boundary ({boundary}) in {right} of {args.runs} runs.")


if __name__ == "__main__":
    main()
