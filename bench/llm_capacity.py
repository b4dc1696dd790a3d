"""LLM capacity: streams and streamed tokens per second per load-generator core, Kaliper against AIPerf and
GuideLLM.

The streaming ground-truth server (bench/streamtruth) answers with no delay at all (64 one-token chunks as
fast as it can write them, no records), pinned to CPU 1. On CPU 0, in turn: Kaliper's generator (closed
loop, one process, every chunk's arrival time taken and every gap recorded in its histograms), AIPerf and
GuideLLM (all their processes pinned to the same CPU), the same concurrency, the completions API streamed.

    .venv/bin/python bench/llm_capacity.py [--concurrency 32] [--duration 15]

Goal: Kaliper at least 2x AIPerf's streams and tokens per second on one core (GuideLLM beside them).
"""

from __future__ import annotations

import argparse

from _common import run_kaliper
from _llm import install_peers, kaliper_config, run_aiperf, run_guidellm, streamtruth

MAX_TOKENS = 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--port", type=int, default=18093)
    args = parser.parse_args()
    install_peers()

    zero = ("-ttft", "0", "-gap", "0", "-no-records")
    with streamtruth(*zero, port=args.port, prefix=("taskset", "-c", "1")) as base:
        load = {
            "closedLoop": {"concurrency": args.concurrency},
            "warmup": "3s",
            "minDuration": f"{args.duration}s",
            "maxDuration": f"{args.duration}s",
        }
        stage = run_kaliper(kaliper_config(base, load, MAX_TOKENS), cpus="0")["stages"][0]
        load_args = ["--concurrency", str(args.concurrency), "--warmup-duration", "3"]
        aiperf, _ = run_aiperf(base, [*load_args, "--benchmark-duration", str(args.duration)], MAX_TOKENS, cpus="0")
        guide = run_guidellm(base, args.concurrency, args.duration, MAX_TOKENS, cpus="0")

    tokens = stage["tokens"]
    kaliper = (stage["throughputRps"], tokens["outputTokensPerS"], tokens["itlChunk"]["count"])
    aip = (aiperf["request_throughput"]["avg"], aiperf["output_token_throughput"]["avg"])
    metrics = guide["metrics"]
    gl = (
        metrics["requests_per_second"]["successful"]["mean"],
        metrics["output_tokens_per_second"]["successful"]["mean"],
    )
    print(
        f"# LLM capacity: zero-delay server on CPU 1, generator on CPU 0, {args.concurrency} streams, "
        f"{MAX_TOKENS}-token answers, {args.duration} s\n"
    )
    print("| generator | streams/s | output tokens/s | ratio to AIPerf |")
    print("|---|---|---|---|")
    print(f"| AIPerf 0.13.0 | {aip[0]:,.1f} | {aip[1]:,.0f} | 1.00 |")
    print(f"| GuideLLM 0.8.1 | {gl[0]:,.1f} | {gl[1]:,.0f} | {gl[1] / aip[1]:.2f} |")
    print(f"| Kaliper, 1 process | {kaliper[0]:,.1f} | {kaliper[1]:,.0f} | {kaliper[1] / aip[1]:.2f} |")
    print(f"\nKaliper recorded {kaliper[2]:,} gaps between chunks in its histograms ({tokens['chunks']:,} chunks).")


if __name__ == "__main__":
    main()
