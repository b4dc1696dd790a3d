"""A ProfileRun's vocabulary: what each part of its spec says (target, request, payload, load, sweep, search,
SLO, metrics, cost, recommendation, report, TTL). Rules between parts are in rules.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from kaliper.api.autoscaling import AutoscalerSettings
from kaliper.api.base import KaliperModel, Rule, exactly_one_of, only_with
from kaliper.api.common import (
    RESOURCE_NAME_PATTERN,
    ConfigMapKeyReference,
    CpuQuantity,
    Duration,
    HttpUrl,
    LocalObjectReference,
    MemoryQuantity,
    Name,
    PositiveDuration,
    SecretKeyReference,
    StringMap,
    TensorSpec,
    named_list,
    set_of,
)
from kaliper.api.modeldeployment import ModelSource, RuntimeType
from kaliper.api.units import parse_duration
from kaliper.measure.figures import OBJECTIVE_NAMES
from kaliper.measure.judgement import Bound


class WorkloadReference(KaliperModel):
    """A workload that already runs, not made by Kaliper: each trial runs a copy of its pod template."""

    kind: Literal["Deployment"] = "Deployment"
    """The workload's kind (apps/v1)."""
    name: Name
    """Its name, in the ProfileRun's namespace."""
    container: Name | None = None
    """The serving container: it gets the swept resources and takes the load. Default: the first container."""
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    """The container port the load goes to. Default: the container's first declared port."""


class ProfileTarget(KaliperModel):
    """What to load. Set exactly one of deploymentRef, workloadRef or url."""

    deployment_ref: LocalObjectReference | None = None
    """A ModelDeployment in the same namespace. Each trial is a copy of it with the swept values applied;
    every deployment parameter of the sweep can vary."""
    workload_ref: WorkloadReference | None = None
    """A Deployment that already runs (Kubernetes only). Each trial runs a copy of its pod template, with the
    swept cpu, memory, gpu and replicas, under labels no Service of the original selects; the original is
    never changed, and the recommendation is a patch of it."""
    url: HttpUrl | None = None
    """An endpoint that is already running, such as https://models.example.com. Only load levels can be
    swept against it."""

    cross_field_rules = (exactly_one_of("deployment_ref", "workload_ref", "url"),)


# The figures an objective or a stopping rule may watch: latency, ttft, itl, tpot (kaliper.measure.figures).
StreamingMetric = Literal[OBJECTIVE_NAMES]  # type: ignore[valid-type]


class SecretHeader(KaliperModel):
    """An HTTP header whose value is read from a Secret inside the load-generator pod."""

    name: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
    """Header name, such as Authorization."""
    secret_key_ref: SecretKeyReference
    """The Secret key that holds the header value. Kaliper's operator never reads it."""


Protocol = Literal["oip-v2", "oip-v2-grpc", "http-json", "openai-chat", "openai-completions"]


LLM_PROTOCOLS = ("openai-chat", "openai-completions")


OIP_PROTOCOLS = ("oip-v2", "oip-v2-grpc")  # REST and gRPC faces of the Open Inference Protocol v2


GRPC_PROTOCOLS = ("oip-v2-grpc",)


FreeFormObject = Annotated[
    dict[str, Any], Field(json_schema_extra={"type": "object", "x-kubernetes-preserve-unknown-fields": True})
]


class Sampling(KaliperModel):
    """Sampling fields sent with every generation request, as the OpenAI API names them (top_k is vLLM's and
    llama.cpp's). Unset fields are not sent: the server's defaults apply."""

    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    """Sampling temperature; 0 is greedy."""
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    """Nucleus sampling: the smallest set of tokens whose probabilities add up to this."""
    top_k: Annotated[int, Field(ge=0, le=100000)] | None = None
    """Sample among the k most likely tokens (vLLM, llama.cpp, SGLang)."""
    seed: int | None = None
    """Sampling seed, for repeatable answers where the server honours it."""
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    """Penalty on tokens already present in the text."""
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    """Penalty on tokens by how often they appear in the text."""
    stop: Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=4)] | None = None
    """Strings that end the answer (an answer may then be shorter than max_tokens)."""


class GenerationSpec(KaliperModel):
    """What each OpenAI-compatible generation request asks for (openai-chat and openai-completions)."""

    max_tokens: Annotated[int, Field(ge=1, le=131072)] = 128
    """Output tokens each request asks for, unless the prompts say otherwise (payload.prompts.synthetic.
    outputTokens, or a dataset row's max_tokens)."""
    ignore_eos: bool | None = None
    """Ask the server to go on past its end-of-sequence token (vLLM, llama.cpp and SGLang accept it), so every
    answer has exactly max_tokens tokens. Unset: not sent."""
    stream: bool = True
    """Stream the answer as Server-Sent Events (time to first token and the gaps between tokens are measured
    only when streaming)."""
    include_usage: bool = True
    """Ask for stream_options.include_usage: the server's own token counts, the truest there are."""
    sampling: Sampling | None = None
    """Sampling fields (temperature, top_p, ...)."""
    extra_body: FreeFormObject | None = None
    """Further fields merged into every request body as they are, such as {"cache_prompt": false} for
    llama.cpp or {"min_tokens": 64} for vLLM."""
    server_metrics_path: Annotated[str, Field(max_length=1024, pattern=r"^/")] | None = "/metrics"
    """The target's Prometheus endpoint, read at the edges of each measured interval to check the figures
    against the server's own counters (llama.cpp's --metrics, vLLM's); null: no check. A target without
    it only loses the check."""


