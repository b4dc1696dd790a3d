from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.local.servers import ServerError
from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"pvc": {"claimName": "models", "path": "qwen"}, "name": "qwen"},
    runtime={"type": "vllm"},
    resources={"gpu": {"count": 4}},
    llm={"slots": 64, "maxModelLength": 8192, "tensorParallel": 2, "gpuMemoryUtilization": 0.85, "dtype": "bfloat16"},
)


def test_the_pod_runs_vllm_from_its_image_split_over_the_gpus() -> None:
    assert pod_container(SPEC) == {
        "image": "docker.io/vllm/vllm-openai:v0.11.0",
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": [
            *("--model", "/models/source/qwen", "--served-model-name", "qwen", "--host", "0.0.0.0", "--port", "8000"),
            *("--tensor-parallel-size", "2", "--pipeline-parallel-size", "2", "--max-num-seqs", "64"),
            *("--max-model-len", "8192", "--gpu-memory-utilization", "0.85", "--dtype", "bfloat16"),
        ],
        "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
    }


def test_kaliper_run_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(ServerError) as error:
        local_argv(SPEC, tmp_path)
    assert str(error.value) == (
        "runtime.type vllm runs from its upstream GPU image on Kubernetes; `kaliper run` starts servers as local "
        "processes and cannot run it. Apply the manifests to a cluster with GPUs, or serve a GGUF model with "
        "runtime.type llamacpp locally"
    )
