"""A trace with a burst, replayed by Kaliper, AIPerf and inference-perf against a server that stalls: does each
see the time to first token the trace's users would have seen?

The trace is 12 s of the project's example (examples/llm/traces/burst.jsonl, seconds 6 to 18: 4 requests a
second, a 2 s burst at 40 a second in the middle), re-based to start at 0 and written in both shapes: Mooncake
JSON Lines for Kaliper and AIPerf (--custom-dataset-type mooncake_trace --fixed-schedule), Azure's CSV for
inference-perf (load type trace_replay), at its own speed (AIPerf replays a Mooncake trace only at that).
The streaming ground-truth server (bench/streamtruth) holds every request that arrives during a 1 s stall,
once every 2.5 s (so the 2 s burst always meets one), then sends the first token after a lognormal draw
(median 40 ms, sigma 0.3). A request meant for time t therefore sees its first token after the stall time
left at t plus its draw: for a tool's replay that starts at T0, the true TTFT distribution is the mixture of
those over the trace's times T0 + offset (`mixture_percentile`). Kaliper's T0 is its stage's start; a peer's
is read from the server's records (its earliest arrival less that request's offset: sends are never early).
Beside each tool's figure: the server's own record over that tool's requests (arrival to first chunk).

    .venv/bin/python bench/llm_trace_replay.py

Goal (issue 41): Kaliper's TTFT within 2% of the server's records, and its corrected TTFT within 2% of the
analytic truth through the burst, at p50, p90 and p99.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from _common import BENCH, lognormal_cdf, nearest_rank, percent_error, reset, run_kaliper
from _llm import (
    AIPERF,
    MODEL,
    inference_perf,
    install_peers,
    stream_records,
    streamtruth,
    tokenizer_dir,
    ttft_percentiles,
)

from kaliper.loadgen.example_traces import write_azure, write_mooncake
from kaliper.loadgen.traces import TraceRequest, read_trace

MEDIAN_S, SIGMA, EVERY_S, STALL_S = 0.040, 0.3, 2.5, 1.0
WINDOW_S = (6.0, 18.0)
PERCENTILES = (50.0, 90.0, 99.0)


def bench_trace(directory: Path, laps: int) -> tuple[Path, Path, list[TraceRequest]]:
    """The window, re-based to 0 and repeated `laps` times one after another (so that the percentiles of a
    sample this size stand close to the distribution's: a single lap's 114 requests put the median's own
    sampling error near 3%)."""
    whole = read_trace(BENCH.parent / "examples" / "llm" / "traces" / "burst.jsonl", "mooncake")
    window = [r for r in whole if WINDOW_S[0] <= r.at_s < WINDOW_S[1]]
    length, first = WINDOW_S[1] - WINDOW_S[0], window[0].at_s
    # From the first request (every tool replays a trace from its first row), in milliseconds, as both files
    # hold them: every tool replays the very same times.
    repeated = [
        TraceRequest(round((r.at_s - first + lap * length) * 1000) / 1000, r.input_tokens, r.output_tokens)
        for lap in range(laps)
        for r in window
    ]
    return write_mooncake(directory / "bench.jsonl", repeated), write_azure(directory / "bench.csv", repeated), repeated


def held_s(t: float, epoch: float) -> float:
    """How long the server holds a request that arrives at t (unix s)."""
    phase = (t - epoch) % EVERY_S
    return STALL_S - phase if phase < STALL_S else 0.0


def mixture_percentile(p: float, holds: list[float]) -> float:
    """The p-th percentile (ms) of hold + lognormal draw over the given holds, by bisection on the mixture CDF."""

    def cdf(x: float) -> float:
        return sum(lognormal_cdf(x - h, MEDIAN_S, SIGMA) for h in holds) / len(holds)

    low, high = 0.0, STALL_S + 10.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p / 100 else (low, mid)
    return (low + high) / 2 * 1000


def peer_start(arrivals: list[float], offsets: list[float]) -> float:
    """A peer's replay start: the earliest of (arrival - offset), pairing both in time order."""
    return min(a - o for a, o in zip(sorted(arrivals), sorted(offsets), strict=True))


def hub_cache(directory: Path) -> Path:
    """The tiny tokenizer as a Hugging Face cache snapshot of a repo named local/tiny. AIPerf 0.13.0 makes a
    trace's prompts in worker processes that force offline mode, where it finds a tokenizer only in the hub's
    cache, never by a local path (the synthetic benchmarks, which make prompts in the main process, take the
    path)."""
    revision = "0" * 40
    snapshot = directory / "models--local--tiny" / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (directory / "models--local--tiny" / "refs").mkdir()
    (directory / "models--local--tiny" / "refs" / "main").write_text(revision)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (snapshot / name).write_bytes((tokenizer_dir() / name).read_bytes())
    return directory