class GrpcChannels(KaliperModel):
    """How gRPC calls share HTTP/2 connections (oip-v2-grpc)."""

    connections: Annotated[int, Field(ge=1, le=1000)] = 1
    """HTTP/2 connections each load-generator process opens to the target; calls are spread over them."""
    streams_per_connection: Annotated[int, Field(ge=1, le=1000)] = 100
    """Open loop: calls in flight at once on one connection (the bound on outstanding requests is
    connections x streamsPerConnection). Closed loop: each user has one call in flight and users are spread
    evenly over the connections, so this is not used."""


class RequestSpec(KaliperModel):
    """How each request is sent."""

    protocol: Protocol = "oip-v2"
    """oip-v2: Open Inference Protocol v2 REST (POST /v2/models/{model}/infer); oip-v2-grpc: the same
    protocol over gRPC (inference.GRPCInferenceService/ModelInfer, unary calls over HTTP/2; payload bodies are
    written as for oip-v2 and sent as ModelInferRequest messages); http-json: any JSON API;
    openai-chat and openai-completions: OpenAI-compatible generation (POST /v1/chat/completions or
    /v1/completions), streamed or not, with time to first token, the gaps between tokens and token counts
    measured (set payload.prompts and request.generation)."""
    method: Literal["POST", "PUT", "GET"] = "POST"
    """HTTP method (not used by oip-v2-grpc)."""
    path: Annotated[str, Field(max_length=1024, pattern=r"^/")] | None = None
    """Request path. Default: /v2/models/{model}/infer for oip-v2, / for http-json, /v1/chat/completions for
    openai-chat, /v1/completions for openai-completions. Not used by oip-v2-grpc, whose method is fixed."""
    model_name: Annotated[str, Field(max_length=256)] | None = None
    """Model name for oip-v2 paths, oip-v2-grpc calls and the `model` field of OpenAI requests. Default: the
    target ModelDeployment's served model name."""
    timeout: PositiveDuration = "30s"
    """A request slower than this counts as an error (with its latency recorded)."""
    headers: StringMap | None = None
    """Plain headers sent with every request (gRPC metadata for oip-v2-grpc, names in lower case). Put
    credentials in headersFrom instead."""
    headers_from: Annotated[list[SecretHeader], Field(max_length=16)] | None = None
    """Headers whose values come from Secrets (API keys, bearer tokens); gRPC metadata for oip-v2-grpc."""
    grpc: GrpcChannels | None = None
    """oip-v2-grpc: connections and streams per connection. Default: one connection, 100 streams."""
    generation: GenerationSpec | None = None
    """openai-chat and openai-completions: what each request asks the model to generate. Default: 128
    tokens, streamed, with usage."""


class DatasetSource(KaliperModel):
    """Request bodies, one per line. Set exactly one of configMap or file."""

    config_map: ConfigMapKeyReference | None = None
    """A ConfigMap key whose value holds one request body per line."""
    file: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    """A file on this machine; only `kaliper run` can use it."""
    order: Literal["sequential", "random"] = "sequential"
    """Send lines in file order (cycling) or in random order."""

    cross_field_rules = (exactly_one_of("config_map", "file"),)


class GeneratedTensors(KaliperModel):
    """Open Inference Protocol v2 requests generated from a tensor spec."""

    inputs: Annotated[list[TensorSpec], Field(min_length=1, max_length=16)]
    """Input tensors; a -1 dimension is filled with batchSize."""
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 1
    """Rows per request."""
    distribution: Literal["uniform", "normal", "zeros"] = "uniform"
    """How element values are drawn."""
    seed: Annotated[int, Field(ge=0)] | None = None
    """Random seed, for repeatable payloads."""


class LengthDistribution(KaliperModel):
    """A distribution of token counts, drawn once per prompt and clamped to [min, max]."""

    distribution: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    """fixed: always mean; uniform: between min and max; normal and lognormal: mean and stddev."""
    mean: Annotated[int, Field(ge=1, le=131072)]
    """Mean token count."""
    stddev: Annotated[float, Field(ge=0)] = 0
    """Standard deviation (normal, lognormal)."""
    min: Annotated[int, Field(ge=1, le=131072)] = 1
    """Smallest count drawn."""
    max: Annotated[int, Field(ge=1, le=131072)] | None = None
    """Largest count drawn. Default: 4 x mean (uniform needs it)."""

    cross_field_rules = (
        Rule(
            cel="!has(self.max) || self.max >= (has(self.min) ? self.min : 1)",
            message="max must not be below min",
            check=lambda s: s.max is None or s.max >= s.min,
            field_path=".max",
        ),
        Rule(
            cel="!has(self.distribution) || self.distribution != 'uniform' || has(self.max)",
            message="a uniform distribution needs max (and min, default 1)",
            check=lambda s: s.distribution != "uniform" or s.max is not None,
            field_path=".max",
        ),
    )


class SyntheticPrompts(KaliperModel):
    """Prompts made of the tokenizer's own words, each exactly as many tokens long as drawn, and different
    from the first token on (so the server's prefix cache does not serve them by accident)."""

    input_tokens: LengthDistribution
    """Prompt lengths in tokens (the text the template wraps; the server's count adds its chat template's)."""
    output_tokens: LengthDistribution | None = None
    """max_tokens of each request. Default: request.generation.maxTokens for every request."""
    shared_prefix_ratio: Annotated[float, Field(ge=0, le=1)] = 0
    """Share of every prompt that is the same leading text, to measure prefix caching on purpose."""
    count: Annotated[int, Field(ge=1, le=100000)] = 256
    """Distinct prompts made, then cycled."""
    seed: Annotated[int, Field(ge=0)] = 0
    """Seed of the words and lengths drawn."""


class TokenizerSource(KaliperModel):
    """The target model's tokenizer.json (Hugging Face tokenizers format), never fetched from a hub. Set
    exactly one of file or configMap."""

    file: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    """A file on this machine (kaliper run, python -m kaliper.loadgen)."""
    config_map: ConfigMapKeyReference | None = None
    """A ConfigMap key holding tokenizer.json (mounted into the load-generator pods)."""

    cross_field_rules = (exactly_one_of("file", "config_map"),)


