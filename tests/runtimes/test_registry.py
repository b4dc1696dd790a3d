"""Every RuntimeType the API accepts has its module, and each module has its test file here."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from kaliper.api.modeldeployment import GPU_LLM_RUNTIMES, GPU_ONLY_RUNTIMES, LLM_RUNTIMES, RuntimeType
from kaliper.runtimes import RUNTIMES
from kaliper.runtimes.gpu_llm import GpuLlmServer

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent.parent / "operator" / "kaliper" / "runtimes"


def test_every_runtime_type_has_a_module_and_a_test_file() -> None:
    names = sorted(get_args(RuntimeType))
    assert names == ["custom", "llamacpp", "mlserver", "onnxruntime", "sglang", "tgi", "triton", "vllm"]
    assert sorted(RUNTIMES) == names
    assert sorted(name for name in names if not (PACKAGE / f"{name}.py").is_file()) == []
    assert sorted(name for name in names if not (HERE / f"test_{name}.py").is_file()) == []
    assert [RUNTIMES[name].type for name in names] == names


def test_the_apis_runtime_families_are_what_the_runtimes_say_of_themselves() -> None:
    """The API's lists (its CRD rules are written from them) against the runtimes' own facts."""
    generative = sorted(name for name, runtime in RUNTIMES.items() if runtime.generative)
    gpu_servers = sorted(name for name, runtime in RUNTIMES.items() if isinstance(runtime, GpuLlmServer))
    assert generative == sorted(LLM_RUNTIMES) == ["llamacpp", "sglang", "tgi", "vllm"]
    assert gpu_servers == sorted(GPU_LLM_RUNTIMES) == ["sglang", "tgi", "vllm"]
    assert set(GPU_ONLY_RUNTIMES) < set(GPU_LLM_RUNTIMES)
