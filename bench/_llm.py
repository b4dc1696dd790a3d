"""Shared pieces of the LLM benchmarks: the streaming ground-truth server (bench/streamtruth), its records
as true TTFTs and gaps, and runs of Kaliper, AIPerf, inference-perf and GuideLLM against one
OpenAI-compatible URL.

The peers are installed by bench/llm_peers.sh into their own environments under the cache; the tiny LLM's
tokenizer (kaliper.serving.tiny_llm) is every tool's tokenizer, so no tool downloads anything."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from _common import BENCH, groundtruth
from tests.support.groundtruth import CACHE, STREAM_SOURCE

PEERS = CACHE / "peers"
AIPERF = PEERS / "aiperf-0.13.0" / "bin" / "aiperf"
INFERENCE_PERF = PEERS / "inference-perf-0.7.0" / "bin" / "inference-perf"
GUIDELLM = PEERS / "guidellm-0.8.1" / "bin" / "guidellm"
MODEL = "truth"


def install_peers() -> None:
    subprocess.run(["bash", str(BENCH / "llm_peers.sh")], check=True)


def tokenizer_dir() -> Path:
    """The tiny LLM's tokenizer.json (+ tokenizer_config.json), made once under the cache."""
    from kaliper.serving.tiny_llm import make_tiny_llm

    directory = CACHE / "tiny-llm-tokenizer"
    if not (directory / "tokenizer_config.json").exists():
        make_tiny_llm(directory)
    return directory


def one_token_word() -> str:
    """A word the tiny tokenizer encodes as one token: the server's every token, so that every tool
    counts one token per chunk."""
    from kaliper.loadgen.prompts import load_tokenizer, single_token_words

    return single_token_words(load_tokenizer(tokenizer_dir() / "tokenizer.json"))[0]