class TraceSource(KaliperModel):
    """A request trace: when each request was sent and its token counts. Its prompts are made to those counts
    with the tokenizer; load.trace replays it on its own clock. Set exactly one of file or configMap."""

    file: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    """A file on this machine (kaliper run, python -m kaliper.loadgen)."""
    config_map: ConfigMapKeyReference | None = None
    """A ConfigMap key holding the trace (mounted into the load-generator pods)."""
    format: Literal["mooncake", "azure"]
    """mooncake: JSON Lines of {"timestamp": ms, "input_length", "output_length", "hash_ids"} (Mooncake's
    traces, as AIPerf reads them); azure: the CSV of TIMESTAMP,ContextTokens,GeneratedTokens (Azure's public
    LLM inference traces)."""
    block_tokens: Annotated[int, Field(ge=1, le=65536)] = 512
    """Tokens per hash id (mooncake): equal ids are equal blocks of the prompt, a prefix the server may cache."""

    cross_field_rules = (exactly_one_of("file", "config_map"),)


class PrometheusWorkload(KaliperModel):
    """The workload vLLM servers served, read from their own metrics in Prometheus when the run is planned
    (as `kaliper workload --from-prometheus` does): prompt and output lengths fitted to the servers' token
    histograms, the shared prefix to their prefix-cache hits, and (with load.fitted) the request rate and its
    burstiness. The fit is kept in status.workload and used by every trial."""

    url: HttpUrl | None = None
    """The Prometheus that scrapes the servers. Default: metrics.prometheus.url."""
    selector: Annotated[str, Field(max_length=1024)] = ""
    """Label matchers of the servers' series, such as 'model_name="llama",namespace="prod"'. Default: every
    vLLM series."""
    window: PositiveDuration = "1h"
    """How far back from the run's planning to read."""


class PromptSource(KaliperModel):
    """Prompts for openai-chat and openai-completions. Set exactly one of synthetic, dataset, trace or
    fromPrometheus."""

    synthetic: SyntheticPrompts | None = None
    """Prompts of drawn token lengths, made with the tokenizer (needs tokenizer)."""
    dataset: DatasetSource | None = None
    """JSON Lines, one request per line: {"prompt": "..."} or {"messages": [{"role": ..., "content": ...}]},
    with an optional "max_tokens"."""
    trace: TraceSource | None = None
    """Prompts of a trace's token counts (needs tokenizer), sent on the trace's clock (needs load.trace)."""
    from_prometheus: PrometheusWorkload | None = None
    """Synthetic prompts fitted to what the servers served (needs tokenizer), when the run is planned."""
    tokenizer: TokenizerSource | None = None
    """The model's tokenizer: makes synthetic and trace prompts, and counts tokens where the server sends no usage."""
    turns: Annotated[int, Field(ge=1, le=64)] = 1
    """Chat sessions (openai-chat): each user sends this many requests in a row, each carrying the session's
    earlier messages and the server's answers to them, then starts a new session; a failed turn ends its
    session. 1: every request stands alone."""
    history_keeps_reasoning: bool = False
    """Chat sessions with a reasoning model: whether the earlier answers a turn carries keep their thinking
    (as the assistant message's `reasoning`). Default false: only the answer, as chat clients send it."""

    cross_field_rules = (
        exactly_one_of("synthetic", "dataset", "trace", "from_prometheus"),
        Rule(
            cel="(!has(self.synthetic) && !has(self.trace) && !has(self.fromPrometheus)) || has(self.tokenizer)",
            message="synthetic, trace and fitted prompts are made to exact token counts with the model's tokenizer; "
            "set prompts.tokenizer.file (or configMap) to its tokenizer.json",
            check=lambda s: (
                (s.synthetic is None and s.trace is None and s.from_prometheus is None) or s.tokenizer is not None
            ),
            field_path=".tokenizer",
        ),
        Rule(
            cel="!has(self.trace) || !has(self.turns) || self.turns == 1",
            message="a trace's rows are single requests: remove turns (or set it to 1)",
            check=lambda s: s.trace is None or s.turns == 1,
            field_path=".turns",
        ),
    )


class Payload(KaliperModel):
    """What each request carries. Set exactly one of inline, dataset, tensors or prompts."""

    inline: Annotated[str, Field(max_length=262144)] | None = None
    """The same body for every request."""
    dataset: DatasetSource | None = None
    """One request body per line, as the Azure ML profiler takes them."""
    tensors: GeneratedTensors | None = None
    """Bodies generated from a tensor spec (oip-v2 only)."""
    prompts: PromptSource | None = None
    """Prompts for generation requests (openai-chat, openai-completions only)."""
    content_type: Annotated[str, Field(max_length=256)] = "application/json"
    """Content-Type header of the requests."""

    cross_field_rules = (exactly_one_of("inline", "dataset", "tensors", "prompts"),)


class RampShape(KaliperModel):
    """How a ramp moves over maxDuration, and the parts the report gives figures for."""

    shape: Literal["linear", "stepped"] = "linear"
    """linear: the level moves steadily; stepped: it holds each of `segments` levels, evenly spaced from the
    start to `to`, for an equal part of maxDuration."""
    segments: Annotated[int, Field(ge=2, le=100)] = 4
    """The equal parts of maxDuration the report gives figures for (a stepped ramp's steps). Each should hold
    a measurement window (1 s) or more."""


class UserRamp(RampShape):
    """Users that come and go during the measurement, from closedLoop.concurrency (or a concurrency sweep's
    level; held through the warm-up) to `to` over maxDuration, and reported per segment."""

    to: Annotated[int, Field(ge=1, le=100000)]
    """Concurrent users at the end of the measurement (above concurrency for a ramp up, below for one down)."""


