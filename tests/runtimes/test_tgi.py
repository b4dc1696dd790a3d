from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.local.servers import ServerError
from kaliper.manifests.modeldeployment import BuildError
from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"pvc": {"claimName": "models", "path": "qwen"}},
    runtime={"type": "tgi"},
    resources={"gpu": {"count": 2}},
    llm={"slots": 16, "maxModelLength": 4096, "dtype": "auto", "quantization": "awq"},
)


def test_the_pod_runs_tgi_from_its_image_sharded_over_every_gpu() -> None:
    assert pod_container(SPEC, name="qwen") == {
        "image": "ghcr.io/huggingface/text-generation-inference:3.3.6",
        "command": ["text-generation-launcher"],
        "args": [
            *("--model-id", "/models/source/qwen", "--hostname", "0.0.0.0", "--port", "8080", "--num-shard", "2"),
            *("--max-concurrent-requests", "16", "--max-total-tokens", "4096", "--quantize", "awq"),
        ],
        "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
    }


def test_tensor_parallelism_below_every_gpu_is_refused() -> None:
    split = SPEC.model_copy(update={"llm": SPEC.llm.model_copy(update={"tensor_parallel": 1})})
    with pytest.raises(BuildError) as error:
        pod_container(split)
    assert str(error.value) == (
        "spec: tgi shards the model over every GPU of the replica (2); remove llm.tensorParallel or set it to 2"
    )


def test_kaliper_run_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(ServerError) as error:
        local_argv(SPEC, tmp_path)
    assert str(error.value).startswith("runtime.type tgi runs from its upstream GPU image on Kubernetes;")
