"""Arrivals: do open-loop schedules reach the server with the rate and burstiness asked, and on time?

A ground-truth server (bench/groundtruth, 2 ms responses) records when each request arrived. Kaliper sends
each open-loop arrival process in turn (constant, Poisson, gamma of shape 0.25) at the same rate, and the
server's arrivals over the measured interval are set beside the schedule's own figures: the rate asked, and
the gaps' coefficient of variation (0 for constant, 1 for Poisson, 1/sqrt(shape) = 2 for gamma). Late sends
(more than 2 ms after their intended time) are the generator's own count, with those that waited for a free
connection apart (none should: the connections are many).

    .venv/bin/python bench/arrivals.py [--rate 200] [--duration 30] [--processes 2]

Goal: the gaps' CV within 5% of the schedule's (constant: their standard deviation under 1 ms); the rate
within the schedule's own sampling spread (twice CV/sqrt(n): 2.6% for Poisson, 5.2% for gamma over 6,000
sends); late sends under 1%.
"""

from __future__ import annotations

import argparse
import itertools
import statistics

from _common import groundtruth, measured_interval, records, reset, run_kaliper

SCHEDULES = (
    ("constant", {"arrival": "constant"}, 0.0),
    ("poisson", {"arrival": "poisson"}, 1.0),
    ("gamma, shape 0.25", {"arrival": "gamma", "burstiness": 0.25}, 2.0),
)
PAYLOAD = '{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--port", type=int, default=18094)
    args = parser.parse_args()

    rows = []
    with groundtruth("-median", "2ms", "-sigma", "0.05", port=args.port) as base:
        for name, arrival, asked_cv in SCHEDULES:
            reset(base)
            open_loop = {"rate": args.rate, "maxConnections": 64, **arrival}
            stage = run_kaliper(
                {
                    "url": base,
                    "request": {"protocol": "oip-v2", "modelName": "truth"},
                    "payload": {"inline": PAYLOAD},
                    "seed": 11,
                    "load": {
                        "openLoop": open_loop,
                        "processes": args.processes,
                        "warmup": "2s",
                        "minDuration": f"{args.duration}s",
                        "maxDuration": f"{args.duration}s",
                    },
                }
            )["stages"][0]
            start, end = measured_interval(stage)
            arrivals = sorted(done - ms / 1000 for done, ms in records(base)[1] if start <= done - ms / 1000 < end)
            gaps = [b - a for a, b in itertools.pairwise(arrivals)]
            late = stage["lateSends"]
            rows.append(
                (name, asked_cv, len(arrivals) / (end - start), statistics.pstdev(gaps) / statistics.fmean(gaps), late)
            )

    print(f"# Arrivals: {args.rate:g}/s open loop, {args.processes} processes, {args.duration} s measured\n")
    print(
        "| arrival | rate at the server | vs asked | gaps' sd | gaps' CV | asked | vs asked | late sends "
        "| no free connection |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, asked_cv, rate, cv, late in rows:
        cv_error = f"{(cv - asked_cv) / asked_cv * 100:+.1f}%" if asked_cv else ""
        print(
            f"| {name} | {rate:.1f}/s | {(rate - args.rate) / args.rate * 100:+.1f}% | {cv / rate * 1000:.2f} ms | "
            f"{cv:.3f} | {asked_cv:g} | "
            f"{cv_error} | {late['count']} ({late['share'] * 100:.2f}%) | {late['noFreeConnection']} |"
        )


if __name__ == "__main__":
    main()