class ClosedLoop(KaliperModel):
    """A fixed number of users, each sending its next request when the previous answer arrives."""

    concurrency: Annotated[int, Field(ge=1, le=100000)]
    """Concurrent users."""
    think_time: Duration = "0s"
    """Pause between a user's answer and its next request."""
    ramp: UserRamp | None = None
    """Move the number of users during the measurement (linear: rounded to whole users as it goes). A ramp
    is measured for its whole length: set maxDuration, not stopping."""


class Ramp(RampShape):
    """A rate that moves during the measurement, from openLoop.rate (or a rate sweep's level; held through the
    warm-up) to `to` over maxDuration, and reported per segment."""

    to: Annotated[float, Field(gt=0, le=1000000)]
    """Requests per second at the end of the measurement (above rate for a ramp up, below for a ramp down)."""


class TraceReplay(KaliperModel):
    """Replay payload.prompts.trace on its own clock: each row's time is its request's intended send time
    (open loop: latency from it, late sends counted), split across processes and workers so the schedule
    holds. The warm-up is the replay's first part; the stage ends when the replay has sent its last request
    and those answers are in (or maxDuration)."""

    speedup: Annotated[float, Field(gt=0, le=1000)] = 1
    """Play the trace this many times faster (2: every gap halved)."""
    start: Duration = "0s"
    """Where in the trace the replay starts (the trace's time, from its first request)."""
    duration: PositiveDuration | None = None
    """How much of the trace to replay, in the trace's time. Default: to its end."""
    loop: bool = False
    """Start again from the window's start when it ends, until maxDuration."""
    conversations: bool = False
    """Replay each session (rows that share a "session_id", mooncake traces) as a conversation with the
    server (openai-chat): its first turn at its time on the trace's clock, each later turn by the same user
    its delay after the session's previous answer came in (the row's "delay", or its gap from the session's
    row before), sent after the session's earlier questions and the server's own answers, its new question
    the tokens its input_length adds to that history (the turn before's input and output lengths). A turn's
    latency counts from that answer's end plus the delay; a failed turn ends its conversation. Default:
    every row at its time on the trace's clock, each prompt whole (its hash ids the shared prefix)."""
    max_connections: Annotated[int, Field(ge=1, le=100000)] | None = None
    """Connections the generator may open. Default: the most requests the replay sends in one second, and
    with conversations one more for each conversation under way at once; at least 16 and at most 2000."""


class OpenLoop(KaliperModel):
    """Requests sent on a schedule, whatever the server does; latency counts from the intended send time."""

    rate: Annotated[float, Field(gt=0, le=1000000)]
    """Requests per second."""
    arrival: Literal["constant", "poisson", "gamma"] = "constant"
    """Evenly spaced sends, a Poisson process with the same mean rate, or gamma-distributed gaps whose
    burstiness sets how bursty (vLLM's and AIPerf's gamma arrivals)."""
    burstiness: Annotated[float, Field(gt=0, le=100)] | None = None
    """Gamma arrivals only: the gaps' shape. 1 is a Poisson process; below 1 burstier (the gaps' coefficient
    of variation is 1/sqrt(burstiness): 0.25 gives 2), above 1 more even. Default 1."""
    max_connections: Annotated[int, Field(ge=1, le=100000)] | None = None
    """Connections the generator may open. Default: enough for the rate and the SLO latency."""
    ramp: Ramp | None = None
    """Move the rate during the measurement (the arrivals keep their kind at every rate). A ramp is measured
    for its whole length: set maxDuration, not stopping."""

    cross_field_rules = (
        only_with(
            "burstiness",
            "arrival",
            "gamma",
            message="burstiness shapes gamma arrivals: set arrival: gamma, or remove burstiness",
        ),
    )


class FittedArrivals(KaliperModel):
    """Open-loop arrivals at the rate and burstiness payload.prompts.fromPrometheus fits when the run is planned
    (gamma arrivals, or Poisson where the fit cannot tell them from it)."""

    scale: Annotated[float, Field(gt=0, le=1000)] = 1
    """Times the fitted rate: 2 asks what twice today's traffic needs. The rate is the window's average over
    every matching server: a run that profiles one replica of several wants 1/replicas."""
    max_connections: Annotated[int, Field(ge=1, le=100000)] | None = None
    """Connections the generator may open. Default: enough for the rate and the SLO latency."""


class StoppingRule(KaliperModel):
    """Stop before maxDuration once the measurement is stable and precise enough (never before minDuration)."""

    window: PositiveDuration = "5s"
    """Length of one measurement window."""
    stable_windows: Annotated[int, Field(ge=2, le=50)] = 3
    """Consecutive windows whose throughput and latency must agree."""
    tolerance: Annotated[float, Field(gt=0, le=1)] = 0.1
    """How far (as a fraction) those windows may differ and still agree."""
    percentile: Annotated[float, Field(gt=0, lt=100)] = 99
    """The percentile whose confidence interval must be narrow."""
    metric: StreamingMetric = "latency"
    """Whose percentile: the whole request's latency, or (streamed generation) ttft, itl or tpot."""
    max_relative_ci_width: Annotated[float, Field(gt=0, le=1)] = 0.05
    """Widest acceptable confidence interval of that percentile, relative to its value."""


def _duration_or_default(alias: str, default: str) -> str:
    return f"duration(has(self.{alias}) ? self.{alias} : '{default}')"


