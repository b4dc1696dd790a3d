"""Command lines of the servers of generative models (llama.cpp's llama-server, vLLM, SGLang, TGI) from a
ModelDeployment: pure functions shared by the local runtime and the Kubernetes builders, so both start the
same server the same way; and `llama_binary`, the one function here that looks at the machine (where
llama.cpp's programs are).

Every one of them speaks the OpenAI API, answers GET /health with 200 once the model is loaded, and exports
Prometheus metrics at /metrics on its serving port (llama-server only with --metrics, which is always set).
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

from kaliper.api.modeldeployment import GPU_LLM_RUNTIMES, ModelDeploymentSpec
from kaliper.api.units import parse_cpu, parse_quantity

# The llama-cpp-python release whose vendored llama.cpp source builds llama-server (and llama-quantize):
# hack/llama/build.sh for this machine, the Dockerfile for Kaliper's image. One version everywhere.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_SERVER = "llama-server"  # on PATH in Kaliper's image (/usr/local/bin)
LLAMA_QUANTIZE = "llama-quantize"

# Upstream images, pinned; runtime.image overrides them.
UPSTREAM_IMAGES = {
    "vllm": "docker.io/vllm/vllm-openai:v0.11.0",
    "sglang": "docker.io/lmsysorg/sglang:v0.5.4",
    "tgi": "ghcr.io/huggingface/text-generation-inference:3.3.6",
}
DEFAULT_PORTS = {"llamacpp": 8080, "vllm": 8000, "sglang": 30000, "tgi": 8080}
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"


def llama_binary(name: str) -> str:
    """A llama.cpp program (llama-server, llama-quantize) on this machine: in $KALIPER_LLAMA_DIR, else where
    hack/llama/build.sh cached the pinned version, else on PATH (Kaliper's image). FileNotFoundError says how
    to get it."""
    folders = [os.environ.get("KALIPER_LLAMA_DIR")]
    cache = Path(os.environ.get("KALIPER_CACHE") or Path.home() / ".cache" / "kaliper")
    folders.append(str(cache / "bin" / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}"))
    for folder in folders:
        if folder and os.access(Path(folder) / name, os.X_OK):
            return str(Path(folder) / name)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        f"llama.cpp's {name}, which is not built on this machine: run `make llama` (hack/llama/build.sh, about "
        "6-15 minutes once), or set KALIPER_LLAMA_DIR to a folder holding it"
    )


class ServingProblem(ValueError):
    """A deployment the server cannot run as written; the message names the field and the fix."""


def threads(spec: ModelDeploymentSpec) -> int | None:
    """llama.cpp's compute threads: threads.intraOp, else one per CPU of the limit (rounded up). llama.cpp's
    own default is every core of the machine, which under a smaller CFS quota spends most of each period
    throttled; without a limit its default stands (None)."""
    if spec.threads and spec.threads.intra_op:
        return spec.threads.intra_op
    limits = spec.resources.limits if spec.resources else None
    if limits and limits.cpu:
        return max(1, math.ceil(float(parse_cpu(limits.cpu)) - 1e-9))
    return None


def prompt_cache_mib(spec: ModelDeploymentSpec) -> int | None:
    """llama-server keeps the KV state of earlier prompts in host memory for reuse, up to 8 GiB by default
    (--cache-ram): under a memory limit that cache grows until the kernel OOM-kills the server (seen here: a
    256Mi replica killed after half a minute of chat requests). A quarter of the limit; None without one."""
    limits = spec.resources.limits if spec.resources else None
    if limits and limits.memory:
        return int(parse_quantity(limits.memory) / 4 / 2**20)
    return None


def llamacpp_args(spec: ModelDeploymentSpec, model_path: str, served_name: str, host: str, port: int) -> list[str]:
    """llama-server's arguments: the model, its served name, the address, slots, context, threads, batches,
    and the metrics endpoint (read by the profile's self-check and by Prometheus)."""
    llm = spec.llm
    slots = llm.slots if llm and llm.slots else 1
    args = ["--model", model_path, "--alias", served_name, "--host", host, "--port", str(port)]
    args += ["--parallel", str(slots)]
    if llm and llm.context_size:
        args += ["--ctx-size", str(llm.context_size)]
    count = threads(spec)
    if count:
        args += ["--threads", str(count), "--threads-batch", str(count)]
    if llm and llm.batch_size:
        args += ["--batch-size", str(llm.batch_size)]
    if llm and llm.ubatch_size:
        args += ["--ubatch-size", str(llm.ubatch_size)]
    cache = prompt_cache_mib(spec)
    if cache is not None:
        args += ["--cache-ram", str(cache)]
    return [*args, "--metrics", "--no-webui"]


def gpu_count(spec: ModelDeploymentSpec) -> int:
    gpu = spec.resources.gpu if spec.resources else None
    return gpu.count if gpu else 0


def parallelism(spec: ModelDeploymentSpec) -> tuple[int, int]:
    """(tensor-parallel size, copies over the remaining GPUs) for a GPU server; ServingProblem when the
    tensor-parallel size does not divide the GPUs (a sweep's GPU counts are checked here, after the spec)."""
    gpus = gpu_count(spec)
    if gpus < 1:
        raise ServingProblem(
            f"{spec.runtime.type} serves on GPUs: set resources.gpu.count (at least 1), or serve a GGUF model on "
            "CPUs with runtime.type llamacpp"
        )
    tensor = spec.llm.tensor_parallel if spec.llm and spec.llm.tensor_parallel else gpus
    if gpus % tensor:
        raise ServingProblem(
            f"llm.tensorParallel {tensor} does not divide resources.gpu.count {gpus}: pick a divisor of the GPU "
            "count (the model is split across tensorParallel GPUs and copied over the rest)"
        )
    if spec.runtime.type == "tgi" and tensor != gpus:
        raise ServingProblem(
            f"tgi shards the model over every GPU of the replica ({gpus}); remove llm.tensorParallel or set it to "
            f"{gpus}"
        )
    return tensor, gpus // tensor


def gpu_server_command(
    spec: ModelDeploymentSpec, model_path: str, served_name: str, port: int
) -> tuple[list[str], list[str]]:
    """(command, arguments) of vllm, sglang or tgi serving the model directory at `model_path`."""
    runtime = spec.runtime.type
    assert runtime in GPU_LLM_RUNTIMES, runtime
    tensor, copies = parallelism(spec)
    llm = spec.llm
    # (option, value) per setting, in each server's own names; None: not set, the server's default applies.
    if runtime == "vllm":
        command = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args = ["--model", model_path, "--served-model-name", served_name, "--host", "0.0.0.0", "--port", str(port)]
        options = [
            ("--tensor-parallel-size", tensor),
            ("--pipeline-parallel-size", copies if copies > 1 else None),
            ("--max-num-seqs", llm and llm.slots),
            ("--max-model-len", llm and llm.max_model_length),
            ("--max-num-batched-tokens", llm and llm.max_batched_tokens),
            ("--gpu-memory-utilization", llm and llm.gpu_memory_utilization),
            ("--dtype", llm and llm.dtype),
            ("--quantization", llm and llm.quantization),
        ]
    elif runtime == "sglang":
        command = ["python3", "-m", "sglang.launch_server"]
        args = [
            "--model-path",
            model_path,
            "--served-model-name",
            served_name,
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--enable-metrics",
        ]
        options = [
            ("--tp-size", tensor),
            ("--dp-size", copies if copies > 1 else None),
            ("--max-running-requests", llm and llm.slots),
            ("--context-length", llm and llm.max_model_length),
            ("--max-prefill-tokens", llm and llm.max_batched_tokens),
            ("--mem-fraction-static", llm and llm.gpu_memory_utilization),
            ("--dtype", llm and llm.dtype),
            ("--quantization", llm and llm.quantization),
        ]
    else:
        # TGI serves whatever model a request names; it has no served-name option.
        command = ["text-generation-launcher"]
        args = ["--model-id", model_path, "--hostname", "0.0.0.0", "--port", str(port)]
        options = [
            ("--num-shard", tensor),
            ("--max-concurrent-requests", llm and llm.slots),
            ("--max-total-tokens", llm and llm.max_model_length),
            ("--max-batch-prefill-tokens", llm and llm.max_batched_tokens),
            ("--cuda-memory-fraction", llm and llm.gpu_memory_utilization),
            # TGI's --dtype forces float16 or bfloat16; without it the model's own dtype applies (auto).
            ("--dtype", llm and llm.dtype if llm and llm.dtype != "auto" else None),
            ("--quantize", llm and llm.quantization),
        ]
    for option, value in options:
        if value is not None:
            args += [option, f"{value:g}" if isinstance(value, float) else str(value)]
    return command, args
