"""llama.cpp's llama-server on this machine: time to first token, gaps between tokens and tokens per second
at 1-16 concurrent streams and 1-8 slots, each stage checked against the server's own counters.

The model is kaliper.serving.tiny_llm's benchmark shape (random weights, vocab 8192, dim 512, 8 layers:
143 MB, timings in milliseconds), made once under the cache; llama-server comes from hack/llama/build.sh.
For each slot count a server is started (-np SLOTS, 2 threads) and Kaliper runs one stage per concurrency
level (closed loop, 128-token prompts, 64-token answers, chat API streamed, no prompt cache). The ground truth
beside each stage is the server's /metrics over the same measured interval (the self-check): its count of
output tokens and its summed generation time against the generator's.

    .venv/bin/python bench/llm_server.py [--duration 10] [--slots 1,2,4,8] [--streams 1,2,4,8,16]
"""

from __future__ import annotations

import argparse

from _common import run_kaliper
from _llm import CACHE
from tests.support.llama import MODEL_NAME, llama_server

from kaliper.serving.tiny_llm import benchmark_shape, make_tiny_llm


def model() -> tuple[str, str]:
    directory = CACHE / "tiny-llm-benchmark-shape"
    gguf = directory / f"{MODEL_NAME}.gguf"
    if not gguf.exists():
        make_tiny_llm(directory, benchmark_shape(), name=MODEL_NAME)
    return str(gguf), str(directory / "tokenizer.json")


def at(figures: dict, percentile: float) -> str:
    return f"{next(p['valueMs'] for p in figures['percentiles'] if p['percentile'] == percentile):.1f} ms"


def versus(check: dict, figure: str, unit: str = "") -> str:
    c = check.get(figure)
    if c is None:
        return "-"
    return f"{c['server']:,.4g}{unit} vs {c['generator']:,.4g}{unit} ({c['difference']:+.2%})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--slots", default="1,2,4,8")
    parser.add_argument("--streams", default="1,2,4,8,16")
    args = parser.parse_args()
    gguf, tokenizer = model()
    levels = [int(n) for n in args.streams.split(",")]

    rows = []
    for slots in (int(n) for n in args.slots.split(",")):
        with llama_server(gguf, slots=slots, threads=2, context=512) as base:
            config = {
                "url": base,
                "request": {
                    "protocol": "openai-chat",
                    "modelName": MODEL_NAME,
                    "timeout": "60s",
                    "generation": {"maxTokens": 64, "ignoreEos": True, "extraBody": {"cache_prompt": False}},
                },
                "payload": {
                    "prompts": {
                        "synthetic": {"inputTokens": {"distribution": "fixed", "mean": 128}, "count": 512},
                        "tokenizer": {"file": tokenizer},
                    }
                },
                "load": {
                    "closedLoop": {"concurrency": levels[0]},
                    "warmup": "3s",
                    "minDuration": f"{args.duration}s",
                    "maxDuration": f"{args.duration}s",
                },
                "levels": levels,
            }
            for stage in run_kaliper(config)["stages"]:
                rows.append((slots, stage))

    print(
        f"# llama-server, benchmark-shape tiny model, 2 threads, 128-token prompts, 64-token answers, "
        f"{args.duration} s a stage\n"
    )
    print(
        "| slots | streams | answers/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | output tok/s | "
        "server's output tokens vs Kaliper's | server's generation time vs Kaliper's |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for slots, stage in rows:
        tokens = stage["tokens"]
        check = {c["figure"]: c for c in (tokens.get("serverCheck") or {}).get("comparisons", [])}
        print(
            f"| {slots} | {stage['level']:g} | {stage['throughputRps']:.2f} | {at(tokens['ttft'], 50)} | "
            f"{at(tokens['ttft'], 99)} | {at(tokens['itlChunk'], 50)} | {at(tokens['itlChunk'], 99)} | "
            f"{tokens['outputTokensPerS']:,.0f} | {versus(check, 'outputTokens')} | "
            f"{versus(check, 'generationSeconds', ' s')} |"
        )


if __name__ == "__main__":
    main()
