"""ModelDeployment: serve a model as an inference Deployment and Service (or local server processes)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from kaliper.api.autoscaling import Autoscaling
from kaliper.api.base import KaliperModel, Rule, exactly_one_of, only_with
from kaliper.api.common import (
    Condition,
    ConfigMapKeyReference,
    Duration,
    EnvVar,
    HttpUrl,
    LabelMap,
    LocalObjectReference,
    Name,
    ObjectStatus,
    PositiveDuration,
    PvcReference,
    ResourceRequirements,
    StringMap,
    Toleration,
    conditions_field,
)
from kaliper.api.units import parse_duration

RuntimeType = Literal["onnxruntime", "mlserver", "triton", "llamacpp", "vllm", "sglang", "tgi", "custom"]
# Servers of generative models (OpenAI-compatible, streaming): llama.cpp on CPUs, the others on GPUs.
LLM_RUNTIMES = ("llamacpp", "vllm", "sglang", "tgi")
GPU_LLM_RUNTIMES = ("vllm", "sglang", "tgi")
GPU_ONLY_RUNTIMES = ("sglang", "tgi")  # vllm also runs on CPUs, its CPU build under `kaliper run`
ExecutionProvider = Literal[
    "CPUExecutionProvider",
    "CUDAExecutionProvider",
    "TensorrtExecutionProvider",
    "OpenVINOExecutionProvider",
    "DnnlExecutionProvider",
    "ROCMExecutionProvider",
]
Port = Annotated[int, Field(ge=1, le=65535)]
ImageName = Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[^\s]+$")]
FreeFormObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


class ImageModel(KaliperModel):
    """A model baked into a container image."""

    image: ImageName
    """Image that holds the model files, such as registry.example.com/models/resnet:1.2."""
    path: Annotated[str, Field(min_length=1, max_length=1024)]
    """Path of the model file or folder inside that image."""


class ModelSource(KaliperModel):
    """Where the model comes from. Set exactly one of pvc, configMap, url, image or file."""

    pvc: PvcReference | None = None
    """A model file on a PersistentVolumeClaim."""
    config_map: ConfigMapKeyReference | None = None
    """A small model (under 1 MiB) stored as a binaryData key of a ConfigMap."""
    url: HttpUrl | None = None
    """An HTTP(S) URL the serving pod downloads the model from at start-up."""
    sha256: Annotated[str, Field(pattern=r"^[a-f0-9]{64}$")] | None = None
    """Expected SHA-256 of the file downloaded from url; the server refuses to start on a mismatch."""
    image: ImageModel | None = None
    """A model baked into a container image."""
    file: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    """A path on this machine; only `kaliper run` can use it."""
    format: Literal["onnx", "sklearn", "gguf", "auto"] = "auto"
    """Model format; auto decides from the file name (.onnx, .joblib/.pkl, .gguf). The llamacpp runtime serves
    GGUF files; vllm, sglang and tgi serve a model directory (config.json, weights, tokenizer)."""
    name: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[a-zA-Z0-9][-_.a-zA-Z0-9]*$")] | None = None
    """Name the model is served under (the {model} in /v2/models/{model}/infer). Default: the object's name."""
    version: Annotated[str, Field(max_length=64)] | None = None
    """Optional model version, reported by the server's model metadata endpoint."""

    cross_field_rules = (
        exactly_one_of("pvc", "config_map", "url", "image", "file"),
        only_with("sha256", "url", message="sha256 checks a download and needs url; remove sha256 or use url"),
    )


