"""Coordinated omission: does Kaliper see the latency users would see while the server stalls?

The ground-truth server holds every request that arrives during a 2 s stall window, once every 10 s, and
otherwise delays responses by lognormal(median 105 ms, sigma 0.35). Under an open-loop schedule (constant
100 req/s), a request sent at t waits its drawn delay plus the stall time remaining at t. Over whole stall
periods the send phase is uniform, so the true latency distribution is the mixture

    F(x) = (1 - S/P) * L(x) + (1/P) * integral_0^S L(x - r) dr        (L: the lognormal CDF)

whose percentiles are computed here exactly (_common.stalled_percentile). Kaliper's corrected
percentiles are compared with them; stock Locust (closed loop, users sized for the same rate) is printed
beside them.

    .venv/bin/python bench/coordinated_omission.py [--rate 100] [--periods 6]

Goal: corrected p50, p90, p95 and p99 within 5% of the truth.
"""

from __future__ import annotations

import argparse
import math

from _common import (
    groundtruth,
    measured_interval,
    nearest_rank,
    percent_error,
    records,
    run_kaliper,
    run_stock_locust,
    stage_truth,
    stalled_percentile,
)

MEDIAN_S, SIGMA, PERIOD_S, STALL_S = 0.105, 0.35, 10.0, 2.0
PERCENTILES = (50.0, 90.0, 95.0, 99.0)


def true_percentile(p: float) -> float:
    return stalled_percentile(p, MEDIAN_S, SIGMA, PERIOD_S, STALL_S)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--periods", type=int, default=6, help="stall periods measured (10 s each)")
    parser.add_argument("--port", type=int, default=18091)
    parser.add_argument("--scarce", type=int, default=20, help="connections for the second Kaliper run")
    args = parser.parse_args()
    duration = int(args.periods * PERIOD_S)

    with groundtruth(
        "-median", "105ms", "-sigma", "0.35", "-stall-every", "10s", "-stall-for", "2s", port=args.port
    ) as base:
        config = {
            "url": base,
            "request": {"protocol": "oip-v2", "modelName": "truth", "timeout": "10s"},
            "payload": {"inline": '{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'},
            "load": {
                "openLoop": {"rate": args.rate, "arrival": "constant", "maxConnections": int(args.rate * 3)},
                "warmup": "5s",
                "minDuration": f"{duration}s",
                "maxDuration": f"{duration}s",
                "stopping": {"window": "5s"},
            },
        }
        result = run_kaliper(config)
        start, end = measured_interval(result["stages"][0])
        recorded = stage_truth(records(base)[1], start, end)
        # The same schedule with too few connections: sends wait for a free one during stalls.
        scarce_config = {
            **config,
            "load": {**config["load"], "openLoop": {**config["load"]["openLoop"], "maxConnections": args.scarce}},
        }
        scarce = run_kaliper(scarce_config)
        # Closed-loop Locust with as many users as the open-loop rate needs at the unstalled mean latency.
        users = max(1, round(args.rate * MEDIAN_S * math.exp(SIGMA**2 / 2)))
        stock = run_stock_locust(
            f"{base}/v2/models/truth/infer", users, 5, duration, method="POST", body=config["payload"]["inline"]
        )

    stage = result["stages"][0]
    corrected = {p["percentile"]: p["valueMs"] for p in stage["latency"]["percentiles"]}
    service = {p["percentile"]: p["valueMs"] for p in stage["serviceTime"]["percentiles"]}
    late = stage["lateSends"]
    scarce_stage = scarce["stages"][0]
    scarce_corrected = {p["percentile"]: p["valueMs"] for p in scarce_stage["latency"]["percentiles"]}
    scarce_service = {p["percentile"]: p["valueMs"] for p in scarce_stage["serviceTime"]["percentiles"]}
    print(f"# Coordinated omission: {args.rate:g} req/s constant, 2 s stall every 10 s, {duration} s measured\n")
    print(
        f"Kaliper: {stage['requests']} requests, {stage['throughputRps']:.1f} ok/s, late sends "
        f"{late['count']} ({late['share']:.2%}); stock Locust: {users} users, {stock['requests']} requests, "
        f"{stock['rps']:.1f} req/s.\n"
    )
    scarce_late = scarce_stage["lateSends"]
    print(
        f"With {args.scarce} connections: {scarce_stage['requests']} requests, late sends {scarce_late['count']} "
        f"({scarce_late['share']:.2%}), flagged: {scarce_late['reason']}\n"
    )
    print(
        f"| percentile | truth | server-recorded | Kaliper corrected | error | Kaliper service time | error | "
        f"corrected, {args.scarce} conns | error | service, {args.scarce} conns | error | stock Locust | error |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in PERCENTILES:
        t = true_percentile(p)
        s = stock["percentiles_ms"][f"{p:g}"]
        print(
            f"| p{p:g} | {t:.1f} ms | {nearest_rank(recorded, p):.1f} ms | "
            f"{corrected[p]:.1f} ms | {percent_error(corrected[p], t)} | "
            f"{service[p]:.1f} ms | {percent_error(service[p], t)} | "
            f"{scarce_corrected[p]:.1f} ms | {percent_error(scarce_corrected[p], t)} | "
            f"{scarce_service[p]:.1f} ms | {percent_error(scarce_service[p], t)} | "
            f"{s:.1f} ms | {percent_error(s, t)} |"
        )


if __name__ == "__main__":
    main()
