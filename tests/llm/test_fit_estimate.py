"""The fit check's arithmetic against llama.cpp's own: the model's shape read from GGUF headers made here, and
the KV cache and compute buffer the estimate gives for a command line against the sizes the real llama-server
logs when it allocates them (-lv 4). The KV cache is exact; the compute buffer, a model of llama.cpp's CPU
graph, within 3% with flash attention (llama.cpp's choice on CPUs) and at most 8% above without. (What the
whole process then holds at its peak is docs/benchmarks.md's.)"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from kaliper.api.model_shape import ModelShape
from kaliper.runtimes.llamacpp import gguf_shape, memory_need
from kaliper.runtimes.memory import MIB
from kaliper.serving.tiny_llm import demo_shape, make_tiny_llm
from tests.support.llama import TINY_SHAPE, llama_server_binary, tiny_model

LOGGED = {
    "KV cache": re.compile(r"CPU KV buffer size = +([0-9.]+) MiB"),
    "compute": re.compile(r"CPU compute buffer size = +([0-9.]+) MiB"),
}


def logged_buffers(model: Path, args: list[str], log: Path) -> dict[str, float]:
    """The buffers llama-server reports allocating for `model` with `args`, in MiB; it is stopped once it has
    said both (it allocates them before it listens)."""
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(llama_server_binary()), "-m", str(model), "--port", "0", "-t", "1", "-lv", "4", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            found = {name: pattern.search(text) for name, pattern in LOGGED.items()}
            if all(found.values()):
                return {name: float(match.group(1)) for name, match in found.items() if match}
            assert server.poll() is None, f"llama-server exited: {text[-2000:]}"
            time.sleep(0.1)
        raise AssertionError(f"llama-server did not report its buffers in 60 s: {log.read_text()[-2000:]}")
    finally:
        server.kill()
        server.wait()


def test_the_shape_is_read_from_the_gguf_header(tmp_path: Path) -> None:
    assert gguf_shape(str(tiny_model(tmp_path))) == ModelShape.model_validate(TINY_SHAPE)


@pytest.mark.parametrize(
    ("model_shape", "args", "above"),
    [
        ("tiny", ["-c", "2048", "-np", "2"], 0.03),
        ("demo", ["-c", "4000", "-np", "3"], 0.03),
        ("demo", ["--ctx-size", "8192", "--ubatch-size", "128", "-ctk", "q8_0", "-ctv", "q4_0", "-fa", "on"], 0.03),
        # Without flash attention the scores of every head dominate; what else the graph holds beside them is
        # counted whole, where llama.cpp's allocator reuses some of it: the estimate errs high.
        ("tiny", ["-np", "1", "-fa", "off", "-ctk", "f32", "-ctv", "f32"], 0.08),
        ("demo", ["-c", "4096", "-fa", "off"], 0.08),
    ],
)
def test_the_kv_cache_and_compute_buffer_are_llama_cpps_own(
    tmp_path: Path, model_shape: str, args: list[str], above: float
) -> None:
    model = make_tiny_llm(tmp_path, demo_shape() if model_shape == "demo" else None)
    need = memory_need(args, gguf_shape(str(model)))
    assert need is not None
    estimated = {part.name: part.bytes / MIB for part in need.parts}
    logged = logged_buffers(model, args, tmp_path / "server.log")
    assert round(estimated["KV cache"], 2) == logged["KV cache"]
    assert -0.03 * logged["compute"] <= estimated["compute"] - logged["compute"] <= above * logged["compute"]
