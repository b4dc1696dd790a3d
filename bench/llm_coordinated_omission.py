"""LLM coordinated omission: does Kaliper see the time to first token users would see while the server
stalls?

The streaming ground-truth server (bench/streamtruth) holds every request that arrives during a 2 s stall,
once every 10 s, then sends the first token after a lognormal draw (median 40 ms, sigma 0.3) and 15 more
after lognormal gaps (median 8 ms, sigma 0.5). Under an open-loop schedule (constant rate), a request
intended at t sees its first token after its draw plus the stall time remaining at t, so over whole stall
periods the true TTFT distribution is the stall mixture of _common.stalled_percentile. Kaliper's corrected
TTFT (from the intended send) is compared with it, beside its TTFT from the actual send and the server's
own record (arrival to first chunk, which equals the TTFT from the intended send when sends are on time:
the finite sample's truth); AIPerf and inference-perf run the same constant rate after it.

    .venv/bin/python bench/llm_coordinated_omission.py [--rate 40] [--periods 6]

Goal: corrected TTFT p50, p90 and p99 within 2% of the truth.
"""

from __future__ import annotations

import argparse

from _common import measured_interval, nearest_rank, percent_error, reset, run_kaliper, stalled_percentile
from _llm import (
    install_peers,
    kaliper_config,
    run_aiperf,
    run_inference_perf,
    stream_records,
    streamtruth,
    true_ttfts_and_gaps,
    ttft_percentiles,
)

MEDIAN_S, SIGMA, PERIOD_S, STALL_S = 0.040, 0.3, 10.0, 2.0
PERCENTILES = (50.0, 90.0, 99.0)
MAX_TOKENS = 16


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=40)
    parser.add_argument("--periods", type=int, default=6, help="stall periods measured (10 s each)")
    parser.add_argument("--port", type=int, default=18092)
    args = parser.parse_args()
    install_peers()
    duration = int(args.periods * PERIOD_S)

    flags = ("-ttft", "40ms", "-ttft-sigma", "0.3", "-gap", "8ms", "-gap-sigma", "0.5")
    with streamtruth(*flags, "-stall-every", "10s", "-stall-for", "2s", port=args.port) as base:
        load = {
            # Room for every request a stall holds (rate x 2 s) and those streaming beside them.
            "openLoop": {"rate": args.rate, "arrival": "constant", "maxConnections": int(args.rate * 4)},
            "warmup": "5s",
            "minDuration": f"{duration}s",
            "maxDuration": f"{duration}s",
        }
        stage = run_kaliper(kaliper_config(base, load, MAX_TOKENS))["stages"][0]
        start, end = measured_interval(stage)
        recorded, _ = true_ttfts_and_gaps([(a, c) for a, c in stream_records(base)[1] if c and start <= a < end])
        reset(base)
        rate_args = ["--request-rate", f"{args.rate:g}", "--arrival-pattern", "constant"]
        aiperf, _ = run_aiperf(
            base, [*rate_args, "--warmup-duration", "5", "--benchmark-duration", str(duration)], MAX_TOKENS
        )
        reset(base)
        stage_ip = run_inference_perf(
            base, {"type": "constant", "stages": [{"rate": args.rate, "duration": duration}]}, MAX_TOKENS
        )

    ttft = ttft_percentiles(stage, aiperf, stage_ip, PERCENTILES)
    corrected, from_send, aip, ip = ttft["corrected"], ttft["from_send"], ttft["aiperf"], ttft["inference_perf"]
    late = stage["lateSends"]

    print(
        f"# LLM coordinated omission: {args.rate:g} streams/s constant, 2 s stall every 10 s, TTFT "
        f"lognormal(40 ms, 0.3), {MAX_TOKENS}-token answers, {duration} s measured\n"
    )
    print(
        f"Kaliper: {stage['tokens']['streams']} streams, late sends {late['count']} ({late['share']:.2%}); "
        f"AIPerf: {aiperf['request_count']['avg']:.0f} requests; inference-perf: "
        f"{stage_ip['successes']['count']} requests.\n"
    )
    print(
        "| percentile | truth | server-recorded (Kaliper's interval) | Kaliper corrected | error | Kaliper from "
        "the send | error | AIPerf | error | inference-perf | error |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in PERCENTILES:
        t = stalled_percentile(p, MEDIAN_S, SIGMA, PERIOD_S, STALL_S)
        cells = [f"{v:.1f} ms | {percent_error(v, t)}" for v in (corrected[p], from_send[p], aip[p], ip[p])]
        print(f"| p{p:g} | {t:.1f} ms | {nearest_rank(recorded, p):.1f} ms | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
