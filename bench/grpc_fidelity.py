"""gRPC fidelity: do Kaliper's percentiles of ModelInfer calls match what the server did?

The ground-truth server (bench/groundtruth, its gRPC face) delays each call by a lognormal draw (median
105 ms, sigma 0.35) and records its own service time of every call. Kaliper calls it (closed loop, oip-v2-grpc)
and its p50/p90/p99 are compared with the exact percentiles of the server's records over the same measured
interval; ghz runs the same load right after, compared with the records of its run.

    .venv/bin/python bench/grpc_fidelity.py [--users 64] [--connections 4] [--duration 60]

Goal: every percentile within 1% of the truth.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import (
    groundtruth,
    measured_interval,
    nearest_rank,
    percent_error,
    records,
    reset,
    run_kaliper,
    stage_truth,
)
from _grpc import kaliper_config, run_ghz

PERCENTILES = (50.0, 90.0, 99.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--port", type=int, default=18094)
    args = parser.parse_args()

    with (
        groundtruth("-median", "105ms", "-sigma", "0.35", port=args.port) as base,
        tempfile.TemporaryDirectory() as tmp,
    ):
        load = {
            "closedLoop": {"concurrency": args.users},
            "warmup": "5s",
            "minDuration": f"{args.duration}s",
            "maxDuration": f"{args.duration}s",
            "stopping": {"window": "5s"},
        }
        stage = run_kaliper(kaliper_config(base, load, args.connections))["stages"][0]
        start, end = measured_interval(stage)
        truth = stage_truth(records(base)[1], start, end)
        kaliper = {p["percentile"]: p["valueMs"] for p in stage["latency"]["percentiles"]}

        reset(base)
        began = time.time()
        summary = run_ghz(base.removeprefix("http://"), Path(tmp), args.users, args.connections, args.duration)
        ghz_truth = [ms for done, ms in records(base)[1] if done >= began]
        ghz_p = {float(d["percentage"]): d["latency"] / 1e6 for d in summary["latencyDistribution"]}

    print(
        f"# gRPC fidelity: lognormal(median 105 ms, sigma 0.35), closed loop, {args.users} users over "
        f"{args.connections} connections, {args.duration} s\n"
    )
    print(f"Kaliper: {stage['requests']} calls measured, server recorded {len(truth)} in the same interval.")
    print(f"ghz: {summary['count']} calls, server recorded {len(ghz_truth)} during its run.\n")
    print("| percentile | truth (Kaliper's interval) | Kaliper | error | truth (ghz's run) | ghz | error |")
    print("|---|---|---|---|---|---|---|")
    for p in PERCENTILES:
        t, g = nearest_rank(truth, p), nearest_rank(ghz_truth, p)
        print(
            f"| p{p:g} | {t:.2f} ms | {kaliper[p]:.2f} ms | {percent_error(kaliper[p], t)} | {g:.2f} ms "
            f"| {ghz_p[p]:.2f} ms | {percent_error(ghz_p[p], g)} |"
        )


if __name__ == "__main__":
    main()
