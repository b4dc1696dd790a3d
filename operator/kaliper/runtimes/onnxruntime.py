"""Kaliper's built-in ONNX Runtime server (kaliper.serving): the Open Inference Protocol over REST and gRPC,
from Kaliper's own image on Kubernetes and as `python -m kaliper.serving` on this machine."""

from __future__ import annotations

import sys

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.runtimes.base import Launch, Runtime, ServerCommand


def tuning_flags(spec: ModelDeploymentSpec) -> list[str]:
    """The server's flags for a deployment's threads, batching and execution providers."""
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


class OnnxRuntime(Runtime):
    type = "onnxruntime"
    display_name = "Kaliper's ONNX Runtime server"
    in_kaliper_image = True
    grpc_port = 8081
    serves_grpc_locally = True
    replicas_share_port = True
    onnx_session_threads = True
    metrics_path = "/metrics"  # its requests, queue, inference and batch histograms
    latency_histogram = "kaliper_server_request_seconds"

    def server_command(self, launch: Launch) -> ServerCommand:
        spec = launch.spec
        # In Kaliper's image `python` is the one with Kaliper; here, the interpreter running Kaliper.
        python = "python" if launch.place == "pod" else sys.executable
        program = [python, "-m", "kaliper.serving"]
        args = ["--model", launch.model_path, "--name", launch.served_name, "--host", launch.host]
        args += ["--port", str(launch.port)]
        if launch.grpc_port is not None:
            args += ["--grpc-port", str(launch.grpc_port)]
        args += tuning_flags(spec)
        if launch.place == "local" and spec.replicas > 1:
            args.append("--reuse-port")  # the replicas share the port; the kernel spreads connections
        return ServerCommand(program, args)


RUNTIME = OnnxRuntime()