class ServingRuntime(KaliperModel):
    """The model server that serves the model."""

    type: RuntimeType = "onnxruntime"
    """onnxruntime (Kaliper's built-in ONNX Runtime server), mlserver, triton, llamacpp (llama.cpp's
    llama-server: GGUF models on CPUs, locally and on Kubernetes), vllm, sglang, tgi (GPU servers of
    generative models, Kubernetes only), or custom."""
    image: ImageName | None = None
    """Container image. Default: Kaliper's image for onnxruntime and llamacpp (it carries llama-server), the
    upstream image for mlserver, triton, vllm, sglang and tgi. Required for custom on Kubernetes."""
    command: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(min_length=1, max_length=64)] | None = None
    """Command that starts the server (replaces the image's entrypoint; the process to run locally)."""
    args: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=128)] | None = None
    """Arguments appended to the command."""
    port: Port | None = None
    """Port the server listens on. Default: 8080 (onnxruntime, mlserver, llamacpp, tgi), 8000 (triton, vllm),
    30000 (sglang). Required for custom."""
    grpc_port: Port | None = None
    """Port of the server's Open Inference Protocol gRPC service (inference.GRPCInferenceService), which
    oip-v2-grpc load tests call. Default: 8081 (onnxruntime, mlserver), 8001 (triton); the LLM runtimes have
    none, and custom has one only where set."""
    protocol: Literal["oip-v2", "http-json", "openai"] | None = None
    """Protocol the server speaks. Default: oip-v2 (Open Inference Protocol v2) for onnxruntime, mlserver and
    triton, openai (OpenAI-compatible /v1/chat/completions and /v1/completions) for the LLM runtimes, http-json
    for custom."""
    execution_providers: Annotated[list[ExecutionProvider], Field(min_length=1, max_length=6)] | None = None
    """ONNX Runtime execution providers, in order of preference (onnxruntime only)."""
    implementation: Annotated[str, Field(max_length=256, pattern=r"^[A-Za-z_][\w.]*$")] | None = None
    """MLServer model implementation class (mlserver only). Default: mlserver_sklearn.SKLearnModel."""

    cross_field_rules = (
        Rule(
            cel="!has(self.type) || self.type != 'custom' || has(self.image) || has(self.command)",
            message="a custom runtime needs image (on Kubernetes) or command (locally)",
            check=lambda r: r.type != "custom" or r.image is not None or r.command is not None,
        ),
        Rule(
            cel="!has(self.type) || self.type != 'custom' || has(self.port)",
            message="a custom runtime needs port: the port its server listens on",
            check=lambda r: r.type != "custom" or r.port is not None,
            field_path=".port",
        ),
        Rule(
            cel="!has(self.executionProviders) || !has(self.type) || self.type == 'onnxruntime'",
            message="executionProviders apply to the onnxruntime runtime only; remove them or set type onnxruntime",
            check=lambda r: r.execution_providers is None or r.type == "onnxruntime",
            field_path=".executionProviders",
        ),
        Rule(
            cel="!has(self.grpcPort) || !has(self.type) || !(self.type in ['llamacpp', 'vllm', 'sglang', 'tgi'])",
            message="the LLM runtimes serve no Open Inference Protocol gRPC service; remove grpcPort",
            check=lambda r: r.grpc_port is None or r.type not in LLM_RUNTIMES,
            field_path=".grpcPort",
        ),
        only_with(
            "implementation",
            "type",
            "mlserver",
            message="implementation applies to the mlserver runtime only; remove it or set type mlserver",
        ),
    )


class Batching(KaliperModel):
    """Server-side dynamic batching: requests wait up to maxQueueDelay to be run together."""

    max_batch_size: Annotated[int, Field(ge=1, le=4096)]
    """Largest batch the server forms."""
    max_queue_delay: Duration = "5ms"
    """Longest a request waits for others to join its batch."""


class Threads(KaliperModel):
    """How much parallelism the server uses inside one replica."""

    intra_op: Annotated[int, Field(ge=1, le=256)] | None = None
    """Threads used inside one operator (ONNX Runtime intra_op_num_threads; llama.cpp's --threads and
    --threads-batch for llamacpp). Default: one per CPU of the limit."""
    inter_op: Annotated[int, Field(ge=1, le=256)] | None = None
    """Threads running independent operators in parallel (ONNX Runtime inter_op_num_threads)."""
    workers: Annotated[int, Field(ge=1, le=64)] | None = None
    """Server worker processes per replica (MLServer parallel workers, server processes for onnxruntime)."""


