"""llama.cpp's llama-server, the real OpenAI-compatible streaming server of the LLM tests, serving the tiny
random-weight model made here (kaliper.serving.tiny_llm). The binary comes from hack/llama/build.sh (built
from the llama-cpp-python sdist, cached by version); the first test that needs it builds it (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from kaliper.netutil import free_port
from kaliper.serving.tiny_llm import make_tiny_llm
from tests.support.builds import run_build
from tests.support.groundtruth import wait_http
from tests.support.paths import REPO

MODEL_NAME = "tiny"
# llama-server's ChatML template around a user message adds 16 tokens with the tiny model's tokenizer (measured
# with the server's own usage for one-word and two-word messages: 17 and 18 prompt tokens).
CHAT_TEMPLATE_TOKENS = 16


@cache
def llama_server_binary() -> Path:
    """The cached binary (built now if it is not: about 5 minutes on two cores)."""
    built = run_build(
        ["bash", str(REPO / "hack" / "llama" / "build.sh")],
        env={**os.environ, "PYTHON": sys.executable},  # its pip fetches the source
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(built.stdout.strip().splitlines()[-1])


def tiny_model(directory: Path) -> Path:
    return make_tiny_llm(directory, name=MODEL_NAME)


@contextmanager
def llama_server(model: Path, slots: int = 4, threads: int = 1, context: int = 4096) -> Iterator[str]:
    """Serve `model` on loopback; yields the base URL."""
    port = free_port()
    command = [
        str(llama_server_binary()),
        *("-m", str(model), "--alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port)),
        *("-np", str(slots), "-c", str(context * slots), "-t", str(threads), "--metrics", "--no-ui"),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/health")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def server_counters(base: str) -> dict[str, float]:
    """The server's own `llamacpp:` counters and gauges from /metrics."""
    text = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
    found = re.findall(r"^llamacpp:(\w+) ([0-9.e+-]+)$", text, re.MULTILINE)
    return {name: float(value) for name, value in found}


def chat_request(max_tokens: int) -> dict:
    """request: streamed chat completions of exactly max_tokens tokens (the tiny model never stops itself)."""
    generation = {"maxTokens": max_tokens, "ignoreEos": True}
    return {"protocol": "openai-chat", "modelName": MODEL_NAME, "generation": generation}


def synthetic_payload(tokenizer: dict, input_tokens: int, count: int, **prompts: object) -> dict:
    """payload: `count` synthetic prompts of exactly `input_tokens` tokens, made with `tokenizer` (a file or
    a ConfigMap reference)."""
    synthetic = {"inputTokens": {"mean": input_tokens}, "count": count}
    return {"prompts": {"synthetic": synthetic, "tokenizer": tokenizer, **prompts}}


def local_sweep(model: Path, name: str, context: int, **spec: object) -> list[dict]:
    """A llama.cpp ModelDeployment of `model` (the tiny model's tokenizer beside it) and a ProfileRun `name` of it
    for `kaliper run`: one user, 16-token prompts, 8-token answers, a 2 s stage each trial, its report in JSON;
    `spec` adds (or replaces) sections such as sweep and quality."""
    deployment = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "tiny"},
        "spec": {"model": {"file": str(model)}, "runtime": {"type": "llamacpp"}, "llm": {"contextSize": context}},
    }
    short = {"warmup": "1s", "minDuration": "2s", "maxDuration": "2s", "stopping": {"window": "1s"}}
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": name},
        "spec": {
            "target": {"deploymentRef": {"name": "tiny"}},
            "request": chat_request(8),
            "payload": synthetic_payload({"file": str(model.parent / "tokenizer.json")}, 16, 32),
            "load": {"closedLoop": {"concurrency": 1}, **short},
            "report": {"formats": ["json"]},
            **spec,
        },
    }
    return [deployment, run]


# Prompts whose greedy answers q4_0 of the demo model changes from the first token on, and q8_0 does not
# (tests/llm/test_quality_run.py, tests/kind/test_fit_and_quality.py).
QUALITY_PROMPTS = [f"Tell me about item {i} and the river." for i in range(20)]


def quantized(original: Path, kind: str) -> Path:
    """`original` quantized by llama.cpp's llama-quantize (built with llama-server) to `kind` (q8_0, q4_0...),
    beside it as KIND.gguf."""
    target = original.with_name(f"{kind}.gguf")
    quantize = llama_server_binary().with_name("llama-quantize")
    subprocess.run([str(quantize), str(original), str(target), kind, "1"], check=True, capture_output=True)
    return target


# The tiny model's header (tiny_model): 2,048 tokens x 64 for the embeddings and the output, 64 for the output
# norm, and per layer two norms of 64, four 64 x 64 attention weights and three 64 x 256 feed-forward ones, f32.
TINY_SHAPE = {
    "weightsBytes": 4 * (2 * 2048 * 64 + 64 + 2 * (2 * 64 + 4 * 64 * 64 + 3 * 64 * 256)),  # 1,574,144
    "layers": 2,
    "embedding": 64,
    "feedForward": 256,
    "heads": 4,
    "keyWidth": 64,
    "valueWidth": 64,
    "trainedContext": 4096,
    "elementBytes": 4,
}