def run_aiperf_trace(base: str, trace: Path) -> dict[str, Any]:
    """AIPerf's summary. Its exit status is not checked: with no /metrics at the server its metrics
    collector ends in an error after the profile is written."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            str(AIPERF), "profile", "--model", MODEL, "--url", base, "--endpoint-type", "completions",
            "--streaming", "--tokenizer", "local/tiny", "--input-file", str(trace),
            "--custom-dataset-type", "mooncake_trace", "--fixed-schedule", "--fixed-schedule-auto-offset",
            "--extra-inputs", "ignore_eos:true", "--use-server-token-count", "--ui-type", "none",
            "--no-gpu-telemetry", "--artifact-dir", tmp,
        ]  # fmt: skip
        hub = hub_cache(Path(tmp) / "hub")
        environment = {**os.environ, "HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1"}
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
        return json.loads((Path(tmp) / "profile_export_aiperf.json").read_text())


def run_inference_perf_trace(base: str, trace: Path, requests: int, length_s: float) -> dict[str, Any]:
    """inference-perf's trace_replay load: its stage sends rate x duration requests on the trace's times, the
    prompts' and answers' lengths from the trace too."""
    duration = math.ceil(length_s) + 1
    trace_config = {"file": str(trace), "format": "AzurePublicDataset"}
    stages = [{"rate": requests / duration, "duration": duration}]
    return inference_perf(
        base,
        {"type": "random", "trace": trace_config},
        {"type": "trace_replay", "trace": trace_config, "stages": stages},
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--laps", type=int, default=8, help="times the 12 s window is replayed in a row")
    args = parser.parse_args()
    install_peers()
    flags = ("-ttft", "40ms", "-ttft-sigma", "0.3", "-gap", "8ms", "-gap-sigma", "0.5")
    stall = ("-stall-every", f"{EVERY_S * 1000:g}ms", "-stall-for", f"{STALL_S * 1000:g}ms")
    with tempfile.TemporaryDirectory() as tmp, streamtruth(*flags, *stall, port=18093) as base:
        mooncake, azure, trace = bench_trace(Path(tmp), args.laps)
        offsets = [r.at_s for r in trace]
        config = {
            "url": base,
            "request": {
                "protocol": "openai-completions",
                "modelName": MODEL,
                "timeout": "60s",
                "generation": {"ignoreEos": True},
            },
            "payload": {
                "prompts": {
                    "trace": {"file": str(mooncake), "format": "mooncake"},
                    "tokenizer": {"file": str(tokenizer_dir() / "tokenizer.json")},
                }
            },
            "load": {"trace": {}, "warmup": "0s"},
        }
        stage = run_kaliper(config)["stages"][0]
        epoch, served = stream_records(base)
        from datetime import datetime

        kaliper_start = datetime.fromisoformat(stage["startedAt"].replace("Z", "+00:00")).timestamp()
        kaliper_served = [(a, c) for a, c in served if a >= kaliper_start and c]
        reset(base)
        aiperf = run_aiperf_trace(base, mooncake)
        _, aiperf_served = stream_records(base)
        reset(base)
        stage_ip = run_inference_perf_trace(base, azure, len(trace), offsets[-1])
        _, ip_served = stream_records(base)

    def truth(start: float) -> dict[float, float]:
        holds = [held_s(start + offset, epoch) for offset in offsets]
        return {p: mixture_percentile(p, holds) for p in PERCENTILES}

    def from_intended(served_by: list[tuple[float, list[float]]], start: float) -> dict[float, float]:
        """The server's first token less each request's time in the replay (arrivals and the trace's times
        paired in order): the sample's own truth of a TTFT from the trace's time."""
        firsts = [chunks[0] for _, chunks in sorted(served_by)]
        ttfts = [(first - (start + offset)) * 1000 for first, offset in zip(firsts, offsets, strict=True)]
        return {p: nearest_rank(ttfts, p) for p in PERCENTILES}

    def recorded(served_by: list[tuple[float, list[float]]]) -> dict[float, float]:
        ttfts = [(chunks[0] - arrived) * 1000 for arrived, chunks in served_by if chunks]
        return {p: nearest_rank(ttfts, p) for p in PERCENTILES}

    ttft = ttft_percentiles(stage, aiperf, stage_ip, PERCENTILES)
    corrected, from_send, aip, ip = ttft["corrected"], ttft["from_send"], ttft["aiperf"], ttft["inference_perf"]
    ai_start = peer_start([a for a, _ in aiperf_served], offsets)
    ip_start = peer_start([a for a, _ in ip_served], offsets)
    rows = [
        ("Kaliper, from the trace's time (corrected)", corrected, truth(kaliper_start), "analytic"),
        ("Kaliper, from the trace's time (corrected)", corrected, from_intended(kaliper_served, kaliper_start),
         "the server's first token from the trace's time"),
        ("Kaliper, from the send", from_send, recorded(kaliper_served), "server-recorded"),
        ("AIPerf (from its send)", aip, truth(ai_start), "analytic"),
        ("AIPerf (from its send)", aip, recorded(aiperf_served), "server-recorded"),
        ("inference-perf (from its send)", ip, truth(ip_start), "analytic"),
        ("inference-perf (from its send)", ip, recorded(ip_served), "server-recorded"),
    ]  # fmt: skip
    late = stage["lateSends"]
    print(
        f"# Trace replay: {len(trace)} requests over {offsets[-1]:.1f} s (a 2 s burst at 40/s), 1 s stall every "
        f"{EVERY_S:g} s, TTFT lognormal(40 ms, 0.3)\n"
    )
    print(
        f"Kaliper: {stage['requests']} requests, late sends {late['count']} ({late['share']:.2%}), stopped: "
        f"{stage['stopReason']}; the server answered {len(kaliper_served)}. AIPerf: "
        f"{aiperf['request_count']['avg']:.0f} requests (the server answered {len(aiperf_served)}); inference-perf: "
        f"{stage_ip['successes']['count']} (the server answered {len(ip_served)}).\n"
    )
    print("| TTFT | against | p50 truth | p50 | error | p90 truth | p90 | error | p99 truth | p99 | error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, figures, truths, kind in rows:
        cells = [
            f"{truths[p]:.1f} ms | {figures[p]:.1f} ms | {percent_error(figures[p], truths[p])}" for p in PERCENTILES
        ]
        print(f"| {name} | {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
