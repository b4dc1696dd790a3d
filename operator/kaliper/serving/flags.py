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
    if spec.batching:
        flags += [
            "--max-batch-size",
            str(spec.batching.max_batch_size),
            "--max-queue-delay",
            spec.batching.max_queue_delay,
        ]
    for provider in spec.runtime.execution_providers or []:
        flags += ["--provider", provider]
    return flags
