"""The serving runtimes: one module each, one record in `RUNTIMES` keyed by the API's RuntimeType.

A new runtime is a module here with a `Runtime` subclass, its name in `RuntimeType` (api/modeldeployment.py)
and one test file; the builders in `manifests/`, `kaliper run` and the sweep ask it what they need."""

from __future__ import annotations

from typing import get_args

from kaliper.api.modeldeployment import ModelDeploymentTemplate, RuntimeType
from kaliper.runtimes import custom, llamacpp, mlserver, onnxruntime, sglang, tgi, triton, vllm
from kaliper.runtimes.base import BuildError, Launch, LoadGauges, Runtime, ServerCommand, TokenCounters

RUNTIMES: dict[str, Runtime] = {
    module.RUNTIME.type: module.RUNTIME
    for module in (onnxruntime, mlserver, triton, llamacpp, vllm, sglang, tgi, custom)
}
assert set(RUNTIMES) == set(get_args(RuntimeType)), "every RuntimeType has its module"


def runtime_of(spec: ModelDeploymentTemplate) -> Runtime:
    return RUNTIMES[spec.runtime.type]


def port_of(spec: ModelDeploymentTemplate) -> int:
    """The serving container's HTTP port: the spec's, else the runtime's."""
    return spec.runtime.port or runtime_of(spec).http_port


def grpc_port_of(spec: ModelDeploymentTemplate) -> int | None:
    """The serving container's gRPC port, or None for a runtime without the protocol's gRPC service."""
    return spec.runtime.grpc_port or runtime_of(spec).grpc_port


def _names(runtimes: list[str]) -> str:
    return ", ".join(runtimes[:-1]) + " and " + runtimes[-1]


def grpc_problem(spec: ModelDeploymentTemplate, place: str) -> str | None:
    """Why oip-v2-grpc load cannot reach the server `spec` runs, "local" (a process here) or "pod"; None
    where it serves the Open Inference Protocol's gRPC service there."""
    kind = spec.runtime.type
    if place == "local":
        if runtime_of(spec).serves_grpc_locally:
            return None
        local = [name for name, runtime in RUNTIMES.items() if runtime.serves_grpc_locally]
        return f"runtime {kind} serves no gRPC service here ({_names(local)} do)"
    if grpc_port_of(spec) is not None:
        return None
    served = [name for name, runtime in RUNTIMES.items() if runtime.grpc_port is not None]
    return f"runtime {kind} serves no gRPC service; set runtime.grpcPort (custom), or use {_names(served)}"


def readiness_path(spec: ModelDeploymentTemplate) -> str:
    """The readiness probe's path: the spec's, else the runtime's health endpoint."""
    return spec.readiness.path or runtime_of(spec).health_path(spec)


def load_gauges() -> dict[str, LoadGauges]:
    """The servers whose gauges say how busy they are, by display name."""
    return {r.display_name: r.load_gauges for r in RUNTIMES.values() if r.load_gauges is not None}


def latency_histograms() -> dict[str, str]:
    """The servers whose own histogram times each request, by runtime type: the histogram's name."""
    return {kind: r.latency_histogram for kind, r in RUNTIMES.items() if r.latency_histogram is not None}


def token_counters() -> dict[str, TokenCounters]:
    """The servers whose counters say how many tokens they served, by display name."""
    return {r.display_name: r.token_counters for r in RUNTIMES.values() if r.token_counters is not None}


__all__ = [
    "RUNTIMES",
    "BuildError",
    "Launch",
    "LoadGauges",
    "Runtime",
    "ServerCommand",
    "TokenCounters",
    "grpc_port_of",
    "grpc_problem",
    "latency_histograms",
    "load_gauges",
    "port_of",
    "readiness_path",
    "runtime_of",
    "token_counters",
]
