"""A sweep over the serving runtime's own flags (sweep.engineArgs) under `kaliper run` with llama.cpp's real
llama-server: each named set of flags reaches its configuration's server (an 8-bit KV cache with flash attention
serves; a cache type llama-server does not know is refused by the server itself, and the trial says so in the
server's words); a flag llama-server does not have, or one Kaliper sets from a field, is refused before any
trial starts, naming it. And the flags Kaliper knows are the pinned llama-server's own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kaliper.runtimes.llamacpp import LLAMA_SERVER_FLAGS
from tests.support.llama import llama_server_binary, local_sweep, tiny_model
from tests.support.local_run import run_manifests
from tests.support.paths import KALIPER
from tests.support.runtimes import help_flags


def manifests(model: Path, engine_args: list[dict], memory: list[str] | None = None) -> list[dict]:
    return local_sweep(
        model, "engine-args", 2048, sweep={"engineArgs": engine_args, **({"memory": memory} if memory else {})}
    )


def test_each_set_of_flags_reaches_its_configurations_server(tmp_path: Path) -> None:
    """A 32-bit KV cache serves. An 8-bit one is a flag llama-server has, which this model cannot take (its heads
    are 16 wide, q8_0's blocks 32): the server refuses it when it loads the model, and the trial says so, and
    that the fit estimate had passed it. A cache type llama-server does not know it refuses while reading its
    arguments. Under 32Mi neither known cache fits by the estimate (its arithmetic from the model's GGUF header
    and the command line): both are left out, never started."""
    model = tiny_model(tmp_path / "model")
    sets = [
        {"name": "kv-f32", "args": ["--cache-type-k", "f32", "--cache-type-v", "f32", "--flash-attn", "off"]},
        {"name": "kv-q8", "args": ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--flash-attn", "on"]},
        {"name": "kv-bogus", "args": ["--cache-type-k", "bogus"]},
    ]
    report, _ = run_manifests(tmp_path, manifests(model, sets, ["32Mi", "128Mi"]))
    assert [(t.parameters, t.status) for t in report.trials] == [
        ({"memory": "32Mi", "engine_args": "kv-f32", "concurrency": "1"}, "Skipped"),
        ({"memory": "32Mi", "engine_args": "kv-q8", "concurrency": "1"}, "Skipped"),
        ({"memory": "32Mi", "engine_args": "kv-bogus", "concurrency": "1"}, "Failed"),
        ({"memory": "128Mi", "engine_args": "kv-f32", "concurrency": "1"}, "Succeeded"),
        ({"memory": "128Mi", "engine_args": "kv-q8", "concurrency": "1"}, "Failed"),
        ({"memory": "128Mi", "engine_args": "kv-bogus", "concurrency": "1"}, "Failed"),
    ]
    f32, q8_small, bogus = report.trials[:3]
    q8 = report.trials[4]
    # 2,048 cells x 2 layers x (64 + 64) elements x 4 bytes (f32) or 34/32 (q8_0); a batch of 512 tokens: the
    # activations (4 x (3 x 256 + 4 x 64) bytes a token) and the mask over the context, 2 bytes a cell with
    # flash attention, 4 without, and every head's scores (4 heads x 4 bytes); a quarter of the limit for the
    # prompt cache; the process.
    assert f32.message == (
        "cannot fit resources.limits.memory 32 MiB: the server needs 58 MiB (weights 1.5 MiB + KV cache 2.0 MiB "
        "(2,048 cells x 2 layers at f32) + compute 22 MiB (batches of 512 tokens) + prompt cache 8.0 MiB "
        "(--cache-ram) + llama-server 24 MiB), 26 MiB more; raise the limit, or lower the context, the slots or "
        "the KV cache's type"
    )
    assert q8_small.message == (
        "cannot fit resources.limits.memory 32 MiB: the server needs 38 MiB (weights 1.5 MiB + KV cache 0.5 MiB "
        "(2,048 cells x 2 layers at q8_0) + compute 4.0 MiB (batches of 512 tokens) + prompt cache 8.0 MiB "
        "(--cache-ram) + llama-server 24 MiB), 6.0 MiB more; raise the limit, or lower the context, the slots or "
        "the KV cache's type"
    )
    assert not (tmp_path / "reports" / "t0").exists()  # never started
    assert not (tmp_path / "reports" / "t1").exists()
    assert "K cache type q8_0 with block size 32 does not divide n_embd_head_k=16" in (q8.server_log_tail or "")
    assert q8.message.endswith(
        "llama_server: exiting due to model loading error (it fits by the estimate, 62 MiB of 128 MiB: the "
        "server refused it anyway)"
    )
    assert bogus.message == (
        'server replica 0 exited with code 1: error while handling argument "--cache-type-k": Unsupported cache '
        "type: bogus"
    )  # a cache type llama-server does not know: no estimate
    rows = {(r.parameters["memory"], r.parameters["engine_args"]): r.reason for r in report.configurations}
    assert rows[("32Mi", "kv-f32")] == "skipped: " + f32.message
    assert rows[("128Mi", "kv-q8")] == "failed: " + q8.message


def test_a_flag_llama_server_lacks_or_one_kaliper_sets_is_refused_before_any_trial(tmp_path: Path) -> None:
    model = tiny_model(tmp_path / "model")
    for flags, said in (
        (
            ["--cache-typ-k", "q8_0"],
            "--cache-typ-k is not a flag of llama.cpp as Kaliper runs it (llama-server from llama-cpp-python",
        ),
        (["--parallel", "8"], "--parallel is set by Kaliper from llm.slots; set (or sweep) that instead"),
    ):
        path = tmp_path / "run.yaml"
        path.write_text("\n---\n".join(json.dumps(m) for m in manifests(model, [{"name": "x", "args": flags}])))
        process = subprocess.run(
            [str(KALIPER), "run", str(path), "--output-dir", str(tmp_path / "reports")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert process.returncode == 1
        assert f"configuration engine_args=x: runtime.args: {said}" in process.stderr
        assert not (tmp_path / "reports" / "t0").exists()  # no server started


def test_the_flags_kaliper_knows_are_the_pinned_llama_servers_own() -> None:
    assert help_flags([str(llama_server_binary()), "--help"]) == LLAMA_SERVER_FLAGS
