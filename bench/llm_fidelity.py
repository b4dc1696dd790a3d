"""LLM fidelity: do Kaliper's TTFT and inter-token percentiles match what the server did?

A streaming ground-truth server sends each answer's first token after a lognormal draw (median 40 ms, or
--ttft; sigma 0.3) and each later token after a lognormal gap (median 8 ms, sigma 0.5), one token per
chunk, and records when every request arrived and when it sent every chunk: bench/streamtruth (Go, the
default) or, with --server aiohttp, bench/streamtruth_aiohttp.py (Python's aiohttp, each event its own
chunk of a chunked body). Kaliper, a bare asyncio client (bench/sse_bare_client.py: the floor, what is left
when a client does nothing but read and time), AIPerf, inference-perf and GuideLLM each load it in turn (closed loop,
the same concurrency, 128-token prompts, 64-token answers, the completions API streamed); each one's TTFT and
ITL percentiles are compared with the exact (nearest-rank) percentiles of the server's records over its own
measured interval.

    .venv/bin/python bench/llm_fidelity.py [--server go|aiohttp] [--ttft 40ms] [--concurrency 8]
        [--duration 30] [--no-peers] [--reasoning N]

Goal: Kaliper within 1% of the truth at p50, p90 and p99 of TTFT and of the gaps between tokens, on both
servers, and within 0.5% of the bare client. With --reasoning, time to first output token too.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import measured_interval, nearest_rank, percent_error, reset, run_kaliper
from _llm import (
    aiperf_interval,
    guidellm_interval,
    install_peers,
    kaliper_config,
    one_token_word,
    run_aiperf,
    run_guidellm,
    run_inference_perf,
    stream_records,
    streamtruth,
    true_ttfts_and_gaps,
)
from sse_bare_client import run_bare
from tests.support.groundtruth import wait_http

PERCENTILES = (50.0, 90.0, 99.0)
MAX_TOKENS = 64


def in_interval(served, start: float, end: float):
    return [(arrived, chunks) for arrived, chunks in served if chunks and start <= arrived and chunks[-1] < end]


@contextmanager
def aiohttp_truth(ttft: str, port: int, reasoning: int = 0) -> Iterator[str]:
    script = Path(__file__).with_name("streamtruth_aiohttp.py")
    command = [sys.executable, str(script), "--port", str(port), "--ttft", ttft, "--word", one_token_word()]
    command += ["--reasoning", str(reasoning)]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/_truth/records")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", choices=["go", "aiohttp"], default="go")
    parser.add_argument("--ttft", default="40ms")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--port", type=int, default=18091)
    parser.add_argument("--no-peers", action="store_true", help="Kaliper and the bare client only")
    parser.add_argument(
        "--reasoning", type=int, default=0, help="the chat API, the first N tokens thinking (aiohttp; no peers)"
    )
    args = parser.parse_args()
    if args.reasoning:
        args.no_peers, args.server = True, "aiohttp"
    if not args.no_peers:
        install_peers()

    flags = ("-ttft", args.ttft, "-ttft-sigma", "0.3", "-gap", "8ms", "-gap-sigma", "0.5")
    server = (
        streamtruth(*flags, port=args.port)
        if args.server == "go"
        else aiohttp_truth(args.ttft, args.port, args.reasoning)
    )
    with server as base:
        load = {
            "closedLoop": {"concurrency": args.concurrency},
            "warmup": "3s",
            "minDuration": f"{args.duration}s",
            "maxDuration": f"{args.duration}s",
        }
        protocol = "openai-chat" if args.reasoning else "openai-completions"
        stage = run_kaliper(kaliper_config(base, load, MAX_TOKENS, protocol=protocol))["stages"][0]
        start, end = measured_interval(stage)
        _, served = stream_records(base)
        # Kaliper's stage: the streams the server received in its measured interval (a request counts in the
        # window it was sent in; those in flight at the end were awaited by its graceful stop).
        k_served = [(a, c) for a, c in served if c and start <= a < end]

        reset(base)
        bare = run_bare(base, args.concurrency, args.duration, 3, MAX_TOKENS, chat=bool(args.reasoning))
        _, served = stream_records(base)
        first_sent, last_end = min(s for s, _ in bare), max(a[-1] for _, a in bare)
        b_served = [(a, c) for a, c in served if c and first_sent <= a + 0.001 and c[-1] <= last_end]

        if not args.no_peers:
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

            reset(base)
            guide = run_guidellm(base, args.concurrency, args.duration, MAX_TOKENS)
            _, served = stream_records(base)
            g_served = in_interval(served, *guidellm_interval(guide))

    tokens = stage["tokens"]
    kaliper = {
        "ttft": {p["percentile"]: p["valueMs"] for p in tokens["ttft"]["percentiles"]},
        "itl": {p["percentile"]: p["valueMs"] for p in tokens["itlChunk"]["percentiles"]},
    }
    bare_ttfts = [(arrivals[0] - sent) * 1000 for sent, arrivals in bare]
    bare_gaps = [(b - a) * 1000 for _, arrivals in bare for a, b in itertools.pairwise(arrivals)]
    floor = {
        "ttft": {p: nearest_rank(bare_ttfts, p) for p in PERCENTILES},
        "itl": {p: nearest_rank(bare_gaps, p) for p in PERCENTILES},
    }
    truths = {name: true_ttfts_and_gaps(s) for name, s in (("k", k_served), ("b", b_served))}
    figures = [("ttft", 0, "Time to first token"), ("itl", 1, "Gaps between tokens (ITL)")]
    if args.reasoning:
        # The first answer token is the chunk after the thinking (every answer is longer than its thinking).
        kaliper["ttfot"] = {p["percentile"]: p["valueMs"] for p in tokens["ttfot"]["percentiles"]}
        bare_ttfots = [(arrivals[args.reasoning] - sent) * 1000 for sent, arrivals in bare]
        floor["ttfot"] = {p: nearest_rank(bare_ttfots, p) for p in PERCENTILES}
        for name, served_by in (("k", k_served), ("b", b_served)):
            truths[name] += ([(chunks[args.reasoning] - arrived) * 1000 for arrived, chunks in served_by],)
        figures.insert(1, ("ttfot", 2, "Time to first output token (the first after the thinking)"))
    stack = "Go (bench/streamtruth)" if args.server == "go" else "Python aiohttp (bench/streamtruth_aiohttp.py)"
    if args.reasoning:
        stack += f", the chat API, the first {args.reasoning} tokens of every answer thinking (delta.reasoning)"
    print(
        f"# LLM fidelity on {stack}: TTFT lognormal({args.ttft}, 0.3), gaps lognormal(8 ms, 0.5), "
        f"{MAX_TOKENS}-token answers, closed loop, {args.concurrency} streams, {args.duration} s\n"
    )
    print(f"Kaliper: {tokens['streams']} streams measured, the server answered {len(k_served)} in that interval.")
    print(f"bare asyncio client: {len(bare)} requests measured, the server answered {len(b_served)} then.\n")
    for figure, index, title in figures:
        print(f"**{title}**: Kaliper and the floor against the truth, and Kaliper's error less the floor's\n")
        print(
            "| percentile | truth | Kaliper | error | truth | bare client | error | Kaliper's error less the floor's |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for p in PERCENTILES:
            t_k, t_b = nearest_rank(truths["k"][index], p), nearest_rank(truths["b"][index], p)
            v_k, v_b = kaliper[figure][p], floor[figure][p]
            over = (v_k - t_k) / t_k * 100 - (v_b - t_b) / t_b * 100
            print(
                f"| p{p:g} | {t_k:.3f} ms | {v_k:.3f} ms | {percent_error(v_k, t_k)} | {t_b:.3f} ms | {v_b:.3f} ms | "
                f"{percent_error(v_b, t_b)} | {over:+.2f} points |"
            )
        print()
    if args.no_peers:
        return
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
    g_ttft = guide["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]
    g_itl = guide["metrics"]["inter_token_latency_ms"]["successful"]["percentiles"]
    gl = {
        "ttft": {p: g_ttft[f"p{p:g}"] for p in PERCENTILES},
        "itl_mean": {p: g_itl[f"p{p:g}"] for p in PERCENTILES},
    }
    truths |= {name: true_ttfts_and_gaps(s) for name, s in (("a", a_served), ("i", ip_served), ("g", g_served))}
    print(f"AIPerf: {len(profiling)} requests in its profiling phase, the server answered {len(a_served)} then.")
    print(f"inference-perf: {stage_ip['successes']['count']} requests, the server answered {len(ip_served)}.")
    print(f"GuideLLM: {len(guide['requests']['successful'])} requests, the server answered {len(g_served)} then.\n")
    print("**Time to first token, GuideLLM** (it reports no gap between tokens: each request's mean gap, below)\n")
    print("| percentile | truth | GuideLLM | error |")
    print("|---|---|---|---|")
    for p in PERCENTILES:
        t = nearest_rank(truths["g"][0], p)
        print(f"| p{p:g} | {t:.3f} ms | {gl['ttft'][p]:.3f} ms | {percent_error(gl['ttft'][p], t)} |")
    print()
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
    print("AIPerf's and GuideLLM's own \"inter token latency\" (percentiles of each request's mean gap) against")
    print("the true gaps:\n")
    print("| percentile | truth (gaps) | AIPerf ITL | error | truth (gaps) | GuideLLM ITL | error |")
    print("|---|---|---|---|---|---|---|")
    for p in PERCENTILES:
        t_a, t_g = nearest_rank(truths["a"][1], p), nearest_rank(truths["g"][1], p)
        v_a, v_g = aip["itl_mean"][p], gl["itl_mean"][p]
        print(
            f"| p{p:g} | {t_a:.3f} ms | {v_a:.3f} ms | {percent_error(v_a, t_a)} | {t_g:.3f} ms | {v_g:.3f} ms | "
            f"{percent_error(v_g, t_g)} |"
        )


if __name__ == "__main__":
    main()
