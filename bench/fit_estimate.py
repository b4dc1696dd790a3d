"""The fit check's estimate of llama-server's memory against the peak it reaches on this machine.

For each model (kaliper.serving.tiny_llm's demo and benchmark shapes, f32 GGUF files made once under the
cache) and command line, llama-server runs alone in a fresh memory cgroup (v1 or v2, no limit), page cache
dropped first so that the model's pages are charged to it; every slot is then given a prompt that fills its
share of the context (token ids, no prompt cache) and asked for 32 tokens, all at once, so that the whole
KV cache and the compute buffer are touched. The measured figure is the cgroup's peak (memory.max_usage_in_bytes
or memory.peak); the estimate is kaliper.runtimes.llamacpp.memory_need of the same command line (--cache-ram 0:
the prompt cache that Kaliper sizes to a quarter of the limit fills only over many prompts, and is left out of
both sides).

    sudo .venv/bin/python bench/fit_estimate.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _llm import CACHE
from tests.support.groundtruth import wait_http
from tests.support.llama import llama_server_binary

from kaliper.local.cgroups import Cgroup, Limits
from kaliper.netutil import free_port
from kaliper.runtimes.llamacpp import gguf_shape, memory_need
from kaliper.runtimes.memory import MIB
from kaliper.serving.tiny_llm import benchmark_shape, demo_shape, make_tiny_llm

REPEATS = 3
CONFIGURATIONS = [
    ("demo", ["-c", "2048", "-np", "1"]),
    ("demo", ["-c", "16384", "-np", "4"]),
    ("demo", ["-c", "16384", "-np", "4", "-ctk", "q8_0", "-ctv", "q8_0"]),
    ("benchmark", ["-c", "4096", "-np", "2"]),
    ("benchmark", ["-c", "16384", "-np", "4"]),
    ("benchmark", ["-c", "4096", "-np", "2", "-fa", "off"]),
]


def model(name: str) -> Path:
    directory = CACHE / f"tiny-llm-{name}-shape"
    gguf = directory / "tiny.gguf"
    if not gguf.exists():
        make_tiny_llm(directory, benchmark_shape() if name == "benchmark" else demo_shape(), name="tiny")
    return gguf


def fill(base: str, prompt_tokens: int, seed: int) -> None:
    """One request whose prompt fills a slot's share of the context."""
    ids = [10 + (seed * 7919 + i * 104729) % 4000 for i in range(prompt_tokens)]
    body = json.dumps({"prompt": ids, "n_predict": 32, "cache_prompt": False, "ignore_eos": True}).encode()
    request = urllib.request.Request(f"{base}/completion", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        answer.read()


def measure(gguf: Path, args: list[str], name: str) -> int:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("1\n")
    group = Cgroup(name, Limits()).create()
    port = free_port()
    command = [str(llama_server_binary()), "-m", str(gguf), "--port", str(port), "-t", "2", "--cache-ram", "0"]
    log = (CACHE / f"{name}.log").open("w")
    server = subprocess.Popen([*command, *args], stdout=log, stderr=log, preexec_fn=group.join_in_child)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/health", timeout=60)
        slots = int(args[args.index("-np") + 1])
        per_slot = int(args[args.index("-c") + 1]) // slots
        with ThreadPoolExecutor(slots) as pool:
            list(pool.map(lambda s: fill(base, per_slot - 48, s), range(slots)))
        return group.sample().memory_peak_bytes
    finally:
        server.kill()
        server.wait()
        group.remove()


def main() -> None:
    rows = []
    for index, (name, args) in enumerate(CONFIGURATIONS):
        gguf = model(name)
        need = memory_need([*args, "--cache-ram", "0"], gguf_shape(str(gguf)))
        assert need is not None
        peaks = sorted(measure(gguf, args, f"fit-bench-{index}-{repeat}") for repeat in range(REPEATS))
        rows.append((name, " ".join(args), need.total, peaks))
        print(f"{name} {' '.join(args)}: estimate {need.words()}; peaks " + ", ".join(f"{p / MIB:.1f}" for p in peaks))
    print()
    print(f"| model | llama-server flags | estimate MiB | peak MiB (median, range of {REPEATS}) | estimate / peak |")
    print("|---|---|---|---|---|")
    for name, flags, estimate, peaks in rows:
        median = statistics.median(peaks)
        spread = f"{peaks[0] / MIB:.1f}-{peaks[-1] / MIB:.1f}"
        print(
            f"| {name} | `{flags}` | {estimate / MIB:.1f} | {median / MIB:.1f} ({spread}) | {estimate / median:.3f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