class LoadSpec(KaliperModel):
    """The load each trial applies. Set exactly one of closedLoop, openLoop, trace or fitted."""

    closed_loop: ClosedLoop | None = None
    """Closed-loop load: a fixed number of concurrent users."""
    open_loop: OpenLoop | None = None
    """Open-loop load: a target arrival rate, corrected for coordinated omission."""
    trace: TraceReplay | None = None
    """Open-loop load on a trace's clock (payload.prompts.trace), corrected for coordinated omission."""
    fitted: FittedArrivals | None = None
    """Open-loop load at the rate and burstiness fitted from Prometheus (payload.prompts.fromPrometheus)."""
    warmup: Duration = "10s"
    """Load applied before measuring starts; excluded from every figure."""
    min_duration: PositiveDuration = "30s"
    """Shortest measurement, even when the stopping rule is satisfied earlier."""
    max_duration: PositiveDuration = "5m"
    """Longest measurement; the run always stops by then."""
    graceful_stop: Duration | None = None
    """When measuring ends, no request starts and those in flight are awaited this long at most (k6's
    gracefulStop), then recorded with their real figures; only what is still unanswered after it counts as
    beyond every latency bound. Default: request.timeout, at most 30s. 0s counts them unanswered at once."""
    stopping: StoppingRule | None = None
    """Stop early once stable. Default: measure for maxDuration."""
    workers: Annotated[int, Field(ge=0, le=256)] = 0
    """Distributed Locust workers (a master plus this many worker pods); 0 runs a single generator."""
    processes: Annotated[int, Field(ge=1, le=64)] = 1
    """Generator processes per pod (or on this machine), for more load per node."""
    repetitions: Annotated[int, Field(ge=1, le=10)] = 1
    """Measure each load level this many times back to back, each with its own warm-up, against the same
    server. The report lists every repetition and their spread; the median one (by throughput) gives the
    trial's figures, and repetitions that disagree on the SLO make the trial Inconclusive."""

    @property
    def ramp(self) -> Ramp | UserRamp | None:
        """The ramp of the open or closed loop, if it has one."""
        if self.open_loop is not None:
            return self.open_loop.ramp
        return self.closed_loop.ramp if self.closed_loop is not None else None

    cross_field_rules = (
        exactly_one_of("closed_loop", "open_loop", "trace", "fitted"),
        Rule(
            cel="!has(self.trace) || !has(self.stopping)",
            message="a trace is measured for its whole replay: remove stopping (cut the replay with trace.duration)",
            check=lambda s: s.trace is None or s.stopping is None,
            field_path=".stopping",
        ),
        Rule(
            cel="((!has(self.openLoop) || !has(self.openLoop.ramp)) && "
            "(!has(self.closedLoop) || !has(self.closedLoop.ramp))) || !has(self.stopping)",
            message="a ramp is measured for its whole length (maxDuration): remove stopping, or the ramp",
            check=lambda s: s.ramp is None or s.stopping is None,
            field_path=".stopping",
        ),
        Rule(
            cel=f"{_duration_or_default('minDuration', '30s')} <= {_duration_or_default('maxDuration', '5m')}",
            message="minDuration must not exceed maxDuration (defaults 30s and 5m); lower one or raise the other",
            check=lambda s: parse_duration(s.min_duration) <= parse_duration(s.max_duration),
            field_path=".minDuration",
        ),
    )


def _sweep_list(item: Any) -> Any:
    return set_of(item, 32)  # a sweep's values along one axis


class EngineSettings(KaliperModel):
    """One value of the sweep's engineArgs axis: the serving runtime's own command-line flags, added after
    runtime.args for the configurations that try it (on Kubernetes and under `kaliper run` alike)."""

    name: Name
    """Shown as the configuration's engine_args parameter, such as kv-q8."""
    args: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=64)]
    """Flags and their values, such as ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0"]; empty: the runtime's
    own defaults. A flag the runtime does not accept, or one Kaliper sets from a field (the slots, the context,
    the threads), is refused before any trial, naming it."""


class ModelVariant(KaliperModel):
    """A named alternative model, such as an optimized candidate from a ModelOptimization."""

    name: Name
    """Variant name, shown in the report."""
    model: ModelSource
    """Where this variant's model comes from."""


# A copy of a workload's pod template varies what Kubernetes sets on any pod; the rest configures Kaliper's
# own serving runtimes.
WORKLOAD_SWEEP_FIELDS = ("cpu", "memory", "gpu", "gpu_resource", "replicas")


# In the order a trial's parameters are listed.
DEPLOYMENT_SWEEP_FIELDS = (
    "cpu",
    "memory",
    "gpu",
    "gpu_resource",
    "replicas",
    "batch_size",
    "threads",
    "slots",
    "context_size",
    "prefix_caching",
    "runtime",
    "model_variants",
    "engine_args",
    "autoscaling",
    "protocol",
)


