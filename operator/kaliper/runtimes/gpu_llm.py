"""What the servers of generative models on GPUs (vLLM, SGLang, TGI) share: their upstream images on
Kubernetes only, a model directory from a PVC or an image, tensor parallelism over the replica's GPUs, and
their settings passed as options in each server's own names (its module lists them)."""

from __future__ import annotations

from kaliper.api.modeldeployment import LlmServing, ModelDeploymentSpec, ModelDeploymentTemplate
from kaliper.runtimes.base import BuildError, Launch, Runtime, ServerCommand

HEALTH_PATH = "/health"
# (option, value) per setting; None: not set, the server's default applies.
Options = list[tuple[str, object]]


def gpu_count(spec: ModelDeploymentTemplate) -> int:
    gpu = spec.resources.gpu if spec.resources else None
    return gpu.count if gpu else 0


def render(options: Options) -> list[str]:
    args: list[str] = []
    for option, value in options:
        if value is not None:
            args += [option, f"{value:g}" if isinstance(value, float) else str(value)]
    return args


class GpuLlmServer(Runtime):
    generative = True
    metrics_path = "/metrics"

    def health_path(self, spec: ModelDeploymentTemplate) -> str:
        return HEALTH_PATH

    def parallelism(self, spec: ModelDeploymentTemplate) -> tuple[int, int]:
        """(tensor-parallel size, copies over the remaining GPUs); BuildError when the tensor-parallel size
        does not divide the GPUs (a sweep's GPU counts are checked here, after the spec)."""
        gpus = gpu_count(spec)
        if gpus < 1:
            raise BuildError(
                f"spec: {self.type} serves on GPUs: set resources.gpu.count (at least 1), or serve a GGUF model on "
                "CPUs with runtime.type llamacpp"
            )
        tensor = spec.llm.tensor_parallel if spec.llm and spec.llm.tensor_parallel else gpus
        if gpus % tensor:
            raise BuildError(
                f"spec: llm.tensorParallel {tensor} does not divide resources.gpu.count {gpus}: pick a divisor of "
                "the GPU count (the model is split across tensorParallel GPUs and copied over the rest)"
            )
        return tensor, gpus // tensor

    def cluster_problem(self, spec: ModelDeploymentSpec, name: str) -> str | None:
        if spec.model.pvc is None and spec.model.image is None:
            return (
                f"spec.model: {self.type} loads a model directory (config.json, the weights, the tokenizer); give "
                "it as model.pvc or model.image, whose path names that directory"
            )
        try:
            self.parallelism(spec)
        except BuildError as problem:
            return str(problem)
        return None

    def local_problem(self, spec: ModelDeploymentSpec) -> str | None:
        return (
            f"runtime.type {self.type} runs from its upstream GPU image on Kubernetes; `kaliper run` starts servers "
            "as local processes and cannot run it. Apply the manifests to a cluster with GPUs, or serve a GGUF "
            "model with runtime.type llamacpp locally"
        )

    def server_command(self, launch: Launch) -> ServerCommand:
        tensor, copies = self.parallelism(launch.spec)
        program, args, options = self.command_line(launch, tensor, copies, launch.spec.llm or LlmServing())
        # The model is on a volume: never reach for a model hub.
        return ServerCommand(program, [*args, *render(options)], env={"HF_HUB_OFFLINE": "1"})

    def command_line(
        self, launch: Launch, tensor: int, copies: int, llm: LlmServing
    ) -> tuple[list[str], list[str], Options]:
        """(program, the model and address arguments, the settings as options)."""
        raise NotImplementedError

    def with_context_size(self, spec: ModelDeploymentTemplate, size: int) -> ModelDeploymentTemplate:
        # To these servers a context is one sequence's longest length, prompt and output.
        llm = (spec.llm or LlmServing()).model_copy(update={"max_model_length": size})
        return spec.model_copy(update={"llm": llm})

    def with_batch_size(self, spec: ModelDeploymentTemplate, size: int) -> ModelDeploymentTemplate:
        # To a GPU server a batch is prompt tokens scheduled in one step.
        llm = (spec.llm or LlmServing()).model_copy(update={"max_batched_tokens": size})
        return spec.model_copy(update={"llm": llm})