@contextmanager
def streamtruth(*flags: str, port: int, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    with groundtruth("-word", one_token_word(), *flags, port=port, source=STREAM_SOURCE, prefix=prefix) as base:
        yield base


def stream_records(base: str) -> tuple[float, list[tuple[float, list[float]]]]:
    """(stall epoch, [(arrived unix s, [content chunk sent unix s, ...])]) of every answered request."""
    import urllib.request

    data = json.loads(urllib.request.urlopen(f"{base}/_truth/records", timeout=60).read())
    return data["epoch"], [(r["arrived"] / 1e9, [ns / 1e9 for ns in r["chunks"]]) for r in data["records"]]


def true_ttfts_and_gaps(served: list[tuple[float, list[float]]]) -> tuple[list[float], list[float]]:
    """The server's own TTFTs (arrival to first content chunk) and gaps between chunks, in ms."""
    ttfts = [(chunks[0] - arrived) * 1000 for arrived, chunks in served if chunks]
    gaps = [(b - a) * 1000 for _, chunks in served for a, b in itertools.pairwise(chunks)]
    return ttfts, gaps


def kaliper_config(
    base: str, load: dict[str, Any], max_tokens: int, input_tokens: int = 128, protocol: str = "openai-completions"
) -> dict[str, Any]:
    return {
        "url": base,
        "request": {
            "protocol": protocol,
            "modelName": MODEL,
            "timeout": "60s",
            "generation": {"maxTokens": max_tokens, "ignoreEos": True},
        },
        "payload": {
            "prompts": {
                "synthetic": {"inputTokens": {"distribution": "fixed", "mean": input_tokens}, "count": 512},
                "tokenizer": {"file": str(tokenizer_dir() / "tokenizer.json")},
            }
        },
        "load": load,
    }


def ttft_percentiles(
    stage: dict[str, Any], aiperf: dict[str, Any], stage_ip: dict[str, Any], percentiles: tuple[float, ...]
) -> dict[str, dict[float, float]]:
    """Each tool's TTFT percentiles in ms: Kaliper's from the intended send ("corrected") and from the send,
    AIPerf's, inference-perf's (its median is its p50; its figures are seconds)."""
    tokens = stage["tokens"]
    lat = stage_ip["successes"]["latency"]["time_to_first_token"]
    return {
        "corrected": {p["percentile"]: p["valueMs"] for p in tokens["ttft"]["percentiles"]},
        "from_send": {p["percentile"]: p["valueMs"] for p in tokens["ttftService"]["percentiles"]},
        "aiperf": {p: aiperf["time_to_first_token"][f"p{p:g}"] for p in percentiles},
        "inference_perf": {p: lat["median" if p == 50 else f"p{p:g}"] * 1000 for p in percentiles},
    }


def run_aiperf(
    base: str, load_args: list[str], max_tokens: int, cpus: str | None = None, input_tokens: int = 128
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """AIPerf's summary (profile_export_aiperf.json) and its per-request records of the profiling phase."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            str(AIPERF), "profile", "--model", MODEL, "--url", base, "--endpoint-type", "completions",
            "--streaming", "--tokenizer", str(tokenizer_dir()), "--isl", str(input_tokens), "--isl-stddev", "0",
            "--osl", str(max_tokens), "--osl-stddev", "0", "--extra-inputs", "ignore_eos:true",
            "--use-server-token-count", "--ui-type", "none", "--no-gpu-telemetry", "--artifact-dir", tmp,
            *load_args,
        ]  # fmt: skip
        if cpus:
            command = ["taskset", "-c", cpus, *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        summary = json.loads((Path(tmp) / "profile_export_aiperf.json").read_text())
        per_request = [json.loads(line) for line in (Path(tmp) / "profile_export.jsonl").read_text().splitlines()]
    profiling = [r for r in per_request if r["metadata"].get("benchmark_phase") == "profiling"]
    return summary, profiling


def aiperf_interval(profiling: list[dict[str, Any]]) -> tuple[float, float]:
    """Wall-clock interval of AIPerf's profiling phase: its first send to its last answer."""
    starts = [r["metadata"]["request_start_ns"] for r in profiling]
    ends = [r["metadata"]["request_end_ns"] for r in profiling]
    return min(starts) / 1e9, max(ends) / 1e9


def run_inference_perf(base: str, load: dict[str, Any], max_tokens: int, input_tokens: int = 128) -> dict[str, Any]:
    """inference-perf's per-stage lifecycle metrics (seconds) for prompts and answers of exact lengths."""
    exact = {"min": input_tokens, "max": input_tokens, "mean": input_tokens, "std_dev": 0}
    data = {
        "type": "random",
        "input_distribution": exact,
        "output_distribution": {**exact, "min": max_tokens, "max": max_tokens, "mean": max_tokens},
    }
    return inference_perf(base, data, load)


def inference_perf(base: str, data: dict[str, Any], load: dict[str, Any]) -> dict[str, Any]:
    """inference-perf's first stage's lifecycle metrics (seconds) for its `data` and `load` sections.
    Connection: close because it reuses connections the way aiohttp does (the notes' keep-alive finding); the
    ground-truth server keeps them alive correctly, but the same config then runs against llama-server too."""
    with tempfile.TemporaryDirectory() as tmp:
        config = {
            "api": {"type": "completion", "streaming": True},
            "server": {"type": "vllm", "model_name": MODEL, "base_url": base, "ignore_eos": True},
            "tokenizer": {"pretrained_model_name_or_path": str(tokenizer_dir())},
            "data": data,
            "load": {**load, "num_workers": 1},
            "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": False}},
            "storage": {"local_storage": {"path": f"{tmp}/out"}},
        }
        path = Path(tmp) / "config.yml"
        path.write_text(yaml.safe_dump(config))
        subprocess.run(
            [str(INFERENCE_PERF), "--config_file", str(path)],
            check=True,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        return json.loads((Path(tmp) / "out" / "stage_0_lifecycle_metrics.json").read_text())


def run_guidellm(
    base: str, streams: int, seconds: int, max_tokens: int, input_tokens: int = 128, cpus: str | None = None
) -> dict[str, Any]:
    """GuideLLM's benchmark (its JSON report's first benchmark): `streams` concurrent streams for `seconds`.
    Its backend's check of the server (GET /health) is off: the ground-truth servers have no such path."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "guidellm.json"
        command = [
            str(GUIDELLM), "run",
            "--backend", f"kind=openai_http,target={base},model={MODEL},request_format=/v1/completions,"
            "validate_backend=false",
            "--profile", f"kind=concurrent,streams={streams}",
            "--constraint", f"kind=max_duration,seconds={seconds}",
            "--data", f"kind=synthetic_text,prompt_tokens={input_tokens},output_tokens={max_tokens}",
            "--tokenizer", f"kind=huggingface_auto,model={tokenizer_dir()}",
            "--output", f"kind=json,path={out}", "--disable-console",
        ]  # fmt: skip
        if cpus:
            command = ["taskset", "-c", cpus, *command]
        subprocess.run(
            command,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        return json.loads(out.read_text())["benchmarks"][0]


def guidellm_interval(benchmark: dict[str, Any]) -> tuple[float, float]:
    """Wall-clock interval of GuideLLM's successful requests: the first send to the last answer."""
    done = benchmark["requests"]["successful"]
    return min(r["request_start_time"] for r in done), max(r["request_end_time"] for r in done)
