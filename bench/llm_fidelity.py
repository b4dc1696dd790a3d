"""LLM fidelity: do Kaliper's TTFT and inter-token percentiles match what the server did?

The streaming ground-truth server (bench/streamtruth) sends each answer's first token after a lognormal
draw (median 40 ms, sigma 0.3) and each later token after a lognormal gap (median 8 ms, sigma 0.5), one
token per chunk, and records when every request arrived and when it sent every chunk. Kaliper, AIPerf and
inference-perf each load it in turn (closed loop, the same concurrency, 128-token prompts, 64-token
answers, the completions API streamed); each tool's TTFT and ITL percentiles are compared with the exact
(nearest-rank) percentiles of the server's records over that tool's own measured interval.

    .venv/bin/python bench/llm_fidelity.py [--concurrency 8] [--duration 30]

Goal: Kaliper within 1% of the truth at p50, p90 and p99 of TTFT and of the gaps between tokens.
"""

from __future__ import annotations

import argparse

from _common import measured_interval, nearest_rank, percent_error, reset, run_kaliper
from _llm import (
    aiperf_interval,
    install_peers,
    kaliper_config,
    run_aiperf,
    run_inference_perf,
    stream_records,
    streamtruth,
    true_ttfts_and_gaps,
)

PERCENTILES = (50.0, 90.0, 99.0)
MAX_TOKENS = 64


def in_interval(served, start: float, end: float):
    return [(arrived, chunks) for arrived, chunks in served if chunks and start <= arrived and chunks[-1] < end]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--port", type=int, default=18091)
    args = parser.parse_args()
    install_peers()

    flags = ("-ttft", "40ms", "-ttft-sigma", "0.3", "-gap", "8ms", "-gap-sigma", "0.5")
    with streamtruth(*flags, port=args.port) as base:
        load = {
            "closedLoop": {"concurrency": args.concurrency},
            "warmup": "3s",
            "minDuration": f"{args.duration}s",
            "maxDuration": f"{args.duration}s",
        }
        stage = run_kaliper(kaliper_config(base, load, MAX_TOKENS))["stages"][0]
        start, end = measured_interval(stage)
        _, served = stream_records(base)
        # Kaliper counts a stream in the window where it ended: the server's last chunk is a hair earlier.
        k_served = [(a, c) for a, c in served if c and start <= c[-1] < end]

        reset(base)
        load_args = ["--concurrency", str(args.concurrency), "--warmup-duration", "3"]
        aiperf, profiling = run_aiperf(base, [*load_args, "--benchmark-duration", str(args.duration)], MAX_TOKENS)
        _, served = stream_records(base)
        a_served = in_interval(served, *aiperf_interval(profiling))

        reset(base)
        requests = round(stage["throughputRps"] * args.duration)
        stage_ip = run_inference_perf(
            base,
            {"type": "concurrent", "stages": [{"num_requests": requests, "concurrency_level": args.concurrency}]},
            MAX_TOKENS,
        )
        _, ip_served = stream_records(base)

    tokens = stage["tokens"]
    kaliper = {
        "ttft": {p["percentile"]: p["valueMs"] for p in tokens["ttft"]["percentiles"]},
        "itl": {p["percentile"]: p["valueMs"] for p in tokens["itlChunk"]["percentiles"]},
    }
    aip = {
        "ttft": {p: aiperf["time_to_first_token"][f"p{p:g}"] for p in PERCENTILES},
        "itl": {p: aiperf["inter_chunk_latency"][f"p{p:g}"] for p in PERCENTILES},
        "itl_mean": {p: aiperf["inter_token_latency"][f"p{p:g}"] for p in PERCENTILES},
    }
    lat = stage_ip["successes"]["latency"]
    key = {50.0: "median", 90.0: "p90", 99.0: "p99"}
    ip = {
        "ttft": {p: lat["time_to_first_token"][key[p]] * 1000 for p in PERCENTILES},
        "itl": {p: lat["inter_token_latency"][key[p]] * 1000 for p in PERCENTILES},
    }
    truths = {name: true_ttfts_and_gaps(s) for name, s in (("k", k_served), ("a", a_served), ("i", ip_served))}

    print(
        f"# LLM fidelity: TTFT lognormal(40 ms, 0.3), gaps lognormal(8 ms, 0.5), {MAX_TOKENS}-token answers, "
        f"closed loop, {args.concurrency} streams, {args.duration} s\n"
    )
    print(f"Kaliper: {tokens['streams']} streams measured, the server answered {len(k_served)} in that interval.")
    print(f"AIPerf: {len(profiling)} requests in its profiling phase, the server answered {len(a_served)} then.")
    print(f"inference-perf: {stage_ip['successes']['count']} requests, the server answered {len(ip_served)}.\n")
    for figure, index, title in (("ttft", 0, "Time to first token"), ("itl", 1, "Gaps between tokens (ITL)")):
        print(f"**{title}** (truth: the server's records over each tool's interval; error against it)\n")
        print("| percentile | truth | Kaliper | error | truth | AIPerf | error | truth | inference-perf | error |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for p in PERCENTILES:
            cells = []
            for tool, name in ((kaliper, "k"), (aip, "a"), (ip, "i")):
                t = nearest_rank(truths[name][index], p)
                v = tool[figure][p]
                cells.append(f"{t:.3f} ms | {v:.3f} ms | {percent_error(v, t)}")
            print(f"| p{p:g} | " + " | ".join(cells) + " |")
        print()
    print("AIPerf's own \"inter token latency\" (percentiles of each request's mean gap) against the true gaps:\n")
    print("| percentile | truth (gaps) | AIPerf ITL | error |")
    print("|---|---|---|---|")
    for p in PERCENTILES:
        t = nearest_rank(truths["a"][1], p)
        v = aip["itl_mean"][p]
        print(f"| p{p:g} | {t:.3f} ms | {v:.3f} ms | {percent_error(v, t)} |")


if __name__ == "__main__":
    main()
