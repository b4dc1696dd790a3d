"""How long each runtime's server takes from its process's start to ready on this machine, as `kaliper run`
reports it in every trial (TrialReport.startup), against an observer that polls the same readiness URL every
10 ms from the instant before the processes are started.

Each runtime serves its smallest model the way `kaliper run` serves it (kaliper.local.servers.ServerGroup,
under a 2-core limit): the built-in ONNX Runtime server with the iris classifier, llama.cpp's llama-server
with the demo GGUF (kaliper.serving.tiny_llm), vLLM's CPU build with kaliper.serving.hf_llm's chat model.
Started REPEATS times each, one at a time.

    sudo .venv/bin/python bench/startup.py   # about 2 minutes (vLLM's starts are most of it)
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx
from _llm import CACHE
from tests.support.llama import llama_server_binary
from tests.support.vllm import vllm_installed

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.servers import ServerGroup
from kaliper.netutil import free_port
from kaliper.runtimes import readiness_path
from kaliper.serving.examples import make_iris
from kaliper.serving.hf_llm import make_hf_chat_model
from kaliper.serving.tiny_llm import demo_shape, make_tiny_llm

REPEATS = 3
LIMITS = {"limits": {"cpu": "2", "memory": "6Gi"}}


def models() -> list[tuple[str, dict, Path]]:
    iris = CACHE / "startup" / "iris.onnx"
    if not iris.exists():
        iris.parent.mkdir(parents=True, exist_ok=True)
        make_iris(iris)
    gguf = CACHE / "tiny-llm-demo-shape" / "tiny.gguf"
    if not gguf.exists():
        make_tiny_llm(gguf.parent, demo_shape(), name="tiny")
    llama_server_binary()  # built if it is not
    hf = CACHE / "hf-chat-model"
    if not (hf / "config.json").exists():
        make_hf_chat_model(hf)
    os.environ["KALIPER_VLLM"] = str(vllm_installed())
    return [
        ("onnxruntime (built-in)", {"runtime": {"type": "onnxruntime"}}, iris),
        ("llamacpp", {"runtime": {"type": "llamacpp"}, "llm": {"contextSize": 2048}}, gguf),
        ("vllm (CPU)", {"runtime": {"type": "vllm"}}, hf),
    ]


def observed_ready(url: str, since: float, done: threading.Event, found: list[float]) -> None:
    with httpx.Client(timeout=1.0, trust_env=False) as client:
        while not done.is_set():
            try:
                if client.get(url).status_code == 200:
                    found.append(time.monotonic() - since)
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.01)


def start_once(spec: ModelDeploymentSpec, model: Path, workdir: Path) -> tuple[float, float]:
    """(Kaliper's figure, the observer's) for one start."""
    port = free_port()
    servers = ServerGroup(spec, model, "model", port, workdir)
    url = f"http://127.0.0.1:{port}{readiness_path(spec)}"
    found: list[float] = []
    done = threading.Event()
    since = time.monotonic()
    observer = threading.Thread(target=observed_ready, args=(url, since, done, found), daemon=True)
    observer.start()
    try:
        servers.start()
        kaliper = servers.wait_ready(600)
        observer.join(5)  # it sees the same server ready within a poll
    finally:
        done.set()
        observer.join(5)
        servers.stop()
    return kaliper, found[0]


def main() -> None:
    rows = []
    for name, serving, model in models():
        spec = ModelDeploymentSpec.model_validate({"model": {"file": str(model)}, "resources": LIMITS, **serving})
        figures = [start_once(spec, model, CACHE / "startup" / name.split()[0]) for _ in range(REPEATS)]
        kaliper = statistics.median(f[0] for f in figures)
        observer = statistics.median(f[1] for f in figures)
        rows.append((name, kaliper, observer, [round(f[0], 2) for f in figures]))
        print(f"{name}: kaliper {kaliper:.2f} s, observer {observer:.2f} s", file=sys.stderr)
    print("| runtime | ready (Kaliper, median of 3) | observer polling every 10 ms | ratio | each start |")
    print("|---|---|---|---|---|")
    for name, kaliper, observer, each in rows:
        print(f"| {name} | {kaliper:.2f} s | {observer:.2f} s | {kaliper / observer:.3f} | {each} |")


if __name__ == "__main__":
    main()
