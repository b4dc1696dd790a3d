from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.local.servers import ServerError
from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"image": {"image": "registry.example/qwen:1", "path": "/qwen"}, "name": "qwen"},
    runtime={"type": "sglang"},
    resources={"gpu": {"count": 2}},
    llm={"slots": 32, "maxBatchedTokens": 4096, "tensorParallel": 1, "quantization": "fp8"},
)


def test_the_pod_runs_sglang_from_its_image_with_a_copy_per_gpu() -> None:
    assert pod_container(SPEC) == {
        "image": "docker.io/lmsysorg/sglang:v0.5.4",
        "command": ["python3", "-m", "sglang.launch_server"],
        "args": [
            *("--model-path", "/models/source/qwen", "--served-model-name", "qwen", "--host", "0.0.0.0"),
            *("--port", "30000", "--enable-metrics", "--tp-size", "1", "--dp-size", "2"),
            *("--max-running-requests", "32", "--max-prefill-tokens", "4096", "--quantization", "fp8"),
        ],
        "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
    }


def test_kaliper_run_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(ServerError) as error:
        local_argv(SPEC, tmp_path)
    assert str(error.value).startswith("runtime.type sglang runs from its upstream GPU image on Kubernetes;")
