from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.local.servers import ServerError
from kaliper.manifests.modeldeployment import BuildError
from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"pvc": {"claimName": "models", "path": "repo/densenet"}, "name": "densenet"}, runtime={"type": "triton"}
)


def test_the_pod_loads_only_its_model_directory_from_the_folder_holding_it() -> None:
    assert pod_container(SPEC) == {
        "image": "nvcr.io/nvidia/tritonserver:24.10-py3",
        "command": ["tritonserver"],
        "args": [
            "--model-repository=/models/source/repo",
            "--http-port=8000",
            "--grpc-port=8001",
            "--model-control-mode=explicit",
            "--load-model=densenet",
        ],
    }


def test_a_model_named_unlike_its_directory_is_refused() -> None:
    renamed = SPEC.model_copy(update={"model": SPEC.model.model_copy(update={"name": "other"})})
    with pytest.raises(BuildError) as error:
        pod_container(renamed)
    assert str(error.value) == (
        "spec.model.name: Triton serves the model under its directory's name, 'densenet'; set model.name to "
        "'densenet' (or rename the directory)"
    )


def test_kaliper_run_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(ServerError) as error:
        local_argv(SPEC, tmp_path)
    assert str(error.value) == (
        "runtime.type triton runs from its upstream image on Kubernetes; `kaliper run` cannot start it. Use "
        "onnxruntime, mlserver, llamacpp or a custom command locally"
    )
