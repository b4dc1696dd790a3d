"""A real vLLM (its CPU build) on this machine: time to first token, gaps between tokens and tokens per
second at 1-16 concurrent streams and 1-8 slots (max-num-seqs), each stage checked against the server's own
counters; then the prefix cache: the same server with prompts sharing none, half or nine tenths of their
text (512-token prompts), its hit rate by its own counters beside the share of prompt tokens its usage says
were cached. vLLM caches whole 128-token blocks on CPUs: a shared part counts in whole blocks.

The model is kaliper.serving.hf_llm's random-weight chat model (made once under the cache); vLLM comes from
hack/vllm/venv.sh, started with the command line Kaliper's vllm runtime writes and pinned to CPU 1 (its
OpenMP thread bound there, the KV cache 1 GiB), the generator pinned to CPU 0, as `kaliper run` places a
1-CPU trial on two cores: unpinned, vLLM's busy threads starve the generator, which then reads several
chunks at once. Closed loop, 256-token prompts, 32-token answers, chat API streamed.

    .venv/bin/python bench/vllm_server.py [--duration 6] [--slots 1,2,4,8] [--streams 1,2,4,8,16]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import run_kaliper
from _llm import CACHE
from tests.support.vllm import vllm_server, vllm_spec

from kaliper.serving.hf_llm import make_hf_chat_model

SERVER_CPUS, GENERATOR_CPUS = {1}, "0"


def model() -> Path:
    directory = CACHE / "chat-hf"
    if not (directory / "model.safetensors").exists():
        make_hf_chat_model(directory)
    return directory


def at(figures: dict, percentile: float) -> str:
    return f"{next(p['valueMs'] for p in figures['percentiles'] if p['percentile'] == percentile):.1f} ms"


def versus(check: dict, figure: str) -> str:
    c = check.get(figure)
    if c is None:
        return "-"
    return f"{c['server']:,.4g} vs {c['generator']:,.4g} ({c['difference']:+.2%})"


def config(
    base: str, tokenizer: str, levels: list[int], duration: int, shared: float = 0.0, prompt: int = 256, turns: int = 1
) -> dict:
    synthetic = {"inputTokens": {"distribution": "fixed", "mean": prompt}, "count": 512, "sharedPrefixRatio": shared}
    return {
        "url": base,
        "request": {
            "protocol": "openai-chat",
            "modelName": "chat",
            "timeout": "60s",
            "generation": {"maxTokens": 32, "ignoreEos": True},
        },
        "payload": {"prompts": {"synthetic": synthetic, "tokenizer": {"file": tokenizer}, "turns": turns}},
        "load": {
            "closedLoop": {"concurrency": levels[0]},
            "warmup": "2s",
            "minDuration": f"{duration}s",
            "maxDuration": f"{duration}s",
        },
        "levels": levels,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=int, default=6)
    parser.add_argument("--slots", default="1,2,4,8")
    parser.add_argument("--streams", default="1,2,4,8,16")
    parser.add_argument("--prefix-only", action="store_true", help="only the prefix-cache table")
    args = parser.parse_args()
    folder = model()
    tokenizer = str(folder / "tokenizer.json")
    levels = [int(n) for n in args.streams.split(",")]

    rows = []
    for slots in [] if args.prefix_only else (int(n) for n in args.slots.split(",")):
        spec = vllm_spec(folder, "chat", slots=slots, maxModelLength=1024, prefixCaching=False)
        with tempfile.TemporaryDirectory() as work, vllm_server(spec, Path(work), SERVER_CPUS) as base:
            stages = run_kaliper(config(base, tokenizer, levels, args.duration), cpus=GENERATOR_CPUS)["stages"]
            rows += [(slots, stage) for stage in stages]

    if not args.prefix_only:
        print(f"# vLLM (CPU build) on CPU 1, the generator on CPU 0, prefix caching off, {args.duration} s a stage\n")
        print(
            "| slots | streams | answers/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | output tok/s | "
            "server's output tokens vs Kaliper's | server's mean TTFT vs Kaliper's (ms) | running (max) | "
            "queued (max) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for slots, stage in rows:
            tokens = stage["tokens"]
            check = {c["figure"]: c for c in (tokens.get("serverCheck") or {}).get("comparisons", [])}
            load = tokens.get("serverLoad") or {}
            print(
                f"| {slots} | {stage['level']:g} | {stage['throughputRps']:.2f} | {at(tokens['ttft'], 50)} | "
                f"{at(tokens['ttft'], 99)} | {at(tokens['itlChunk'], 50)} | {at(tokens['itlChunk'], 99)} | "
                f"{tokens['outputTokensPerS']:,.0f} | {versus(check, 'outputTokens')} | "
                f"{versus(check, 'meanTtftMs')} | "
                f"{load.get('runningMax', '-')} | {load.get('waitingMax', '-')} |"
            )

    print("\n# the prefix cache: 4 slots, 4 streams, 512-token prompts, prefix caching on (128-token blocks)\n")
    print(
        "| shared part of each prompt | TTFT p50 | prefix cache hits (server's counters) | cached prompt tokens "
        "(usage) |"
    )
    print("|---|---|---|---|")
    spec = vllm_spec(folder, "chat", slots=4, maxModelLength=2048, prefixCaching=True)
    with tempfile.TemporaryDirectory() as work, vllm_server(spec, Path(work), SERVER_CPUS) as base:
        # Three-turn sessions of 512-token questions, nothing shared between them: each later turn carries the
        # session's earlier questions and answers, which the cache holds.
        for shared, turns, label in ((0.0, 1, "0%"), (0.5, 1, "50%"), (0.9, 1, "90%"), (0.0, 3, "0%, 3-turn sessions")):
            workload = config(base, tokenizer, [4], args.duration, shared, prompt=512, turns=turns)
            (stage,) = run_kaliper(workload, cpus=GENERATOR_CPUS)["stages"]
            tokens = stage["tokens"]
            rate = (tokens.get("serverLoad") or {}).get("prefixCacheHitRate")
            cached = tokens.get("cachedInputTokens")
            share = f"{cached / tokens['inputTokens']:.1%}" if cached is not None and tokens["inputTokens"] else "-"
            print(f"| {label} | {at(tokens['ttft'], 50)} | {'-' if rate is None else f'{rate:.1%}'} | {share} |")


if __name__ == "__main__":
    main()