class SweepSpec(KaliperModel):
    """The values to try. Every combination is a trial (the search strategy may skip some)."""

    cpu: _sweep_list(CpuQuantity) | None = None
    """CPU per replica; each value sets both the request and the limit."""
    memory: _sweep_list(MemoryQuantity) | None = None
    """Memory per replica; each value sets both the request and the limit."""
    gpu: _sweep_list(Annotated[int, Field(ge=0, le=16)]) | None = None
    """GPUs per replica (of the deployment's gpu.resourceName)."""
    gpu_resource: _sweep_list(Annotated[str, Field(max_length=253, pattern=RESOURCE_NAME_PATTERN)]) | None = None
    """GPU kinds as extended resource names, such as MIG profiles nvidia.com/mig-1g.10gb and
    nvidia.com/mig-3g.40gb against a whole nvidia.com/gpu (resources.gpu.resourceName)."""
    replicas: _sweep_list(Annotated[int, Field(ge=1, le=1000)]) | None = None
    """Replica counts."""
    batch_size: _sweep_list(Annotated[int, Field(ge=1, le=4096)]) | None = None
    """Server-side maximum batch sizes (1 turns batching off); for the LLM runtimes, tokens per batch
    (llamacpp's llm.batchSize, llm.maxBatchedTokens for vllm, sglang and tgi)."""
    threads: _sweep_list(Annotated[int, Field(ge=1, le=256)]) | None = None
    """Intra-op thread counts (llama.cpp's --threads for llamacpp)."""
    slots: _sweep_list(Annotated[int, Field(ge=1, le=4096)]) | None = None
    """LLM runtimes: sequences served at once (llm.slots: llama.cpp's slots, vLLM's max-num-seqs, ...)."""
    context_size: _sweep_list(Annotated[int, Field(ge=1, le=4194304)]) | None = None
    """llamacpp: context tokens of the server, split among its slots (llm.contextSize); vllm, sglang and
    tgi: the longest sequence (llm.maxModelLength)."""
    prefix_caching: _sweep_list(bool) | None = None
    """vllm, sglang, tgi: prefix caching on and off (llm.prefixCaching), such as [true, false]."""
    runtime: _sweep_list(RuntimeType) | None = None
    """Serving runtimes."""
    model_variants: named_list(ModelVariant, 16, fewest=1) | None = None
    """Alternative models (for example ModelOptimization candidates)."""
    engine_args: named_list(EngineSettings, 16, fewest=1) | None = None
    """Settings of the serving runtime's own that Kaliper has no field for (llama.cpp's KV-cache types or flash
    attention, vLLM's chunked prefill or KV-cache dtype): each a named set of flags, one configuration each."""
    autoscaling: named_list(AutoscalerSettings, 16, fewest=1) | None = None
    """Autoscaler settings to rehearse (the target must have spec.autoscaling): each a named set laid over the
    target's, one configuration each; the cheapest whose SLO holds over the load's shape is chosen, priced for
    the replicas it held."""
    protocol: _sweep_list(Literal["oip-v2", "oip-v2-grpc"]) | None = None
    """The Open Inference Protocol's faces to compare: oip-v2 (REST) and oip-v2-grpc. Each is a trial of
    its own against its own deployment, the requests built from the same payload; the runtime must serve
    both (onnxruntime, mlserver, triton)."""
    concurrency: _sweep_list(Annotated[int, Field(ge=1, le=100000)]) | None = None
    """Load levels as concurrent users (closed loop), tried from lowest to highest."""
    rate: _sweep_list(Annotated[float, Field(gt=0, le=1000000)]) | None = None
    """Load levels as requests per second (open loop), tried from lowest to highest."""

    def deployment_parameters(self) -> list[str]:
        """The deployment fields this sweep varies (load levels excluded)."""
        return [name for name in DEPLOYMENT_SWEEP_FIELDS if getattr(self, name) is not None]


class CapacitySearch(KaliperModel):
    """How closely each configuration's capacity (the highest load at which it meets the SLO) is narrowed
    beyond the listed load levels: between the highest level that met the SLO and the next one that did not,
    probes bisect the gap, each judged by the same stopping rule, until it is no wider than `resolution`."""

    probes: Annotated[int, Field(ge=0, le=8)] | None = None
    """Extra trials per configuration (default: 2 for the knee search, 0 for a grid; optuna does not probe)."""
    resolution: Annotated[float, Field(gt=0)] | None = None
    """Stop when the gap between met and not met is at most this, in the level's own unit (default: 1 for
    concurrency, which probes whole numbers; 5% of the met level for rates)."""


DEFAULT_CAPACITY_PROBES = {"knee": 2, "grid": 0, "optuna": 0}


class TieBreak(KaliperModel):
    """Measuring again where the choice is decided: when the two cheapest configurations that met the SLO cost
    the same within the measurement noise (and the noise, wider than recommendation.tieTolerance, makes the
    tie), both are measured again, in alternating order so that drift hits both, and the choice is made from
    every measurement of each, until it is clear, the two are shown equal within the tolerance, or the budget
    is spent. A choice cheaper beyond the noise but by less than twice it, from one trial of each, is
    confirmed by one such round first."""

    budget: PositiveDuration | None = None
    """Load time (warm-ups included) the extra trials may take in all, such as 2m; unset: no tie-break, a
    tie is reported as measured. A round that starts inside the budget finishes."""
    rounds: Annotated[int, Field(ge=1, le=4)] = 2
    """Rounds at most; each measures both configurations once more."""


class SearchSpec(KaliperModel):
    """How configurations are chosen from the sweep."""

    strategy: Literal["grid", "knee", "optuna"] = "grid"
    """grid: every combination; knee: per configuration, the highest load level that meets the SLO,
    skipping configurations that cannot win on cost; optuna: a TPE search over the sweep."""
    max_trials: Annotated[int, Field(ge=1, le=1000)] = 100
    """Upper bound on trials: a grid larger than this is refused before anything starts; optuna samples this
    many."""
    parallelism: Annotated[int, Field(ge=1, le=32)] = 1
    """Trials run at the same time (Kubernetes only; `kaliper run` runs one at a time)."""
    seed: Annotated[int, Field(ge=0)] | None = None
    """Random seed for optuna."""
    capacity: CapacitySearch = Field(default_factory=CapacitySearch)
    """Narrowing each configuration's capacity between the listed load levels (knee and grid)."""
    tie_break: TieBreak = Field(default_factory=TieBreak)
    """Measuring the two cheapest configurations again when their costs tie within the noise."""

    def capacity_probes(self) -> int:
        """Probes per configuration: the spec's, else the strategy's default (optuna samples, it never probes)."""
        if self.strategy == "optuna":
            return 0
        return self.capacity.probes if self.capacity.probes is not None else DEFAULT_CAPACITY_PROBES[self.strategy]