TokenCount = Annotated[int, Field(ge=1, le=4194304)]


class LlmServing(KaliperModel):
    """How a server of generative models runs: how many sequences it serves at once and how much context
    each holds (runtime.type llamacpp, vllm, sglang or tgi)."""

    slots: Annotated[int, Field(ge=1, le=4096)] | None = None
    """Sequences served at the same time, batched together: llama.cpp's slots (--parallel), vLLM's
    --max-num-seqs, SGLang's --max-running-requests, TGI's --max-concurrent-requests. Requests beyond it wait
    in the server. Default: 1 for llamacpp; the server's own default for the others."""
    context_size: TokenCount | None = None
    """llamacpp: context tokens of the whole server (--ctx-size), split evenly among its slots, so one
    request's prompt and output must fit in contextSize / slots. Default: the context the model was trained
    with, split among the slots. (A swept contextSize sets maxModelLength for vllm, sglang and tgi.)"""
    batch_size: TokenCount | None = None
    """llamacpp: the logical batch, prompt tokens submitted per decode call (--batch-size)."""
    ubatch_size: TokenCount | None = None
    """llamacpp: the physical batch, tokens computed at once (--ubatch-size; at most batchSize)."""
    max_model_length: TokenCount | None = None
    """vllm, sglang, tgi: the longest sequence, prompt plus output (--max-model-len, --context-length,
    --max-total-tokens)."""
    max_batched_tokens: TokenCount | None = None
    """vllm, sglang, tgi: prompt tokens scheduled in one step (--max-num-batched-tokens, --max-prefill-tokens,
    --max-batch-prefill-tokens)."""
    tensor_parallel: Annotated[int, Field(ge=1, le=16)] | None = None
    """vllm, sglang, tgi: GPUs one copy of the model is split across; it must divide resources.gpu.count.
    The remaining factor becomes vLLM's pipeline stages and SGLang's data-parallel copies; TGI shards over
    every GPU. Default: every GPU of the replica."""
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = None
    """vllm, sglang, tgi: share of each GPU's memory the server takes for weights and KV cache
    (--gpu-memory-utilization, --mem-fraction-static, --cuda-memory-fraction)."""
    dtype: Literal["auto", "float16", "bfloat16", "float32"] | None = None
    """vllm, sglang, tgi: the weights' data type (--dtype). TGI runs float16 or bfloat16 only, and auto
    there leaves the model's own."""
    quantization: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][-_a-z0-9]*$")] | None = None
    """vllm, sglang, tgi: the quantization method as the server names it (--quantization; TGI's --quantize),
    such as awq, gptq or fp8."""
    prefix_caching: bool | None = None
    """vllm, sglang: reuse the KV cache of prompt prefixes seen before (vLLM's --enable-prefix-caching or
    --no-enable-prefix-caching, SGLang's radix cache; TGI: its PREFIX_CACHING setting). Default: the
    server's (on in vLLM and SGLang)."""
    reasoning_parser: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][-_a-z0-9]*$")] | None = None
    """vllm, sglang: the parser that streams a reasoning model's thinking apart from its answer
    (--reasoning-parser), such as deepseek_r1 or qwen3. Without it the thinking arrives as answer text."""

    cross_field_rules = (
        Rule(
            cel="!has(self.contextSize) || self.contextSize >= (has(self.slots) ? self.slots : 1)",
            message="llm.contextSize is split evenly among the slots, so it cannot be smaller than llm.slots; "
            "raise contextSize (each slot needs room for a prompt and its output) or lower slots",
            check=lambda m: m.context_size is None or m.context_size >= (m.slots or 1),
            field_path=".contextSize",
        ),
        Rule(
            cel="!has(self.ubatchSize) || !has(self.batchSize) || self.ubatchSize <= self.batchSize",
            message="llm.ubatchSize is the physical part of the logical llm.batchSize; make it at most batchSize",
            check=lambda m: m.ubatch_size is None or m.batch_size is None or m.ubatch_size <= m.batch_size,
            field_path=".ubatchSize",
        ),
    )


