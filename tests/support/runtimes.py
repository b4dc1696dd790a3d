"""A runtime's command line on both paths, as the tests in tests/runtimes read it: the serving container of
the Deployment the builders make, and the argv of a local replica."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.servers import server_command
from kaliper.manifests.modeldeployment import build_deployment


def deployment(**fields: Any) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate(fields)


def pod_container(spec: ModelDeploymentSpec, name: str = "m") -> dict[str, Any]:
    """The serving container's command, args and env (the keys it has)."""
    container = build_deployment(name, "ml", "uid", spec, "kaliper:test")["spec"]["template"]["spec"]["containers"][0]
    return {k: container[k] for k in ("image", "command", "args", "env") if k in container}


def local_argv(spec: ModelDeploymentSpec, workdir: Path, grpc_port: int | None = None) -> list[str]:
    return server_command(spec, Path("/models/m.file"), "m", 9000, workdir, grpc_port).argv()
