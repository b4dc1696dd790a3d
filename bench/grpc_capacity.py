"""gRPC capacity: ModelInfer calls per second per load-generator core, Kaliper against ghz on the same core.

The ground-truth server's gRPC face answers at once (no delay), pinned to CPU 1. On CPU 0, in turn: ghz,
Kaliper's generator (closed loop, one Locust process and the grpc.aio process that makes its calls, every call
recorded in its HDR histograms; the CPU of both counted), and a bare grpc.aio loop that records nothing
(bench/grpc_aio_client.py: the ceiling of the client library), the same concurrency over the same number of
HTTP/2 connections (the aio loop: one).

    .venv/bin/python bench/grpc_capacity.py [--concurrency 32] [--connections 1] [--duration 10]

Goal: at least half of ghz's calls per core, with every call recorded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import BENCH, groundtruth, reset, run_kaliper
from _grpc import GHZ_VERSION, kaliper_config, run_ghz


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--port", type=int, default=18095)
    args = parser.parse_args()
    c, n, d = args.concurrency, args.connections, args.duration

    server = ("-median", "0s", "-sigma", "0")
    with (
        groundtruth(*server, port=args.port, prefix=("taskset", "-c", "1")) as base,
        tempfile.TemporaryDirectory() as tmp,
    ):
        summary = run_ghz(base.removeprefix("http://"), Path(tmp), c, n, d, cpus="0")
        reset(base)
        load = {"closedLoop": {"concurrency": c}, "warmup": "2s", "minDuration": f"{d}s", "maxDuration": f"{d}s"}
        stage = run_kaliper(kaliper_config(base, load, n), cpus="0")["stages"][0]
        reset(base)
        aio_command = [sys.executable, str(BENCH / "grpc_aio_client.py"), base.removeprefix("http://")]
        aio_command += ["--concurrency", str(c), "--duration", str(d)]
        aio_run = subprocess.run(["taskset", "-c", "0", *aio_command], check=True, capture_output=True, text=True)
        aio = json.loads(aio_run.stdout.strip().splitlines()[-1])

    ghz_rps = summary["rps"]
    ghz_cores = summary["cpuSeconds"] / (summary["total"] / 1e9)
    usage = stage["generatorUsage"]
    kaliper_rps, kaliper_cores = stage["throughputRps"], usage["cpuCores"]
    per_core = (ghz_rps / ghz_cores, kaliper_rps / kaliper_cores, aio["rps"] / aio["cores"])
    print(f"# gRPC capacity: zero-delay ground-truth server on CPU 1, generator on CPU 0, {c} calls in flight")
    print(f"# over {n} HTTP/2 connection(s), {d} s\n")
    print("| generator | calls/s | cores used | calls/s per core | ratio to ghz (per core) |")
    print("|---|---|---|---|---|")
    print(f"| ghz {GHZ_VERSION} | {ghz_rps:,.0f} | {ghz_cores:.2f} | {per_core[0]:,.0f} | 1.00 |")
    print(
        f"| Kaliper, 1 Locust + 1 gRPC client process, HDR on | {kaliper_rps:,.0f} | {kaliper_cores:.2f} "
        f"| {per_core[1]:,.0f} | {per_core[1] / per_core[0]:.3f} |"
    )
    print(
        f"| grpc.aio alone, no gevent, nothing recorded | {aio['rps']:,.0f} | {aio['cores']:.2f} | {per_core[2]:,.0f} "
        f"| {per_core[2] / per_core[0]:.3f} |"
    )
    print(
        f"\nKaliper recorded {stage['latency']['count']:,} of its {stage['requests']:,} measured calls in its "
        "histograms."
    )


if __name__ == "__main__":
    main()