LLAMACPP_ONLY = ("context_size", "batch_size", "ubatch_size")
GPU_LLM_ONLY = (
    "max_model_length",
    "max_batched_tokens",
    "tensor_parallel",
    "gpu_memory_utilization",
    "dtype",
    "quantization",
    "prefix_caching",
    "reasoning_parser",
)


def _cel_list(names: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{n}'" for n in names) + "]"


def _runtime_is(names: tuple[str, ...]) -> str:
    return f"(has(self.runtime) && has(self.runtime.type) && self.runtime.type in {_cel_list(names)})"


def _llm_has_any(names: tuple[str, ...]) -> str:
    return "(" + " || ".join(f"has(self.llm.{to_camel(n)})" for n in names) + ")"


# resources.gpu.count in CEL, with the model's default (1) where the field is left out: the server
# applies no defaults, and reading an absent field fails the rule with "no such key".
_CEL_GPU_COUNT = "(has(self.resources.gpu.count) ? self.resources.gpu.count : 1)"


def _gpu_count(spec: ModelDeploymentTemplate) -> int:
    gpu = spec.resources.gpu if spec.resources else None
    return gpu.count if gpu else 0


class Readiness(KaliperModel):
    """How Kaliper (and the kubelet) decide a replica is ready to serve."""

    path: Annotated[str, Field(max_length=1024, pattern=r"^/")] | None = None
    """HTTP path that answers 200 when ready. Default: /v2/health/ready for oip-v2 servers, / for http-json."""
    initial_delay: Duration = "0s"
    """Wait before the first probe."""
    period: PositiveDuration = "5s"
    """Time between probes."""
    timeout: PositiveDuration = "2s"
    """Time a probe may take."""
    failure_threshold: Annotated[int, Field(ge=1, le=100)] = 3
    """Consecutive failures before a replica is marked unready."""
    ready_timeout: PositiveDuration = "10m"
    """How long the whole deployment may take to become ready before it is reported Failed."""


class ServiceSpec(KaliperModel):
    """The Service in front of the replicas."""

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    """Kubernetes Service type."""
    port: Port = 80
    """Port the Service exposes (forwarded to the runtime's port)."""
    grpc_port: Port | None = None
    """Port the Service exposes for the runtime's gRPC service. Default: the runtime's gRPC port number."""
    annotations: StringMap | None = None
    """Annotations for the Service, such as cloud load-balancer settings."""


def _utilization_needs_request(resource: str) -> Rule:
    """An autoscaler's utilisation is a share of each replica's request (Kubernetes takes the limit for a request
    left out): without either, the HPA has nothing to divide by and never scales."""
    has = f"(has(self.resources.requests) && has(self.resources.requests.{resource})) || " + (
        f"(has(self.resources.limits) && has(self.resources.limits.{resource}))"
    )

    def check(spec: ModelDeploymentTemplate) -> bool:
        scaling, resources = spec.autoscaling, spec.resources
        if scaling is None or getattr(scaling, f"{resource}_utilization") is None:
            return True
        lists = (resources.requests, resources.limits) if resources is not None else ()
        return any(listed is not None and getattr(listed, resource) for listed in lists)

    return Rule(
        cel=f"!has(self.autoscaling) || !has(self.autoscaling.{resource}Utilization) || "
        f"(has(self.resources) && ({has}))",
        message=f"autoscaling.{resource}Utilization is a percentage of each replica's {resource} request: set "
        f"resources.requests.{resource} (or resources.limits.{resource})",
        check=check,
        field_path=".autoscaling",
    )


class ModelDeploymentTemplate(KaliperModel):
    """Everything about serving a model except the model itself; ModelOptimization follow-ups use it."""

    runtime: ServingRuntime = Field(default_factory=ServingRuntime)
    """The model server. Default: the built-in ONNX Runtime server."""
    replicas: Annotated[int, Field(ge=0, le=1000)] = 1
    """Number of serving replicas (local server processes behind a round-robin proxy in `kaliper run`); with
    autoscaling, the autoscaler sets them instead."""
    autoscaling: Autoscaling | None = None
    """A HorizontalPodAutoscaler for the replicas (Kubernetes only: `kaliper run` serves fixed replicas)."""
    resources: ResourceRequirements | None = None
    """CPU, memory and GPU requests and limits for each replica."""
    node_selector: LabelMap | None = None
    """Node labels the pods must match."""
    tolerations: Annotated[list[Toleration], Field(max_length=32)] | None = None
    """Taints the pods tolerate (GPU nodes are often tainted)."""
    affinity: FreeFormObject | None = None
    """A Kubernetes Affinity object, copied onto the pods as written."""
    batching: Batching | None = None
    """Server-side dynamic batching. Default: off."""
    threads: Threads | None = None
    """Thread and worker counts inside each replica."""
    llm: LlmServing | None = None
    """Generative-model servers (llamacpp, vllm, sglang, tgi): slots, context and batch sizes, GPU sharing."""
    env: Annotated[list[EnvVar], Field(max_length=128)] | None = None
    """Extra environment variables for the serving container."""
    readiness: Readiness = Field(default_factory=Readiness)
    """Readiness probe and the time allowed to become ready."""
    service: ServiceSpec = Field(default_factory=ServiceSpec)
    """The Service in front of the replicas."""
    image_pull_secrets: Annotated[list[LocalObjectReference], Field(max_length=8)] | None = None
    """Secrets for pulling private images."""
    service_account_name: Name | None = None
    """ServiceAccount the serving pods run as (for example one that can read the model bucket)."""
    pod_labels: LabelMap | None = None
    """Extra labels for the serving pods."""
    pod_annotations: StringMap | None = None
    """Extra annotations for the serving pods."""

    cross_field_rules = (
        *(_utilization_needs_request(name) for name in ("cpu", "memory")),
        Rule(
            cel="!has(self.batching) || !has(self.runtime) || !has(self.runtime.type) "
            "|| !(self.runtime.type in ['custom', 'triton'])",
            message="batching is configured by Kaliper for onnxruntime and mlserver only; Triton batches as its "
            "model's config.pbtxt says (dynamic_batching) and a custom server on its own, so remove batching "
            "(and sweep.batchSize) and configure it in the server",
            check=lambda s: s.batching is None or s.runtime.type not in ("custom", "triton"),
            field_path=".batching",
        ),
        Rule(
            cel=f"!has(self.llm) || {_runtime_is(LLM_RUNTIMES)}",
            message="llm configures servers of generative models; set runtime.type to llamacpp, vllm, sglang or "
            "tgi, or remove llm",
            check=lambda s: s.llm is None or s.runtime.type in LLM_RUNTIMES,
            field_path=".llm",
        ),
        Rule(
            cel=f"!has(self.llm) || !{_llm_has_any(LLAMACPP_ONLY)} || {_runtime_is(('llamacpp',))}",
            message="llm.contextSize, batchSize and ubatchSize are llama.cpp's settings (runtime.type llamacpp); "
            "for vllm, sglang and tgi use llm.maxModelLength and maxBatchedTokens",
            check=lambda s: (
                s.llm is None or s.runtime.type == "llamacpp" or all(getattr(s.llm, n) is None for n in LLAMACPP_ONLY)
            ),
            field_path=".llm",
        ),
        Rule(
            cel=f"!has(self.llm) || !{_llm_has_any(GPU_LLM_ONLY)} || {_runtime_is(GPU_LLM_RUNTIMES)}",
            message="llm.maxModelLength, maxBatchedTokens, tensorParallel, gpuMemoryUtilization, dtype and "
            "quantization are settings of the GPU servers (runtime.type vllm, sglang or tgi); for llamacpp use "
            "llm.contextSize and batchSize, and a quantized GGUF file as the model",
            check=lambda s: (
                s.llm is None
                or s.runtime.type in GPU_LLM_RUNTIMES
                or all(getattr(s.llm, n) is None for n in GPU_LLM_ONLY)
            ),
            field_path=".llm",
        ),
        Rule(
            cel=f"!{_runtime_is(GPU_ONLY_RUNTIMES)} || "
            f"(has(self.resources) && has(self.resources.gpu) && {_CEL_GPU_COUNT} >= 1)",
            message="sglang and tgi serve on GPUs: set resources.gpu.count (at least 1), or serve on CPUs with "
            "runtime.type vllm (under kaliper run) or llamacpp (a GGUF model)",
            check=lambda s: s.runtime.type not in GPU_ONLY_RUNTIMES or _gpu_count(s) >= 1,
            field_path=".resources",
        ),
        Rule(
            cel=f"!{_runtime_is(('tgi',))} || !has(self.llm) || !has(self.llm.dtype) || self.llm.dtype != 'float32'",
            message="tgi runs float16 or bfloat16 weights (its --dtype takes no other): set llm.dtype to float16, "
            "bfloat16 or auto (the model's own), or serve float32 with vllm or sglang",
            check=lambda s: not (s.runtime.type == "tgi" and s.llm is not None and s.llm.dtype == "float32"),
            field_path=".llm.dtype",
        ),
        Rule(
            cel=f"!{_runtime_is(('tgi',))} || !has(self.llm) || !has(self.llm.quantization) || "
            "!has(self.llm.dtype) || self.llm.dtype == 'auto'",
            message="tgi cannot force llm.dtype on a quantized model (its --dtype and --quantize exclude each "
            "other): remove llm.dtype or set it to auto",
            check=lambda s: (
                not (
                    s.runtime.type == "tgi"
                    and s.llm is not None
                    and s.llm.quantization is not None
                    and s.llm.dtype not in (None, "auto")
                )
            ),
            field_path=".llm.dtype",
        ),
        Rule(
            cel="!has(self.llm) || !has(self.llm.tensorParallel) || "
            "(has(self.resources) && has(self.resources.gpu) "
            f"&& {_CEL_GPU_COUNT} % self.llm.tensorParallel == 0)",
            message="llm.tensorParallel must divide resources.gpu.count (the model is split across that many GPUs "
            "and copied over the rest); pick a divisor of the GPU count",
            check=lambda s: (
                s.llm is None or s.llm.tensor_parallel is None or _gpu_count(s) % s.llm.tensor_parallel == 0
            ),
            field_path=".llm.tensorParallel",
        ),
    )

    def replicas_at_least(self) -> int:
        """The replicas it always holds: its autoscaler's minimum, else its replicas."""
        return self.autoscaling.min_replicas if self.autoscaling is not None else self.replicas

    def replicas_at_most(self) -> int:
        """The most replicas it may run: its autoscaler's maximum, else its replicas."""
        return self.autoscaling.max_replicas if self.autoscaling is not None else self.replicas


class ProfileReference(KaliperModel):
    """The profile whose prediction production is held to. Set exactly one."""

    run: Name | None = None
    """A finished ProfileRun of this namespace (its report ConfigMap)."""
    config_map: ConfigMapKeyReference | None = None
    """A ConfigMap key holding a profile's report (as Kaliper stores them, plain or gzipped), such as one kept in
    Git."""

    cross_field_rules = (exactly_one_of("run", "config_map"),)


class Reprofile(KaliperModel):
    """Profile again once the prediction has stopped holding: a copy of a ProfileRun's spec, targeting this
    deployment (its trials serve copies; this deployment is left alone), made by the operator in this namespace,
    where the namespace's load caps apply to it as to any run. At most one at a time, `minInterval` apart. A run
    whose payload.prompts.fromPrometheus fits its workload does so anew, from the traffic at that moment."""

    after: Duration = "30m"
    """How long PredictionHolds must have been False (a slower, faster or shifted production)."""
    min_interval: PositiveDuration = "6h"
    """The least time between two re-profiles."""
    run: Name | None = None
    """The ProfileRun whose spec is copied. Default: prediction.profile.run."""


class PredictionCheck(KaliperModel):
    """Hold the profile that sized this deployment to production: every `interval`, read from the operator's
    Prometheus the requests each replica answered over the `window` and the latency percentiles the servers' own
    histogram gives, and score the profile's figures at that load (status.production, condition PredictionHolds,
    an Event when it changes). The runtime must export a latency histogram (the built-in server, vLLM) and
    Prometheus must scrape the pods (the chart's serverPodMonitor, or the prometheus.io annotations)."""

    profile: ProfileReference
    """The profile that sized the deployment."""
    configuration: StringMap | None = None
    """The profiled configuration deployed, by parameter (such as cpu: 500m). Default: the profile's choice."""
    interval: PositiveDuration = "5m"
    """How often production is read and scored (at least 10s)."""
    window: PositiveDuration = "1h"
    """How much of production each check reads, back from its time."""
    tolerance: Annotated[float, Field(ge=0, le=1)] = 0.1
    """The profile's intervals are widened by this share before a production percentile is outside them."""
    reprofile: Reprofile | None = None
    """Profile again when the prediction stops holding. Default: only say so."""

    cross_field_rules = (
        Rule(
            cel="!has(self.interval) || duration(self.interval) >= duration('10s')",
            message="prediction.interval must be at least 10s: each check reads the window from Prometheus",
            check=lambda s: parse_duration(s.interval) >= 10,
            field_path=".interval",
        ),
        Rule(
            cel="!has(self.reprofile) || has(self.reprofile.run) || has(self.profile.run)",
            message="prediction.reprofile copies a ProfileRun: name it in reprofile.run, or hold the deployment to "
            "a run (profile.run)",
            check=lambda s: s.reprofile is None or s.reprofile.run is not None or s.profile.run is not None,
            field_path=".reprofile.run",
        ),
    )


class ModelDeploymentSpec(ModelDeploymentTemplate):
    """A model, the server that serves it, and the resources it gets."""

    model: ModelSource
    """Where the model comes from."""
    prediction: PredictionCheck | None = None
    """Hold a profile's prediction to production (the operator; `kaliper compare --from-prometheus` on one
    machine)."""

    cross_field_rules = (
        *ModelDeploymentTemplate.cross_field_rules,
        Rule(
            cel="!has(self.runtime) || !has(self.runtime.type) || self.runtime.type != 'llamacpp' || "
            "!has(self.model.format) || self.model.format in ['gguf', 'auto']",
            message="the llamacpp runtime serves GGUF models; set model.format to gguf (or auto) and give a .gguf "
            "file, such as one a ModelOptimization quantized",
            check=lambda s: s.runtime.type != "llamacpp" or s.model.format in ("gguf", "auto"),
            field_path=".model.format",
        ),
        Rule(
            cel=f"!{_runtime_is(GPU_LLM_RUNTIMES)} || has(self.model.pvc) || has(self.model.image) || "
            "(has(self.model.file) && self.runtime.type == 'vllm')",
            message="vllm, sglang and tgi load a model directory (config.json, the weights, the tokenizer); give it "
            "as model.pvc or model.image, whose path names that directory (or, for vllm under kaliper run, as "
            "model.file)",
            check=lambda s: (
                s.runtime.type not in GPU_LLM_RUNTIMES
                or s.model.pvc is not None
                or s.model.image is not None
                or (s.model.file is not None and s.runtime.type == "vllm")
            ),
            field_path=".model",
        ),
    )


ModelDeploymentPhase = Literal["Pending", "Progressing", "Ready", "Degraded", "Failed"]


class PredictionFigure(KaliperModel):
    """One figure of production against the profile's at production's load."""

    figure: Annotated[str, Field(max_length=64)]
    """Such as "p99 latency (ms)"."""
    observed: float
    """What production showed (a latency percentile: histogram_quantile's estimate)."""
    observed_low: float | None = None
    """For a latency percentile, the edges of the histogram bucket it falls in."""
    observed_high: float | None = None
    """The bucket's upper edge; unset for the +Inf bucket."""
    predicted: float
    """The profile's figure, interpolated between its levels around production's load."""
    predicted_low: float | None = None
    """Its 95% interval, widened by prediction.tolerance."""
    predicted_high: float | None = None
    """The widened interval's upper end; unset when the profile's is open."""
    error: float
    """(observed - predicted) / predicted."""
    inside: bool
    """The observation's interval meets the prediction's."""


class ProductionStatus(KaliperModel):
    """The latest check of the profile's prediction against production (spec.prediction)."""

    checked_at: datetime
    """When production was last read."""
    profile: Annotated[str, Field(max_length=512)]
    """Which profile, such as "ProfileRun iris-sweep"."""
    configuration: StringMap | None = None
    """The profiled configuration held to production."""
    window: Annotated[str, Field(max_length=32)]
    """How much of production was read (spec.prediction.window)."""
    requests: Annotated[int, Field(ge=0)] = 0
    """Requests the servers answered in the window."""
    replicas: Annotated[float, Field(ge=0)] = 0
    """Replicas seen in the window (series told apart by pod)."""
    load_per_replica_rps: Annotated[float, Field(ge=0)] = 0
    """Answers per second per replica: the load the profile's figures were compared at."""
    profiled_rps: Annotated[list[float], Field(max_length=2)] = Field(default_factory=list)
    """The lowest and highest load per replica the profile measured."""
    holds: bool | None = None
    """None: not judged (too little traffic, a load the profile did not measure, nothing to read)."""
    reason: Annotated[str, Field(max_length=64)]
    """PredictionHolds's reason: Holds, SlowerThanProfiled, FasterThanProfiled, WorkloadShifted,
    LoadOutsideProfile, NotEnoughTraffic, ProfileUnavailable or ProductionUnavailable."""
    message: Annotated[str, Field(max_length=2048)] = ""
    """What was found, in a sentence."""
    figures: Annotated[list[PredictionFigure], Field(max_length=8)] = Field(default_factory=list)
    """Each latency percentile compared."""
    reprofiled: Annotated[str, Field(max_length=253)] | None = None
    """The latest ProfileRun made to profile again (spec.prediction.reprofile)."""
    reprofiled_at: datetime | None = None
    """When it was made."""


class ModelDeploymentStatus(ObjectStatus):
    """What Kaliper observed of the deployment."""

    phase: ModelDeploymentPhase | None = None
    """One word: Pending, Progressing, Ready, Degraded or Failed."""
    conditions: list[Condition] = conditions_field()
    """Ready, Progressing and Degraded, with reasons."""
    replicas: Annotated[int, Field(ge=0)] | None = None
    """Replicas that exist."""
    ready_replicas: Annotated[int, Field(ge=0)] | None = None
    """Replicas that pass their readiness probe."""
    endpoint: Annotated[str, Field(max_length=2048)] | None = None
    """Base URL of the served model, such as http://resnet.ml.svc:80."""
    model_name: Annotated[str, Field(max_length=128)] | None = None
    """Name the model is served under."""
    deployment_name: Annotated[str, Field(max_length=253)] | None = None
    """The Kubernetes Deployment (or local process group) that serves it."""
    service_name: Annotated[str, Field(max_length=253)] | None = None
    """The Kubernetes Service in front of it."""
    autoscaler_name: Annotated[str, Field(max_length=253)] | None = None
    """The HorizontalPodAutoscaler that sets its replicas (spec.autoscaling)."""
    message: Annotated[str, Field(max_length=4096)] | None = None
    """The latest thing a person should know."""
    production: ProductionStatus | None = None
    """The profile's prediction against production (spec.prediction)."""
