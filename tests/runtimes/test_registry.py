"""Every RuntimeType the API accepts has its module, and each module has its test file here."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from kaliper.api.modeldeployment import RuntimeType
from kaliper.runtimes import RUNTIMES

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent.parent / "operator" / "kaliper" / "runtimes"


def test_every_runtime_type_has_a_module_and_a_test_file() -> None:
    names = sorted(get_args(RuntimeType))
    assert names == ["custom", "llamacpp", "mlserver", "onnxruntime", "sglang", "tgi", "triton", "vllm"]
    assert sorted(RUNTIMES) == names
    assert sorted(name for name in names if not (PACKAGE / f"{name}.py").is_file()) == []
    assert sorted(name for name in names if not (HERE / f"test_{name}.py").is_file()) == []
    assert [RUNTIMES[name].type for name in names] == names
