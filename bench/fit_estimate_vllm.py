"""The fit check's estimate of a vLLM server's memory (its CPU build) against the peak it reaches on this machine.

kaliper.serving.hf_llm's chat model (a Hugging Face folder, f32 safetensors, made once under the cache) is served
as `kaliper run` serves it, the runtime's own command line and environment (VLLM_CPU_KVCACHE_SPACE from the
memory limit), alone in a fresh memory cgroup with no limit and the page cache dropped first, then asked four
completions once ready. The measured figure is what it then holds resident (anonymous memory and mapped file
pages: what a memory limit must leave it), beside the cgroup's peak, which also counts the page cache of files
it only read; the estimate is kaliper.runtimes.vllm.cpu_memory_need of the same spec.

    sudo .venv/bin/python bench/fit_estimate_vllm.py   # about a minute a row
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from _llm import CACHE
from tests.support.groundtruth import wait_http

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.cgroups import Cgroup, Limits
from kaliper.netutil import free_port
from kaliper.runtimes import RUNTIMES, Launch
from kaliper.runtimes.memory import MIB
from kaliper.runtimes.vllm import hf_shape
from kaliper.serving.hf_llm import make_hf_chat_model

LIMITS = ["5Gi", "6Gi"]  # VLLM_CPU_KVCACHE_SPACE 1 and 2 GiB


def peak_of(folder: Path, spec: ModelDeploymentSpec, name: str) -> tuple[int, int]:
    """What the server holds resident once it has answered (anonymous memory and the file pages it maps: what a
    memory limit must leave it; cgroup v1's memory.stat), and its cgroup's peak, which also counts the page cache
    of the files it read once (torch's libraries), reclaimable under a limit."""
    port = free_port()
    command = RUNTIMES["vllm"].command(Launch(spec, "local", str(folder), "tiny", port, tmpdir="/tmp"))
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("1\n")
    group = Cgroup(name, Limits()).create()
    with (CACHE / f"{name}.log").open("w") as log:
        server = subprocess.Popen(
            [*(command.program or []), *command.args],
            env={**os.environ, **command.env},
            stdout=log,
            stderr=log,
            preexec_fn=group.join_in_child,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/health", timeout=300)  # ready in 25-50 s with --enforce-eager
        for i in range(4):
            body = json.dumps({"model": "tiny", "prompt": f"hello {i}", "max_tokens": 32}).encode()
            request = urllib.request.Request(f"{base}/v1/completions", body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=120) as answer:
                answer.read()
        stat = dict(line.split() for line in (group.dirs["memory"] / "memory.stat").read_text().splitlines())
        resident = int(stat["total_rss"]) + int(stat["total_mapped_file"])
        return resident, group.sample().memory_peak_bytes
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        group.remove()


def main() -> None:
    folder = CACHE / "hf-chat-model"
    if not (folder / "config.json").exists():
        make_hf_chat_model(folder)
    shape = hf_shape(str(folder))
    rows = []
    for index, limit in enumerate(LIMITS):
        spec = ModelDeploymentSpec.model_validate(
            {
                "model": {"file": str(folder)},
                "runtime": {"type": "vllm"},
                "llm": {"maxModelLength": 512, "dtype": "float32"},
                "resources": {"limits": {"memory": limit}},
            }
        )
        need = RUNTIMES["vllm"].memory_need(spec, shape)
        assert need is not None
        resident, peak = peak_of(folder, spec, f"fit-bench-vllm-{index}")
        print(f"limit {limit}: estimate {need.words()}; resident {resident / MIB:.0f} MiB", file=sys.stderr)
        rows.append((limit, need.parts[1].bytes // 2**30, need.total, resident, peak))
    print("| memory limit | KV cache space | estimate MiB | resident MiB | cgroup peak MiB | estimate / resident |")
    print("|---|---|---|---|---|---|")
    for limit, kv, estimate, resident, peak in rows:
        print(
            f"| {limit} | {kv} GiB | {estimate / MIB:.0f} | {resident / MIB:.0f} | {peak / MIB:.0f} "
            f"| {estimate / resident:.3f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
