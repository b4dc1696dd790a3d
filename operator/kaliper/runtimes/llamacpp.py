"""llama.cpp's llama-server: GGUF models on CPUs, locally as a process under cgroup limits and on Kubernetes
from Kaliper's own image, which carries llama-server and llama-quantize built from the same pinned source.
OpenAI-compatible, ready when /health answers, its Prometheus metrics at /metrics (with --metrics, always
set); `llama_binary` is the one function here that looks at the machine (where llama.cpp's programs are)."""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import shutil
from pathlib import Path

from kaliper.api.model_shape import ModelShape
from kaliper.api.modeldeployment import LlmServing, ModelDeploymentTemplate
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.runtimes.base import Launch, LoadGauges, Runtime, ServerCommand, TokenCounters
from kaliper.runtimes.memory import MIB, MemoryNeed, Part

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


def gguf_shape(path: str) -> ModelShape:
    """The model's dimensions from its GGUF header (llama.cpp's own keys: `<arch>.block_count`,
    `<arch>.attention.head_count_kv`...) and its tensors' sizes; ValueError naming the key that is missing."""
    import gguf

    reader = gguf.GGUFReader(path)

    def value(key: str, default: int | None = None) -> int:
        field = reader.fields.get(key)
        if field is None:
            if default is None:
                raise ValueError(f"model {path} has no {key} in its GGUF header")
            return default
        found = field.contents()
        # Some architectures give a value per layer (head_count_kv of interleaved attention): the largest.
        return int(max(found) if isinstance(found, list) else found)

    arch = reader.fields["general.architecture"].contents()
    embedding, heads = value(f"{arch}.embedding_length"), value(f"{arch}.attention.head_count")
    kv_heads = value(f"{arch}.attention.head_count_kv", heads)
    return ModelShape(
        weights_bytes=sum(int(t.n_bytes) for t in reader.tensors),
        layers=value(f"{arch}.block_count"),
        embedding=embedding,
        feed_forward=value(f"{arch}.feed_forward_length"),
        heads=heads,
        key_width=value(f"{arch}.attention.key_length", embedding // heads) * kv_heads,
        value_width=value(f"{arch}.attention.value_length", embedding // heads) * kv_heads,
        trained_context=value(f"{arch}.context_length"),
    )


# Bytes one element of the KV cache takes at each --cache-type-k/-v llama-server accepts (ggml's block sizes:
# q8_0 keeps 32 values in 34 bytes).
KV_TYPE_BYTES = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "iq4_nl": 18 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
}
# What llama-server itself holds besides the model's buffers (its program's and libraries' pages, the HTTP
# server, the tokenizer), as its cgroup counts it: 13-15 MiB resident over its reported buffers, and the pages
# of its files besides (bench/fit_estimate.py: with 24 MiB the estimates fall within 5% of the peaks there).
PROCESS_BYTES = 24 * MIB
# The long options of the settings the estimate reads, by every spelling llama-server takes.
_ESTIMATE_FLAGS = {
    "-c": "--ctx-size",
    "-np": "--parallel",
    "-b": "--batch-size",
    "-ub": "--ubatch-size",
    "-ctk": "--cache-type-k",
    "-ctv": "--cache-type-v",
    "-fa": "--flash-attn",
}


def _last_values(args: list[str]) -> dict[str, str]:
    """Each flag's value as llama-server reads its command line: `--flag value` (it refuses `--flag=value`),
    the last one written winning."""
    found: dict[str, str] = {}
    for flag, value in itertools.pairwise(args):
        if flag.startswith("-"):
            found[_ESTIMATE_FLAGS.get(flag, flag)] = value
    return found


def memory_need(args: list[str], shape: ModelShape) -> MemoryNeed | None:
    """llama-server's memory at its peak from its command line: the weights; the KV cache, each slot's share
    of the context rounded up to 256 cells as llama.cpp allocates it; the compute buffer for one physical batch
    (the attention mask over a slot's context, the feed-forward and embedding activations; with flash attention
    off, every head's attention scores too): a model of llama.cpp's CPU graph, within 3% of the size it logs
    with flash attention and up to 8% above it without (tests/llm/test_fit_estimate.py); the prompt cache
    (--cache-ram); the process."""
    given = _last_values(args)
    context = int(given.get("--ctx-size", "0")) or shape.trained_context
    slots = int(given.get("--parallel", "1"))
    per_slot = _round_up(_round_up(context, slots) // slots, 256)
    cells = per_slot * slots
    key_type, value_type = given.get("--cache-type-k", "f16"), given.get("--cache-type-v", "f16")
    if key_type not in KV_TYPE_BYTES or value_type not in KV_TYPE_BYTES:
        return None  # a type this llama-server does not know: it refuses it itself, in its own words
    per_cell = shape.layers * (
        shape.key_width * KV_TYPE_BYTES[key_type] + shape.value_width * KV_TYPE_BYTES[value_type]
    )
    kv_types = key_type if key_type == value_type else f"K {key_type}, V {value_type}"
    ubatch = min(int(given.get("--ubatch-size", "512")), int(given.get("--batch-size", "2048")))
    activations = 4 * (3 * shape.feed_forward + 4 * shape.embedding)
    if given.get("--flash-attn") == "off":  # every head's scores and a 32-bit mask, over a slot's context
        compute = ubatch * (4 * per_slot * (shape.heads + 1) + activations)
    else:  # flash attention (llama.cpp's choice on CPUs): a 16-bit mask
        compute = ubatch * (2 * per_slot + activations)
    parts = [
        Part("weights", shape.weights_bytes),
        Part("KV cache", int(cells * per_cell), f"{cells:,} cells x {shape.layers} layers at {kv_types}"),
        Part("compute", compute, f"batches of {ubatch} tokens"),
    ]
    if int(given.get("--cache-ram", "0")) > 0:
        parts.append(Part("prompt cache", int(given["--cache-ram"]) * MIB, "--cache-ram"))
    return MemoryNeed((*parts, Part("llama-server", PROCESS_BYTES)))


def _round_up(value: int, step: int) -> int:
    return -(-value // step) * step


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


# Every flag llama-server of the pinned version accepts, as its --help lists them (tests/llm/test_llama_flags.py
# reads them from the built binary and fails when they differ).
LLAMA_SERVER_FLAGS = frozenset(
    """
    --adaptive-decay --adaptive-target --agent --alias --api-key --api-key-file --api-prefix --backend-sampling
    --batch-size --cache-idle-slots --cache-list --cache-prompt --cache-ram --cache-reuse --cache-type-k
    --cache-type-k-draft --cache-type-v --cache-type-v-draft --chat-template --chat-template-file
    --chat-template-kwargs --check-tensors --checkpoint-min-step --completion-bash --cont-batching --context-shift
    --control-vector --control-vector-layer-range --control-vector-scaled --cors-credentials --cors-headers
    --cors-methods --cors-origins --cpu-mask --cpu-mask-batch --cpu-mask-batch-draft --cpu-mask-draft --cpu-moe
    --cpu-moe-draft --cpu-range --cpu-range-batch --cpu-range-draft --cpu-strict --cpu-strict-batch
    --cpu-strict-batch-draft --cpu-strict-draft --ctx-checkpoints --ctx-size --defrag-thold --device --device-draft
    --docker-repo --draft --draft-max --draft-min --draft-n --draft-n-min --draft-p-min --draft-p-split
    --dry-allowed-length --dry-base --dry-multiplier --dry-penalty-last-n --dry-sequence-breaker --dynatemp-exp
    --dynatemp-range --embd-gemma-default --embd-normalize --embedding --embeddings --escape --fim-qwen-1.5b-default
    --fim-qwen-14b-spec --fim-qwen-30b-default --fim-qwen-3b-default --fim-qwen-7b-default --fim-qwen-7b-spec --fit
    --fit-ctx --fit-target --flash-attn --frequency-penalty --gpt-oss-120b-default --gpt-oss-20b-default
    --gpu-layers --gpu-layers-draft --grammar --grammar-file --help --hf-file --hf-repo --hf-repo-draft --hf-token
    --host --ignore-eos --image-max-tokens --image-min-tokens --jinja --json-schema --json-schema-file --keep
    --kv-offload --kv-unified --kv-unified-per-slot --lazy-mode --list-devices --load-mode --log-colors
    --log-disable --log-file --log-jsonl --log-prefix --log-prompts-dir --log-timestamps --log-verbose
    --log-verbosity --logit-bias --lookup-cache-dynamic --lookup-cache-static --lora --lora-init-without-apply
    --lora-scaled --main-gpu --mcp-servers-config --mcp-servers-json --media-path --metrics --min-p --mirostat
    --mirostat-ent --mirostat-lr --mmproj --mmproj-auto --mmproj-device --mmproj-offload --mmproj-url --model
    --model-draft --model-url --models-autoload --models-dir --models-max --models-preset --mtmd-batch-max-tokens
    --n-cpu-ffn --n-cpu-moe --n-cpu-moe-draft --n-gpu-layers --n-gpu-layers-draft --n-predict --no-agent
    --no-cache-idle-slots --no-cache-prompt --no-cont-batching --no-context-shift --no-cors-credentials --no-escape
    --no-host --no-jinja --no-kv-offload --no-kv-unified --no-log-jsonl --no-log-prefix --no-log-timestamps
    --no-mmproj --no-mmproj-auto --no-mmproj-offload --no-models-autoload --no-op-offload --no-perf
    --no-prefill-assistant --no-reasoning-preserve --no-repack --no-skip-chat-parsing --no-slots
    --no-spec-draft-backend-sampling --no-ui --no-ui-mcp-proxy --no-warmup --no-webui --no-webui-mcp-proxy --numa
    --offline --op-offload --override-kv --override-tensor --override-tensor-draft --parallel --path --perf --poll
    --poll-batch --poll-batch-draft --poll-draft --pooling --port --predict --prefill-assistant --presence-penalty
    --prio --prio-batch --prio-batch-draft --prio-draft --props --reasoning --reasoning-budget
    --reasoning-budget-message --reasoning-effort --reasoning-format --reasoning-preserve --repack --repeat-last-n
    --repeat-penalty --rerank --reranking --reuse-port --reverse-prompt --rope-freq-base --rope-freq-scale
    --rope-scale --rope-scaling --rpc --sampler-seq --samplers --sampling-seq --seed --skip-chat-parsing
    --sleep-idle-seconds --slot-prompt-similarity --slot-save-path --slots --spec-default
    --spec-draft-backend-sampling --spec-draft-cpu-mask --spec-draft-cpu-mask-batch --spec-draft-cpu-moe
    --spec-draft-cpu-range --spec-draft-cpu-strict --spec-draft-cpu-strict-batch --spec-draft-device --spec-draft-hf
    --spec-draft-model --spec-draft-n-cpu-moe --spec-draft-n-max --spec-draft-n-min --spec-draft-ncmoe
    --spec-draft-ngl --spec-draft-override-tensor --spec-draft-p-min --spec-draft-p-split --spec-draft-poll
    --spec-draft-poll-batch --spec-draft-prio --spec-draft-prio-batch --spec-draft-threads
    --spec-draft-threads-batch --spec-draft-type-k --spec-draft-type-v --spec-ngram-map-k-min-hits
    --spec-ngram-map-k-size-m --spec-ngram-map-k-size-n --spec-ngram-map-k4v-min-hits --spec-ngram-map-k4v-size-m
    --spec-ngram-map-k4v-size-n --spec-ngram-min-hits --spec-ngram-mod-n-match --spec-ngram-mod-n-max
    --spec-ngram-mod-n-min --spec-ngram-simple-min-hits --spec-ngram-simple-size-m --spec-ngram-simple-size-n
    --spec-ngram-size-m --spec-ngram-size-n --spec-synth-len --spec-synth-rates --spec-type --special --split-mode
    --spm-infill --sse-ping-interval --ssl-cert-file --ssl-key-file --swa-checkpoints --swa-full --tags --temp
    --temperature --tensor-split --threads --threads-batch --threads-batch-draft --threads-draft --threads-http
    --timeout --tools --tools-runtime --top-k --top-n-sigma --top-nsigma --top-p --typical --typical-p --ubatch-size
    --ui --ui-config --ui-config-file --ui-mcp-proxy --usage --verbose --verbosity --version --video-ffmpeg-dir
    --video-fps --video-timestamp-interval --vision-gemma-12b-default --vision-gemma-4b-default --warmup --webui
    --webui-config --webui-config-file --webui-mcp-proxy --xtc-probability --xtc-threshold --yarn-attn-factor
    --yarn-beta-fast --yarn-beta-slow --yarn-ext-factor --yarn-orig-ctx -C -Cb -Cbd -Cd -Cr -Crb -Crd -a -ag -b -bs
    -c -cb -cl -cmoe -cmoed -cms -cram -ctk -ctkd -ctv -ctvd -ctxcp -dev -devd -dr -dt -e -fa -fit -fitc -fitt -h
    -hf -hfd -hff -hfr -hfrd -hft -j -jf -kvo -kvu -l -lcd -lcs -lm -lv -lzm -m -md -mg -mm -mmdev -mmu -mu -n
    -ncffn -ncmoe -ncmoed -ngl -ngld -nkvo -no-ag -no-kvu -nocb -np -nr -ot -otd -r -rea -s -sm -sp -sps -t -tb -tbd
    -td -to -ts -ub -v
    """.split()  # noqa: SIM905 (a list of 412 flags reads better as their words)
)
# The flags llamacpp_args writes, with the field that sets each: a runtime.args or engineArgs flag among them
# would contradict it.
OWNED_FLAGS = {
    **dict.fromkeys(("-m", "--model"), "model (the file Kaliper fetched)"),
    **dict.fromkeys(("-a", "--alias"), "model.name"),
    **dict.fromkeys(("--host", "--port"), "the address the Service and the probes use"),
    **dict.fromkeys(("-np", "--parallel"), "llm.slots"),
    **dict.fromkeys(("-c", "--ctx-size"), "llm.contextSize"),
    **dict.fromkeys(("-t", "--threads", "-tb", "--threads-batch"), "threads.intraOp (else the CPU limit)"),
    **dict.fromkeys(("-b", "--batch-size"), "llm.batchSize"),
    **dict.fromkeys(("-ub", "--ubatch-size"), "llm.ubatchSize"),
    **dict.fromkeys(("-cram", "--cache-ram"), "resources.limits.memory (a quarter of it)"),
}


class LlamaCpp(Runtime):
    type = "llamacpp"
    display_name = "llama.cpp"
    version = f"llama-server from llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}"
    flags = LLAMA_SERVER_FLAGS
    owned_flags = OWNED_FLAGS
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

    def model_shape(self, path: str) -> ModelShape | None:
        return gguf_shape(path)

    def estimates_memory(self, spec: ModelDeploymentTemplate) -> bool:
        return True

    def memory_need(self, spec: ModelDeploymentTemplate, shape: ModelShape) -> MemoryNeed | None:
        return memory_need(self.command(Launch(spec, "pod", "model.gguf", "model", 0)).args, shape)

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