class LatencyObjective(KaliperModel):
    """A latency bound at a percentile, such as p99 under 250ms."""

    percentile: Annotated[float, Field(gt=0, lt=100)]
    """The percentile, such as 50, 95, 99 or 99.9."""
    max: PositiveDuration
    """The bound, such as 250ms."""
    measure: Literal["corrected", "service"] = "corrected"
    """corrected: from the intended send time (what users see under open-loop load); service: from the
    actual send."""
    metric: StreamingMetric = "latency"
    """latency: the whole request; ttft, itl and tpot (streamed generation only): time to first token, every
    gap between successive content chunks, and time per output token. ttft is corrected like latency under
    open loop; itl and tpot do not depend on when a request was meant to leave."""

    def bound(self) -> Bound:
        """The objective parsed once, as the stopping rule and the verdict judge it."""
        return Bound(self.metric, self.percentile, parse_duration(self.max), self.measure == "corrected")


class RegressionTolerance(KaliperModel):
    """How much worse than the baseline run a figure may get before this run fails, as a fraction of the
    baseline's value. A figure counts as worse only when its 95% interval and the baseline's, each at least 4%
    wide on either side (how much a rerun moves), do not overlap (see `kaliper compare`); these tolerances then
    ignore changes too small to matter."""

    default: Annotated[float, Field(ge=0)] = 0.05
    """For every figure not named below."""
    throughput: Annotated[float, Field(ge=0)] | None = None
    """Requests (and output tokens) per second."""
    latency: Annotated[float, Field(ge=0)] | None = None
    """Latency p50 and p99."""
    ttft: Annotated[float, Field(ge=0)] | None = None
    """Time to first token, p50 and p99."""
    ttfot: Annotated[float, Field(ge=0)] | None = None
    """Time to first output token (after a reasoning model's thinking), p50 and p99."""
    itl: Annotated[float, Field(ge=0)] | None = None
    """Inter-token latency (the gaps between chunks), p50 and p99."""
    tpot: Annotated[float, Field(ge=0)] | None = None
    """Time per output token, p50 and p99."""
    error_rate: Annotated[float, Field(ge=0)] | None = None
    """The share of requests that failed."""
    cost: Annotated[float, Field(ge=0)] | None = None
    """Money per million requests (output tokens)."""
    quality: Annotated[float, Field(ge=0)] | None = None
    """A configuration's score on the quality dataset (spec.quality)."""

    def for_figure(self, family: str) -> float:
        """The tolerance of a family of figures of kaliper.profiling.comparison (such as "ttft" for ttft p50 and
        p99): its field where set, else the default."""
        found = getattr(self, family, None) if family in type(self).model_fields else None
        return found if isinstance(found, float) else self.default


class SloSpec(KaliperModel):
    """What a configuration must achieve. A trial meets the SLO when every objective set here holds."""

    latency: Annotated[list[LatencyObjective], Field(min_length=1, max_length=8)] | None = None
    """Latency bounds at percentiles."""
    max_error_rate: Annotated[float, Field(ge=0, le=1)] | None = None
    """Largest acceptable share of failed requests (0.01 = 1%)."""
    min_throughput: Annotated[float, Field(gt=0)] | None = None
    """Requests per second a trial must sustain."""
    min_goodput_share: Annotated[float, Field(gt=0, le=1)] | None = None
    """Generation: the share of requests that must meet every latency objective on their own (each request's
    time to first token, largest gap and time per token against the bounds), such as 0.95. Met when the 95%
    interval of the measured share is above it, NotMet when below, Inconclusive between."""
    target_throughput: Annotated[float, Field(gt=0)] | None = None
    """The traffic to serve, in requests per second: sizes the recommended replica count and the cost."""
    target_output_tokens_per_second: Annotated[float, Field(gt=0)] | None = None
    """Generation: the traffic to serve, in generated tokens per second; sizes the recommended replica count
    (with targetThroughput too, the larger count)."""
    fail_if_regressed: RegressionTolerance | None = None
    """With spec.baseline: a figure worse than the baseline's beyond the noise and by more than its tolerance
    fails the run (Stalled, reason Regressed, the figure named; `kaliper run` exits 1), as failIfNotMet does
    for the SLO. `{}` takes the default tolerance, 5%, for every figure."""

    cross_field_rules = (
        Rule(
            cel="has(self.latency) || has(self.maxErrorRate) || has(self.minThroughput)",
            message="an SLO needs at least one objective: latency, maxErrorRate or minThroughput",
            check=lambda s: s.latency is not None or s.max_error_rate is not None or s.min_throughput is not None,
        ),
        only_with(
            "min_goodput_share",
            "latency",
            message="goodput counts the requests that meet every latency objective; add slo.latency (such as "
            "{metric: ttft, percentile: 90, max: 500ms}) or remove minGoodputShare",
        ),
    )


class BaselineSource(KaliperModel):
    """A finished run to compare this one with, figure by figure (as `kaliper compare` does). Set exactly one."""

    run: Name | None = None
    """A finished ProfileRun: on Kubernetes, one in the same namespace (its report ConfigMap); under `kaliper
    run`, the report of a run of that name in ./kaliper-reports/<name>/."""
    config_map: ConfigMapKeyReference | None = None
    """Kubernetes: a ConfigMap key holding a report (as Kaliper stores them, plain or gzipped), such as one
    kept in Git."""
    report: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    """`kaliper run`: a report.json file, relative to the manifest's folder."""

    cross_field_rules = (exactly_one_of("run", "config_map", "report"),)

    def describe(self) -> str:
        if self.run is not None:
            return f"ProfileRun {self.run}"
        if self.config_map is not None:
            return f"ConfigMap {self.config_map.name} key {self.config_map.key}"
        return f"report {self.report}"


