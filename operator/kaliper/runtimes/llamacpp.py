"""llama.cpp's llama-server: GGUF models on CPUs, locally as a process under cgroup limits and on Kubernetes
from Kaliper's own image, which carries llama-server and llama-quantize built from the same pinned source.
OpenAI-compatible, ready when /health answers, its Prometheus metrics at /metrics (with --metrics, always
set); `llama_binary` is the one function here that looks at the machine (where llama.cpp's programs are)."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from pathlib import Path

from kaliper.api.modeldeployment import LlmServing, ModelDeploymentTemplate
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.runtimes.base import Launch, LoadGauges, Runtime, ServerCommand, TokenCounters

# The llama-cpp-python release whose vendored llama.cpp source builds llama-server (and llama-quantize):
# hack/llama/build.sh for this machine, the Dockerfile for Kaliper's image. One version everywhere.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_SERVER = "llama-server"  # on PATH in Kaliper's image (/usr/local/bin)
LLAMA_QUANTIZE = "llama-quantize"
GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
HEALTH_PATH = "/health"


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


def threads(spec: ModelDeploymentTemplate) -> int | None:
    """llama.cpp's compute threads: threads.intraOp, else one per CPU of the limit (rounded up). llama.cpp's
    own default is every core of the machine, which under a smaller CFS quota spends most of each period
    throttled; without a limit its default stands (None)."""
    if spec.threads and spec.threads.intra_op:
        return spec.threads.intra_op
    limits = spec.resources.limits if spec.resources else None
    if limits and limits.cpu:
        return max(1, math.ceil(float(parse_cpu(limits.cpu)) - 1e-9))
    return None


def prompt_cache_mib(spec: ModelDeploymentTemplate) -> int | None:
    """llama-server keeps the KV state of earlier prompts in host memory for reuse, up to 8 GiB by default
    (--cache-ram): under a memory limit that cache grows until the kernel OOM-kills the server (seen here: a
    256Mi replica killed after half a minute of chat requests). A quarter of the limit; None without one."""
    limits = spec.resources.limits if spec.resources else None
    if limits and limits.memory:
        return int(parse_quantity(limits.memory) / 4 / 2**20)
    return None


def llamacpp_args(spec: ModelDeploymentTemplate, model_path: str, served_name: str, host: str, port: int) -> list[str]:
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


def gguf_problem(path: str, taken_by: str = "the llamacpp runtime") -> str | None:
    """Why the file is no GGUF model, or None; reads its first four bytes. `taken_by` names what asked for one
    (the runtime, or a ModelOptimization's model.framework)."""
    with contextlib.suppress(OSError), Path(path).open("rb") as model:
        head = model.read(4)
        if head == GGUF_MAGIC:
            return None
        return (
            f"model {path} is not a GGUF file (it starts with {head!r}, not {GGUF_MAGIC!r}): {taken_by} takes "
            "GGUF models; convert the model with llama.cpp's convert_hf_to_gguf.py or give a .gguf file"
        )
    return f"model {path} cannot be read"


class LlamaCpp(Runtime):
    type = "llamacpp"
    display_name = "llama.cpp"
    in_kaliper_image = True
    generative = True
    metrics_path = "/metrics"
    load_gauges = LoadGauges(
        "llamacpp:requests_processing",
        ("llamacpp:requests_processing",),
        ("llamacpp:requests_deferred",),
        busy_slots=("llamacpp:n_busy_slots_per_decode", "llamacpp:n_decode_total"),
    )
    token_counters = TokenCounters(
        output_tokens="llamacpp:tokens_predicted_total",
        # It counts cached prompt tokens apart from those it processed: together they are the prompt.
        input_tokens=("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total"),
        input_definition="input tokens (processed + cached)",
        generation_seconds="llamacpp:tokens_predicted_seconds_total",
    )

    def health_path(self, spec: ModelDeploymentTemplate) -> str:
        return HEALTH_PATH

    def server_command(self, launch: Launch) -> ServerCommand:
        args = llamacpp_args(launch.spec, launch.model_path, launch.served_name, launch.host, launch.port)
        # Locally the binary is looked up only when the spec names no command of its own.
        program = (
            [LLAMA_SERVER] if launch.place == "pod" or launch.spec.runtime.command else [llama_binary(LLAMA_SERVER)]
        )
        return ServerCommand(program, args)

    def local_model_problem(self, path: str) -> str | None:
        return gguf_problem(path)

    def request_fit_problem(self, spec: ModelDeploymentTemplate, needed_tokens: int, source: str) -> str | None:
        # llama.cpp splits its context evenly among its slots: a request longer than its slot's share fails.
        llm = spec.llm
        if llm is None or llm.context_size is None:
            return None
        slots = llm.slots or 1
        per_slot = llm.context_size // slots
        if per_slot >= needed_tokens:
            return None
        return (
            f"llm.contextSize {llm.context_size} split among {slots} slots leaves {per_slot} tokens per request, "
            f"but a request needs at least {needed_tokens} ({source}; the chat template adds more): raise "
            f"llm.contextSize to at least {needed_tokens * slots}, lower llm.slots, or ask for fewer tokens"
        )

    def with_batch_size(self, spec: ModelDeploymentTemplate, size: int) -> ModelDeploymentTemplate:
        # To llama.cpp a batch is prompt tokens submitted per decode call.
        llm = (spec.llm or LlmServing()).model_copy(update={"batch_size": size})
        return spec.model_copy(update={"llm": llm})


RUNTIME = LlamaCpp()
