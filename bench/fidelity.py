"""Fidelity: do Kaliper's percentiles match what the server did?

A ground-truth server (bench/groundtruth) delays each response by a lognormal draw (median 105 ms,
sigma 0.35) and records its own service time of every request. Kaliper loads it (closed loop) and its
p50/p90/p99 are compared with the exact percentiles of the server's records over the same measured interval.
Stock Locust (FastHttpUser) runs the same load right after, compared with the records of its interval.

    .venv/bin/python bench/fidelity.py [--users 64] [--duration 60]

Goal: p50 and p90 within 1%, p99 within 2% of the truth.
"""

from __future__ import annotations

import argparse

from _common import (
    groundtruth,
    measured_interval,
    nearest_rank,
    percent_error,
    records,
    reset,
    run_kaliper,
    run_stock_locust,
    stage_truth,
)

PERCENTILES = (50.0, 90.0, 99.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--duration", type=int, default=60)
    parser.add_argument("--port", type=int, default=18090)
    args = parser.parse_args()

    with groundtruth("-median", "105ms", "-sigma", "0.35", port=args.port) as base:
        config = {
            "url": base,
            "request": {"protocol": "oip-v2", "modelName": "truth"},
            "payload": {"inline": '{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'},
            "load": {
                "closedLoop": {"concurrency": args.users},
                "warmup": "5s",
                "minDuration": f"{args.duration}s",
                "maxDuration": f"{args.duration}s",
                "stopping": {"window": "5s"},
            },
        }
        result = run_kaliper(config)
        stage = result["stages"][0]
        start, end = measured_interval(stage)
        _, served = records(base)
        truth = stage_truth(served, start, end)
        kaliper = {p["percentile"]: p for p in stage["latency"]["percentiles"]}

        reset(base)
        stock = run_stock_locust(
            f"{base}/v2/models/truth/infer",
            args.users,
            5,
            args.duration,
            method="POST",
            body=config["payload"]["inline"],
        )
        _, served = records(base)
        s_start, s_end = stock["interval"]
        stock_truth = [ms for done, ms in served if s_start <= done < s_end]

    print(f"# Fidelity: lognormal(median 105 ms, sigma 0.35), closed loop, {args.users} users, {args.duration} s\n")
    print(f"Kaliper: {stage['requests']} requests measured, server recorded {len(truth)} in the same interval.")
    print(f"Stock Locust: {stock['requests']} requests, server recorded {len(stock_truth)} in its interval.\n")
    print(
        "| percentile | truth (Kaliper's interval) | Kaliper | error | truth (Locust's interval) | stock Locust "
        "| error |"
    )
    print("|---|---|---|---|---|---|---|")
    for p in PERCENTILES:
        t = nearest_rank(truth, p)
        k = kaliper[p]["valueMs"]
        ci = f"[{kaliper[p]['ciLowMs']:.2f}, {kaliper[p]['ciHighMs']:.2f}]" if kaliper[p]["ciHighMs"] else ""
        st = nearest_rank(stock_truth, p)
        sl = stock["percentiles_ms"][f"{p:g}"]
        print(
            f"| p{p:g} | {t:.2f} ms | {k:.2f} ms {ci} | {percent_error(k, t)} | {st:.2f} ms | {sl:.2f} ms | "
            f"{percent_error(sl, st)} |"
        )


if __name__ == "__main__":
    main()