class PrometheusSource(KaliperModel):
    """A Prometheus that scrapes the kubelets' cAdvisor (and dcgm-exporter for GPUs)."""

    url: HttpUrl
    """Base URL, such as http://prometheus-operated.monitoring:9090."""
    scrape_interval: PositiveDuration = "30s"
    """How often it scrapes cAdvisor (kube-prometheus-stack: 30s). Kaliper waits for the scrape after each load
    window; a window needs two samples, which cAdvisor stamps up to 15s before the scrape: measure for at least
    twice this interval plus 15s (90s at 30s)."""
    timeout: PositiveDuration = "10s"
    """Timeout of each query."""


class DcgmSpec(KaliperModel):
    """GPU metrics from NVIDIA dcgm-exporter through Prometheus (NVML under `kaliper run`)."""

    enabled: bool = False
    """Query GPU utilisation, memory, power and energy for trials that request GPUs."""
    pod_label: Literal["auto", "pod", "pod_name", "exported_pod"] = "auto"
    """Label that names the pod on DCGM series; auto checks which one the series carry."""
    profiling_metrics: bool = False
    """Also query DCGM_FI_PROF_GR_ENGINE_ACTIVE and DCGM_FI_PROF_SM_ACTIVE (needs the profiling module)."""


class CustomQuery(KaliperModel):
    """An extra PromQL query reported with each trial."""

    name: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")]
    """Name of the figure in the report."""
    query: Annotated[str, Field(min_length=1, max_length=4096)]
    """PromQL; {namespace}, {pod} (a regex of the trial's pods) and {window} (such as 60s) are filled in."""
    unit: Annotated[str, Field(max_length=32)] = ""
    """Unit shown beside the value."""
    aggregate: Literal["avg", "max", "min", "last"] = "avg"
    """How the series over the trial window becomes one figure."""


class MetricsSpec(KaliperModel):
    """Where resource figures come from."""

    prometheus: PrometheusSource | None = None
    """Prometheus for CPU, memory, throttling, restarts and GPU figures on Kubernetes."""
    dcgm: DcgmSpec | None = None
    """GPU metrics."""
    custom_queries: named_list(CustomQuery, 32) | None = None
    """Extra PromQL figures."""
    sample_interval: PositiveDuration = "1s"
    """How often `kaliper run` samples cgroup accounting (and NVML)."""

    cross_field_rules = (
        only_with(
            "custom_queries",
            "prometheus",
            message="customQueries run on Prometheus; set prometheus.url or remove customQueries",
        ),
    )


class CostModel(KaliperModel):
    """Prices that turn resource use into money (leave a price out to count it as free)."""

    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")] = "USD"
    """ISO 4217 currency code."""
    per_core_hour: Annotated[float, Field(ge=0)] = 0.0
    """Price of one CPU core for one hour."""
    per_gib_hour: Annotated[float, Field(ge=0)] = 0.0
    """Price of one GiB of memory for one hour."""
    per_gpu_hour: Annotated[float, Field(ge=0)] = 0.0
    """Price of one GPU (or MIG slice) for one hour."""


class RecommendationSpec(KaliperModel):
    """How measured usage becomes requests and limits (the Vertical Pod Autoscaler's method)."""

    cpu_percentile: Annotated[float, Field(gt=0, le=100)] = 90
    """Percentile of CPU usage samples the CPU request is based on."""
    safety_margin: Annotated[float, Field(ge=0, le=5)] = 0.15
    """Margin added on top (0.15 = +15%)."""
    memory_limit_headroom: Annotated[float, Field(ge=0, le=5)] = 0.2
    """Memory limit above the recommended request (taken from peak usage)."""
    tie_tolerance: Annotated[float, Field(ge=0, le=1)] = 0.05
    """Trials whose costs per request differ by less than this fraction (or than their measured throughput
    noise, if larger) tie; the one with more latency headroom wins, among those measured undisturbed."""
    update_mode: Literal["Off", "Apply"] = "Off"
    """Off: the recommendation is only reported (status.recommendation.mergePatch, `kaliper recommend`), as
    the Vertical Pod Autoscaler's updateMode Off. Apply: once the run succeeds, the operator patches the target
    ModelDeployment (target.deploymentRef) with it and records an Event; never a target that Argo CD or Flux
    manages (it would be undone at the next sync: commit the patch instead) unless applyToGitOpsManaged."""
    apply_to_git_ops_managed: bool = False
    """With updateMode Apply, patch the target even when Argo CD or Flux manages it."""


class ReportSpec(KaliperModel):
    """Which report files to write."""

    formats: set_of(Literal["json", "html", "table"], 3) = Field(default_factory=lambda: ["json", "html", "table"])
    """json: the full report; html: plots that open offline; table: printed to the terminal."""
    directory: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    """Where `kaliper run` writes report files. Default: ./kaliper-reports/<name>."""
    include_time_series: bool = True
    """Keep per-window and resource time series in the full report."""
    keep_for: Duration | None = None
    """On a cluster, how long the report ConfigMap (`<run>-report`) outlives its run, from when the run
    finished: it is written without an owner, so deleting the run (by hand, spec.ttl, a Cleanup or a GitOps
    tool) leaves it, and `kaliper report RUN` still reads it; `kaliper gc` lists it once that time has passed.
    Default: it goes with the run."""


class TtlSpec(KaliperModel):
    """When a finished run (a ProfileRun or a ModelOptimization) is deleted, with everything it created."""

    after_success: Duration | None = None
    """Time after success. Default: kept until deleted."""
    after_failure: Duration | None = None
    """Time after failure. Default: kept until deleted."""
    delete_git_ops_managed: bool = False
    """Whether the ttl also deletes a run that Argo CD or Flux manages (their tracking annotation or labels).
    Default false: such a run is kept, with a Retained condition saying why, since the tool would create it
    again and its load test would run again."""
