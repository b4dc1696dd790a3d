"""The built-in server's command-line flags for a deployment's tuning, shared by the local runtime and the
Kubernetes builders (so both start the same server the same way)."""

from __future__ import annotations

from kaliper.api.modeldeployment import ModelDeploymentSpec


def tuning_flags(spec: ModelDeploymentSpec) -> list[str]:
    flags: list[str] = []
    if spec.threads and spec.threads.intra_op:
        flags += ["--intra-op", str(spec.threads.intra_op)]
    if spec.threads and spec.threads.inter_op:
        flags += ["--inter-op", str(spec.threads.inter_op)]
    if spec.threads and spec.threads.workers and spec.threads.workers > 1:
        flags += ["--workers", str(spec.threads.workers)]
    if spec.batching:
        flags += [
            "--max-batch-size",
            str(spec.batching.max_batch_size),
            "--max-queue-delay",
            spec.batching.max_queue_delay,
        ]
    providers = list(spec.runtime.execution_providers or [])
    if wants_gpu(spec):
        # A GPU held but unused is the costliest mistake a profile can make: ask for CUDA when no provider is
        # named, and have the server refuse to start unless a GPU provider is in use.
        providers = providers or ["CUDAExecutionProvider", "CPUExecutionProvider"]
        flags.append("--require-gpu")
    for provider in providers:
        flags += ["--provider", provider]
    return flags


def wants_gpu(spec: ModelDeploymentSpec) -> bool:
    gpu = spec.resources.gpu if spec.resources else None
    return bool(gpu and gpu.count)
