"""The ceiling of the client library: a bare grpc.aio loop of N coroutines calling ModelInfer, timing each call
and recording nothing. bench/grpc_capacity.py runs it beside ghz and Kaliper's generator (whose gRPC client
process makes its calls with grpc.aio too).

    python bench/grpc_aio_client.py HOST:PORT --concurrency 32 --duration 10   # prints one JSON line
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time

import grpc
from _grpc import REQUEST

from kaliper.serving.oip_grpc import MODEL_INFER, infer_request


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def load(address: str, concurrency: int, duration: float) -> dict[str, float]:
    request = infer_request(REQUEST, "truth").SerializeToString()
    async with grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        call = channel.unary_unary(MODEL_INFER)
        await call(request)  # connected before the clock starts
        calls = 0
        stop = time.perf_counter() + duration

        async def user() -> None:
            nonlocal calls
            while time.perf_counter() < stop:
                started = time.perf_counter()
                await call(request, timeout=10)
                _ = time.perf_counter() - started  # timed as a generator would, not recorded
                calls += 1

        cpu, wall = cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(user() for _ in range(concurrency)))
        cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    return {"calls": calls, "rps": calls / wall, "cores": cpu / wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=10)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(load(args.address, args.concurrency, args.duration))))


if __name__ == "__main__":
    main()
