from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.manifests.modeldeployment import BuildError
from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"url": "https://models.example/m.bin"},
    runtime={
        "type": "custom",
        "image": "registry.example/srv:1",
        "command": ["serve"],
        "args": ["--port", "7000"],
        "port": 7000,
    },
)


def test_the_pod_runs_the_image_with_the_command_and_args_given() -> None:
    assert pod_container(SPEC) == {"image": "registry.example/srv:1", "command": ["serve"], "args": ["--port", "7000"]}
    entrypoint = deployment(
        model={"url": "https://m.example/m"}, runtime={"type": "custom", "image": "srv:1", "port": 7000}
    )
    assert pod_container(entrypoint) == {"image": "srv:1"}


def test_a_local_replica_runs_the_command_and_args_given(tmp_path: Path) -> None:
    assert local_argv(SPEC, tmp_path) == ["serve", "--port", "7000"]


def test_without_an_image_it_cannot_run_on_kubernetes() -> None:
    local_only = deployment(
        model={"url": "https://m.example/m"}, runtime={"type": "custom", "command": ["serve"], "port": 7000}
    )
    with pytest.raises(BuildError) as error:
        pod_container(local_only)
    assert str(error.value) == "a custom runtime on Kubernetes needs spec.runtime.image"
