"""NVIDIA Triton Inference Server, from its upstream image on Kubernetes only. It serves a model directory
(config.pbtxt and version folders) under the directory's name and batches as that config.pbtxt says."""

from __future__ import annotations

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.runtimes.base import BuildError, Launch, Runtime, ServerCommand


def model_directory(spec: ModelDeploymentSpec, model_path: str, name: str) -> tuple[str, str]:
    """(repository, model directory name): the source names one model's directory, the repository is the
    folder holding it, and only this model is loaded from it (a PVC may hold others)."""
    source = spec.model
    if source.pvc is None and source.image is None:
        raise BuildError(
            "spec.model: Triton serves a model directory (config.pbtxt and version folders such as 1/model.onnx); "
            "give it as model.pvc or model.image, whose path names that directory"
        )
    repository, _, directory = model_path.rstrip("/").rpartition("/")
    if not directory:
        raise BuildError("spec.model: the path must name the model's directory inside the volume or image, not /")
    if (source.name or name) != directory:
        raise BuildError(
            f"spec.model.name: Triton serves the model under its directory's name, {directory!r}; set model.name "
            f"to {directory!r} (or rename the directory)"
        )
    return repository, directory


class Triton(Runtime):
    type = "triton"
    display_name = "Triton"
    image = "nvcr.io/nvidia/tritonserver:24.10-py3"
    http_port = 8000
    grpc_port = 8001

    def server_command(self, launch: Launch) -> ServerCommand:
        repository, directory = model_directory(launch.spec, launch.model_path, launch.served_name)
        args = [
            f"--model-repository={repository}",
            f"--http-port={launch.port}",
            f"--grpc-port={launch.grpc_port}",
            "--model-control-mode=explicit",
            f"--load-model={directory}",
        ]
        return ServerCommand(["tritonserver"], args)

    def local_problem(self, spec: ModelDeploymentSpec) -> str | None:
        return (
            "runtime.type triton runs from its upstream image on Kubernetes; `kaliper run` cannot start it. Use "
            "onnxruntime, mlserver, llamacpp or a custom command locally"
        )


RUNTIME = Triton()
