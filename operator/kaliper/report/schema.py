"""The load-test results document (versioned), written by the load generator and embedded in reports."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from kaliper.api.base import KaliperModel
from kaliper.api.modeldeployment import ProductionStatus
from kaliper.api.profilerun import (
    BaselineComparison,
    Capacity,
    FittedWorkload,
    ResourceUsage,
    RunVerdict,
    SloSpec,
    SloVerdict,
)

# v2 added a stage's `tokens` (generation requests) and `resent`; a v1 document is read as it is.
LOADTEST_SCHEMA = "kaliper.dev/loadtest/v2"


class PercentileFigure(KaliperModel):
    """One percentile, with the number of samples behind it and its confidence interval."""

    percentile: float
    value_ms: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    """Absent when there are too few samples to bound this percentile from above."""
    count: int = 0
    confidence: float = 0.95


class LatencyFigures(KaliperModel):
    """A latency distribution: summary figures and the encoded HDR histogram they came from."""

    count: int = 0
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    percentiles: list[PercentileFigure] = Field(default_factory=list)
    histogram: str | None = None
    """HdrHistogram (3 significant digits, microseconds), compressed and base64-encoded: merge it exactly."""

    def at(self, percentile: float) -> PercentileFigure | None:
        return next((p for p in self.percentiles if p.percentile == percentile), None)


class Stretch(KaliperModel):
    """What came of one stretch of a stage: a measurement window or a ramp's segment."""

    index: int
    start_s: float
    """Seconds from the start of the stage (a window) or of the measurement, after the warm-up (a ramp's
    segment)."""
    requests: int
    """Requests that ended in the stretch, answered or failed."""
    errors: int
    throughput_rps: float
    """Successful requests per second."""
    p50_ms: float | None = None
    p99_ms: float | None = None
    """From the intended send time (corrected for coordinated omission), as the stage's latency."""
    late_sends: int = 0
    """Open loop: sends that left late, as the stage's lateSends counts them."""


class WindowResult(Stretch):
    """One measurement window: the time series behind the stopping rule."""

    warmup: bool
    scheduled: int | None = None
    """A replayed trace: the sends its clock asked for in this window (the trace's own rate over time)."""
    good: int | None = None
    """Requests answered within every latency objective of the SLO, as their users saw them (from the intended
    send under open loop): the window's SLO attainment is good / requests. Absent without latency
    objectives."""


class RampSegment(Stretch):
    """One equal part of a ramp's measurement (openLoop.ramp or closedLoop.ramp): the rate or the users it asked
    for and what came of it."""

    duration_s: float
    intended_rps: float | None = None
    """Open loop: the ramp's mean rate over the segment."""
    intended_users: float | None = None
    """Closed loop: the ramp's users over the segment (a linear ramp's mean, before rounding to whole users)."""


class GeneratorUsage(KaliperModel):
    """The load generator's own CPU over the measured windows: a generator near its capacity cannot send
    on time, and what it measures is its own limit, not the target's."""

    cpu_cores: float
    """Cores the generator's processes used on average (every process of this run)."""
    capacity_cores: float
    """Cores it could use: one per process (Python runs one thread at a time), at most the CPUs it may run
    on and its cgroup's quota."""

    @property
    def saturation(self) -> float:
        return self.cpu_cores / self.capacity_cores if self.capacity_cores > 0 else 0.0


class Backoffs(KaliperModel):
    """Closed loop: users waiting after failures before sending again (none after a single failure, then each
    wait drawn between 50 ms and three times the one before, up to 2 s, or the server's Retry-After up to
    30 s), as real clients do."""

    waits: int
    seconds: float
    """Their waits added up (over every user)."""
    retry_after: int = 0
    """Waits the server asked for with Retry-After."""


class LateSends(KaliperModel):
    """Open loop only: sends that left more than 1 ms after their intended time."""

    count: int = 0
    share: float = 0.0
    no_free_connection: int = 0
    """Late because every connection was busy (raise maxConnections)."""
    generator_lag: int = 0
    """Late although a connection was free: the generator could not keep up (add processes or workers), or,
    using under half the CPU it can, waited for the machine to wake it (the reason says which)."""
    flagged: bool = False
    """More than 1% of sends were late: the corrected latency is a lower bound."""
    reason: str | None = None


class ServerComparison(KaliperModel):
    """One figure counted both by the server (on its metrics endpoint) and by the generator."""

    figure: str
    definition: str
    server: float
    generator: float
    difference: float | None = None
    """(generator - server) / server; absent where the server counted zero."""


class ServerCheck(KaliperModel):
    """The generator's figures checked against the server's own, read at the edges of the measured
    interval (kaliper.loadgen.server_metrics says which counters and how each server updates them)."""

    url: str
    source: str | None = None
    """llama.cpp or vLLM; absent when the check could not be made."""
    comparisons: list[ServerComparison] = Field(default_factory=list)
    unavailable: str | None = None
    """Why there is no check (no metrics endpoint, unknown metrics)."""


class ServerLoad(KaliperModel):
    """How busy the generation server was over the measured interval, from its own gauges read at every
    window edge (kaliper.loadgen.server_metrics names each server's metrics). Absent figures: the server
    does not export them."""

    source: str
    """llama.cpp, vLLM, SGLang or TGI."""
    read_from: Literal["endpoint", "prometheus"] = "endpoint"
    """endpoint: the load generator read the server's metrics endpoint at every window edge (on a cluster
    through the Service, one replica per read); prometheus: Prometheus's scrapes of every server pod inside
    the window (kaliper.metrics.server_load)."""
    samples: int
    """Readings of the gauges: one per window edge (endpoint), or the fewest scrapes of any pod inside the
    window (prometheus)."""
    pods: int | None = None
    """prometheus: the server pods whose scrapes were read (every replica of the trial); endpoint: not known
    (a Service answers from one replica per read)."""
    running_mean: float | None = None
    running_max: float | None = None
    """Requests being generated (llama.cpp: requests_processing; vLLM: num_requests_running)."""
    waiting_mean: float | None = None
    waiting_max: float | None = None
    """Requests queued in the server for a free slot (llama.cpp: requests_deferred; vLLM:
    num_requests_waiting; SGLang: num_queue_reqs; TGI: queue_size)."""
    running_time_weighted: float | None = None
    waiting_time_weighted: float | None = None
    """vLLM: requests running and queued on average over every moment of the interval, by the server's own
    clocks: the seconds its finished requests spent running (request_inference_time_seconds_sum) or queued
    (request_queue_time_seconds_sum), risen over the interval, divided by its length (Little's law; a request
    counts when it finishes, so one under way at an edge moves its time across it; one slot read 1.06-1.08
    over 10 s here, consecutive requests' stamped times overlapping a little). The gauges' mean above is a few
    readings; this one misses no moment."""
    busy_slots_per_decode: float | None = None
    """llama.cpp: slots busy per decode call over the interval (how full its batches were)."""
    kv_cache_usage_max: float | None = None
    """Highest share of the KV cache in use (vLLM: kv_cache_usage_perc; SGLang: token_usage), 0-1."""
    preemptions: float | None = None
    """vLLM: sequences preempted (their KV cache evicted) over the interval."""
    prefix_cache_hit_rate: float | None = None
    """vLLM: of the prompt tokens looked up in its prefix cache over the interval, the share found there
    (prefix_cache_hits / prefix_cache_queries), 0-1."""


class TokenFigures(KaliperModel):
    """Generation requests (openai-chat, openai-completions): the token stream's figures. Each latency
    figure says what it measures; every percentile carries its sample count and 95% interval."""

    ttft: LatencyFigures
    """Time to first token: until the first chunk carrying generated content arrived (a chunk with only the
    role is not a token). Under open loop, from the intended send time (corrected for coordinated
    omission); under closed loop, from the send."""
    ttft_service: LatencyFigures
    """Time to first token from the actual send."""
    ttfot: LatencyFigures = Field(default_factory=LatencyFigures)
    """Time to first output token: until the first chunk carrying answer (content or a tool call) arrived,
    after a reasoning model's thinking (delta.reasoning or delta.reasoning_content); the same as ttft where
    the model did not think. Corrected under open loop like ttft."""
    ttfot_service: LatencyFigures = Field(default_factory=LatencyFigures)
    """Time to first output token from the actual send."""
    itl_chunk: LatencyFigures
    """Inter-token latency per chunk: every gap between successive content chunks, as they arrived."""
    itl_token: LatencyFigures
    """Inter-token latency per token: the per-chunk gaps of requests whose every chunk carried one token, and,
    where the server counted each chunk's tokens, a k-token chunk's gap divided evenly among its k tokens
    (see perTokenDivided). Requests with multi-token chunks and no per-chunk counts are left out
    (perTokenUnknown): their gaps are never split on a guess."""
    tpot: LatencyFigures
    """Time per output token: (end-to-end - time to first token) / (output tokens - 1), one sample per request
    of two tokens or more."""
    streams: int
    """Successful requests that delivered at least one content chunk. Failed answers feed none of these
    figures, token counts or rates (cutShort counts them)."""
    chunks: int
    """Content chunks of successful answers."""
    input_tokens: int
    """Prompt tokens of successful requests."""
    output_tokens: int
    """Output tokens of successful answers."""
    output_tokens_per_s: float
    """Output tokens of complete answers per second over the measured windows."""
    total_tokens_per_s: float
    """Input and output tokens per second."""
    token_sources: dict[str, int] = Field(default_factory=dict)
    """Requests by where their token counts came from: usage (the server's), tokenizer (counted here with
    payload.prompts.tokenizer), server tokenize (the server's tokenize endpoint, for answers without usage
    when no tokenizer was given), chunks (the number of content chunks: a lower bound where a chunk carries
    several tokens)."""
    cached_input_tokens: int | None = None
    """Of inputTokens, those the server took from its prefix cache, where its usage says so
    (prompt_tokens_details.cached_tokens; vLLM with --enable-prompt-tokens-details); absent where no answer
    said."""
    reasoning_requests: int = 0
    """Successful answers in which the model thought before it answered."""
    reasoning_tokens: int = 0
    """Of outputTokens, the tokens spent thinking."""
    reasoning_sources: dict[str, int] = Field(default_factory=dict)
    """Answers by where their reasoning-token counts came from: usage (completion_tokens_details), usage per
    chunk (the server's running count in every chunk), tokenizer or server tokenize (the thinking's text
    counted), chunks (the reasoning chunks: a lower bound)."""
    tokenizer_mean_difference: float | None = None
    """Where the server's usage and the local tokenizer both counted the output: their mean absolute
    difference in tokens per request."""
    per_token_exact: int = 0
    per_token_divided: int = 0
    per_token_unknown: int = 0
    cut_short: int = 0
    """Answers that began but failed: cut short (no finish reason, no [DONE]), malformed, ended by an error
    event, without a generated token, or not streamed when a stream was asked; each is also an error by its
    kind."""
    cut_short_tokens: int = 0
    """Tokens those answers delivered before they ended."""
    usage_below_chunks: int = 0
    """Answers whose usage counted fewer output tokens than the content chunks they carried: counted by their
    chunks instead (a lower bound), and named in the warnings."""
    usage_off_tokenizer: int = 0
    """Answers whose usage differs from payload.prompts.tokenizer's count by more than 10% (and 2 tokens)."""
    over_max_tokens: int = 0
    events_after_done: int = 0
    """Events the server sent after `data: [DONE]`: ignored, never counted as content (a server that goes on
    after saying its answer is over)."""
    """Answers longer than the max_tokens they asked for (a server that ignores max_tokens)."""
    goodput_rps: float | None = None
    """Requests per second that met every latency objective (each objective's bound applied to the
    request's own figure; itl: the request's largest gap) without an error. Absent without objectives."""
    goodput_share: float | None = None
    server_check: ServerCheck | None = None
    """The server's own counters over the measured interval beside the generator's figures (absent when
    request.generation.serverMetricsPath is unset)."""
    server_load: ServerLoad | None = None
    """The server's own gauges over the measured interval: requests running and queued, busy slots, KV
    cache (absent without a metrics endpoint or gauges the generator knows)."""


class StageResult(KaliperModel):
    """One load level of a run."""

    index: int
    load_model: Literal["closed", "open", "trace"]
    level: float
    """Concurrent users (closed loop), requests per second (open loop) or the speedup of a replayed trace."""
    started_at: datetime
    """When the stage began (warm-up included); measurement starts warmupS later."""
    warmup_s: float
    measured_s: float
    requests: int
    errors: int
    error_rate: float
    """Failed requests over all requests."""
    error_time_share: float = 0.0
    """The share of the measured time that failed. Closed loop: of the time users spent in requests and waits,
    the time in failed requests and backing off after them (up to when the requests sent during the wait show
    the server came back), so that users who back off during an outage do not hide it; open loop, whose sends
    keep to the clock: the share of requests. An outage of 3 s in 15 s is about 0.2 either way."""
    backoffs: Backoffs | None = None
    drained: int = 0
    """Requests sent before measuring ended and awaited after it (load.gracefulStop), answered or failed:
    recorded with their real figures, in every distribution and count (not in throughput, which counts the
    measured time's answers)."""
    drain_s: float = 0.0
    """How long the graceful stop waited for them."""
    in_flight_at_end: int = 0
    """Requests sent before measuring ended and still unanswered when the graceful stop ended: in no figure;
    the SLO verdicts count them with the failures (not answered in time)."""
    in_flight_oldest_s: float = 0.0
    """How long the oldest of them had run by then."""
    in_flight_reached: dict[str, int] = Field(default_factory=dict)
    """Of those, how many had reached each figure (ttft: their first token had come; ttfot: their first
    answer token): that figure of theirs is in its distribution, and only the figures they had not reached
    are unknown."""
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    """Failures by HTTP status (such as "HTTP 503") or exception (such as "timeout", "ConnectionRefusedError")."""
    error_messages: dict[str, list[str]] = Field(default_factory=dict)
    """For each error kind, the first few distinct messages in the server's (or the connection's) own words:
    an error event's text, a failing answer's body, a gRPC status's details (up to 3, 200 characters each)."""
    throughput_rps: float
    """Successful requests per second over the measured windows."""
    bytes_sent: int = 0
    """Bytes of requests sent in the measured windows (what the target received over the network)."""
    bytes_received: int = 0
    """Bytes of responses received (what the target sent)."""
    latency: LatencyFigures
    """What users see of the answered requests: from the intended send time under open loop (corrected for
    coordinated omission), from the actual send under closed loop. A failed request is in no latency figure
    (however fast it failed); the SLO verdicts count it as beyond every latency bound."""
    service_time: LatencyFigures
    """Answered requests, from the actual send to the last byte of the response."""
    failure_time: LatencyFigures | None = None
    """Failed requests, from the send to the failure (absent when none failed)."""
    late_sends: LateSends | None = None
    resent: int = 0
    """Requests sent again on a new connection because a kept-alive one was found closed before any answer
    (not errors: llama.cpp's server, for one, advertises keep-alive on connections it has closed)."""
    tokens: TokenFigures | None = None
    """Generation requests: time to first token, gaps between tokens, token counts and rates."""
    generator_usage: GeneratorUsage | None = None
    """Absent where the generator could not read its own CPU time (a worker that ran on another node)."""
    windows: list[WindowResult] = Field(default_factory=list)
    segments: list[RampSegment] = Field(default_factory=list)
    """A ramp's figures, segment by segment (openLoop.ramp or closedLoop.ramp); empty otherwise."""
    first_answers: dict[str, float] = Field(default_factory=dict)
    """Each server that names itself in its answers (the Kaliper-Replica response header: Kaliper's built-in
    server sends its pod's name): when it first answered, in seconds from the stage's start (warm-up
    included)."""
    stop_reason: str


class GeneratorInfo(KaliperModel):
    processes: int
    workers: int
    connections: int | None = None
    """Connections each generator process kept: gRPC's HTTP/2 connections, or the open loop's HTTP ones."""
    protocol: str | None = None
    """The request protocol, such as oip-v2 or oip-v2-grpc."""
    locust_version: str


class QualityAnswers(KaliperModel):
    """A configuration's answers to the quality dataset (a ProfileRun's spec.quality), asked after its measured
    load with none running: one row at a time, greedily (temperature 0)."""

    rows: int
    """Rows asked."""
    expected: list[str | None] = Field(default_factory=list)
    """Each row's expected answer, as the dataset gives it (None: none given, as for the agreement scorer)."""
    answers: list[str | None] = Field(default_factory=list)
    """Each row's answer, in the dataset's order; None where the request failed."""
    failed: int = 0
    """Rows whose request failed (scored as wrong)."""
    first_failure: str | None = None
    """What the first failed request met."""
    seconds: float = 0.0
    """How long the asking took."""


class LoadTestResult(KaliperModel):
    """The results document of one load test (one or more stages)."""

    schema_version: Literal["kaliper.dev/loadtest/v1", "kaliper.dev/loadtest/v2"] = LOADTEST_SCHEMA
    target: str
    started_at: datetime
    finished_at: datetime
    generator: GeneratorInfo
    stages: list[StageResult] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    error: Annotated[str, Field(max_length=4096)] | None = None
    """Why the run could not complete (an unreachable target, say); stages measured before it are kept."""
    quality: QualityAnswers | None = None
    """The answers to the quality dataset, where the run was asked for them (after its stages)."""

    @property
    def ok(self) -> bool:
        return self.error is None


# --- the profile report: what `kaliper run` and the operator write for a ProfileRun -----------------------

PROFILE_SCHEMA = "kaliper.dev/profile/v1"


class ResourceSeriesPoint(KaliperModel):
    """One resource sample, summed over the trial's replicas."""

    t_s: float
    """Seconds from the start of the load."""
    cpu_cores: float
    memory_bytes: float
    throttled_ratio: float | None = None


class CustomFigure(KaliperModel):
    """One of a ProfileRun's metrics.customQueries, over the trial window."""

    name: str
    value: float
    unit: str = ""


class TrialResources(ResourceUsage):
    """Resource use over a trial's load, from cgroup accounting (local) or Prometheus (Kubernetes): the
    status's figures plus where they came from, the time series, and what could not be measured."""

    source: Literal["cgroup", "prometheus", "pod-status"]  # pod-status: restarts and OOM kills of a trial
    # that never served (the pods' own status; nothing was measured)
    series: list[ResourceSeriesPoint] = Field(default_factory=list)
    gpu_graphics_engine_active_percent: float | None = None
    """metrics.dcgm.profilingMetrics: DCGM_FI_PROF_GR_ENGINE_ACTIVE over the window, as a percentage."""
    gpu_sm_active_percent: float | None = None
    """metrics.dcgm.profilingMetrics: DCGM_FI_PROF_SM_ACTIVE over the window, as a percentage."""
    host_cpu_cores: float | None = None
    """Local runs: the CPU the whole machine was busy with over the window (/proc/stat), so that what the
    server and the load generator did not use shows other work competing with them."""
    custom: list[CustomFigure] = Field(default_factory=list)
    """metrics.customQueries, in the order the spec lists them (those that could be read)."""
    unavailable: list[str] = Field(default_factory=list)
    """Figures that could not be measured, with the reason (never reported as zero)."""


class SloCheck(KaliperModel):
    objective: str
    """Such as "p99 <= 50ms"."""
    verdict: SloVerdict
    """A latency percentile is Met when its whole confidence interval is within the bound, NotMet when its
    whole interval is beyond it, Inconclusive otherwise; error rate and throughput are counts, checked as
    measured."""
    observed: str
    """Such as "23.10ms (95% CI 19.36-26.61ms)"."""


class Repetition(KaliperModel):
    """One of a trial's repeated measurements (load.repetitions)."""

    stage: int
    """Index of its stage in the load generator's results document."""
    throughput_rps: float
    p99_ms: float | None = None
    error_rate: float
    slo_verdict: SloVerdict | None = None


LOAD_LEVEL_NAMES = ("concurrency", "rate", "speedup")
"""The parameter a trial's load level is under (kaliper.profiling.plan.load_levels: users, requests per second, a
trace's speedup); a trial's other parameters are its configuration."""


class ReplicaStartup(KaliperModel):
    """One server pod's way to serving, in seconds from its creation (the API server's timestamps: whole
    seconds)."""

    replica: str
    """The pod's name."""
    scheduled_s: float | None = None
    """To being bound to a node."""
    started_s: float | None = None
    """To its server container running (the image pulled, any init containers done)."""
    ready_s: float
    """To its readiness probe passing: the model loaded and served."""


class Startup(KaliperModel):
    """How long the trial's servers took from being asked for to ready (every run, autoscaled or not)."""

    ready_s: float
    """The slowest replica's: from its pod's creation (a cluster) or its process's start (`kaliper run`) to
    its readiness probe passing."""
    source: Literal["pods", "processes"]
    replicas: list[ReplicaStartup] = Field(default_factory=list)
    """Each pod's stages (a cluster only)."""


class ReplicaCount(KaliperModel):
    """An autoscaled trial's replicas from one instant on, until the next count."""

    at_s: float
    """Seconds from the stage's start (warm-up included)."""
    desired: int
    """What the autoscaler had asked for (its rescale events; before the first, the replicas there were)."""
    ready: int
    """Server pods passing their readiness probe: what the Service sends requests to."""
    serving: int | None = None
    """Of the pods there, those that had answered the load by then (where servers name themselves in the
    Kaliper-Replica response header; absent where none does)."""


class ScaleUp(KaliperModel):
    """One replica the autoscaler added during the load, its way to serving in seconds from the decision (the
    API server's timestamps: whole seconds)."""

    replica: str
    """The pod's name."""
    decided_at_s: float
    """When the autoscaler asked for it (its rescale event; without one, the pod's creation), in seconds from
    the stage's start."""
    created_s: float
    """To its pod's creation (the Deployment and its ReplicaSet acting on the new size)."""
    scheduled_s: float | None = None
    """To being bound to a node."""
    started_s: float | None = None
    """To its server container running."""
    ready_s: float | None = None
    """To its readiness probe passing; absent when it was not ready before the load ended."""
    first_answer_s: float | None = None
    """To its first answer to the load (where its server names itself in the Kaliper-Replica response header);
    absent when it answered none, or does not say."""


class WindowAttainment(KaliperModel):
    """The SLO's attainment over one measured window: the share of its requests answered within every latency
    objective, with its Wilson 95% interval."""

    start_s: float
    """Seconds from the stage's start."""
    requests: int
    good: int
    attainment: float
    attainment_ci_low: float
    attainment_ci_high: float
    ready_replicas: int
    """Replicas ready when the window began."""
    scaling: bool
    """A replica the autoscaler had asked for was not yet ready during some of the window."""


class Rehearsal(KaliperModel):
    """An autoscaled target under a load shape: what its autoscaler did, what users saw meanwhile, and what the
    replicas it held cost (a cluster only: `kaliper run` serves fixed replicas)."""

    autoscaler: str
    """The HorizontalPodAutoscaler the trial's servers ran under."""
    warnings: list[str] = Field(default_factory=list)
    """What the autoscaler warned of in its Events, once each (a metric it could not read: no metrics-server,
    no resource request)."""
    replicas: list[ReplicaCount] = Field(default_factory=list)
    scale_ups: list[ScaleUp] = Field(default_factory=list)
    windows: list[WindowAttainment] = Field(default_factory=list)
    attainment: float | None = None
    """The share of the measured requests answered within every latency objective (those still in flight at
    the end counted as missed)."""
    attainment_ci_low: float | None = None
    attainment_ci_high: float | None = None
    scaling_requests: int = 0
    """Requests that ended in windows during which a scale-up was under way."""
    scaling_missed: int = 0
    """Of those, the requests that missed the SLO (failed, or answered over a latency objective)."""
    replica_seconds: float = 0.0
    """Replica-seconds held over the measured time: each server pod from being bound to a node (its requests
    reserved) to the load's end, ready or not, serving or idle."""
    mean_replicas: float = 0.0
    """replica_seconds over the measured seconds: what the trial is priced for."""


class TrialReport(KaliperModel):
    """One configuration at one load level."""

    index: int
    name: str
    parameters: dict[str, str]
    """The swept values, such as cpu=500m, concurrency=8."""
    replicas: int = 1
    status: Literal["Succeeded", "Failed", "Skipped"]
    message: str | None = None
    stage: StageResult | None = None
    resources: TrialResources | None = None
    slo: list[SloCheck] = Field(default_factory=list)
    slo_verdict: SloVerdict | None = None
    """NotMet if any check is NotMet, else Inconclusive if any is, else Met; None without an SLO."""
    limited_by: list[str] = Field(default_factory=list)
    """What other than the configuration under test limited the trial, in words (see TrialSummary)."""
    repetitions: list[Repetition] = Field(default_factory=list)
    """load.repetitions > 1: every measurement; `stage` is the median one by throughput."""
    spread: float | None = None
    """(highest - lowest throughput) / median throughput over the repetitions."""
    cost_per_hour: float | None = None
    """Price of the configuration's resources for one hour (replicas included)."""
    core_hours_per_million_requests: float | None = None
    cost_per_million_requests: float | None = None
    core_hours_per_million_output_tokens: float | None = None
    """Generation: CPU core-hours per million generated tokens."""
    cost_per_million_output_tokens: float | None = None
    """Generation: money per million generated tokens (complete answers)."""
    cost_per_million_tokens: float | None = None
    """Generation: money per million tokens, prompt and output together."""
    server_log_tail: str | None = None
    server_settings: dict[str, str] = Field(default_factory=dict)
    """Settings the runtime derived from the trial's limits for its servers, by name (vLLM on CPUs:
    kvCacheSpace from the memory limit, ompThreadsBind from the CPUs it was given)."""
    quality: QualityAnswers | None = None
    """Its configuration's answers to the quality dataset (spec.quality), where this trial asked them."""
    startup: Startup | None = None
    """How long its servers took to become ready."""
    rehearsal: Rehearsal | None = None
    """An autoscaled target: its replicas over the load, each scale-up's stages, the SLO's attainment window by
    window; its price is for the replicas it held (mean_replicas), not for a fixed count."""

    def configuration(self) -> dict[str, str]:
        """Its parameters without the load level: what it shares with the configuration's other trials."""
        return {k: v for k, v in self.parameters.items() if k not in LOAD_LEVEL_NAMES}

    def load_level(self) -> dict[str, str]:
        return {k: v for k, v in self.parameters.items() if k in LOAD_LEVEL_NAMES}

    @property
    def generates(self) -> bool:
        """A generation trial (openai-chat, openai-completions) that measured a token stream."""
        return self.stage is not None and self.stage.tokens is not None

    def frontier_p99_ms(self) -> float | None:
        """The p99 the cost frontier weighs: time to first token for generation, the whole request otherwise
        (the figure the load generator reported at 99)."""
        if self.stage is None:
            return None
        figures = self.stage.tokens.ttft if self.stage.tokens is not None else self.stage.latency
        found = figures.at(99)
        return found.value_ms if found is not None else None

    def replicas_held(self) -> float:
        """The replicas it measured with: an autoscaler's average over the load (its rehearsal), else its fixed
        count."""
        return self.rehearsal.mean_replicas if self.rehearsal is not None else float(self.replicas)

    def load_seconds(self) -> float:
        """Seconds of load the trial took, warm-up included (0 when nothing was measured)."""
        return self.stage.warmup_s + self.stage.measured_s if self.stage is not None else 0.0

    def unit_cost(self) -> float | None:
        """What configurations are compared on: money per million output tokens for generation, per million
        requests otherwise."""
        return self.cost_per_million_output_tokens if self.generates else self.cost_per_million_requests


class RecommendationReport(KaliperModel):
    cpu_request: str | None = None
    cpu_limit: str | None = None
    memory_request: str | None = None
    memory_limit: str | None = None
    replicas: int | None = None
    replicas_low: int | None = None
    replicas_high: int | None = None
    """The 95% interval of the replica count, from the uncertainty of the throughput per replica."""
    gpu: int | None = None
    based_on_trial: int | None = None
    rationale: str


class FigureComparison(KaliperModel):
    """One figure of one configuration at one load, in a run and in its baseline, with their 95% intervals."""

    parameters: dict[str, str]
    """The trial's swept values, load level included (the same in both runs)."""
    figure: str
    """throughput, output tokens/s, latency p50 / p99, ttft, ttfot (where a model thought), itl and tpot p50 /
    p99, error rate, or cost per million (requests; output tokens for generation)."""
    family: str | None = None
    """throughput, latency, ttft, ttfot, itl, tpot, error_rate or cost: the slo.failIfRegressed field that sets
    its tolerance (None in reports written before it was kept)."""
    unit: str
    """ms, req/s, tok/s, share (the error rate, a fraction), or empty (money)."""
    baseline: float | None
    """None: beyond every answer (more requests failed than the percentile leaves)."""
    baseline_low: float | None = None
    baseline_high: float | None = None
    value: float | None
    low: float | None = None
    high: float | None = None
    change: float | None = None
    """(value - baseline) / baseline; None where that means nothing."""
    verdict: Literal["better", "worse", "within the noise"]
    """better or worse when the two intervals do not overlap; within the noise when they do."""

    def line(self) -> str:
        """Such as "concurrency=4: latency p99 52.10 ms -> 61.30 ms (+17.7%): worse (95%: 50.2-54 vs 59.8-63.1)":
        what the status's regressions and every view of the comparison say of it."""
        where = " ".join(f"{k}={v}" for k, v in self.parameters.items()) or "the target"
        size = f" ({self.change:+.1%})" if self.change is not None else ""
        unit = self.unit
        intervals = (
            f"95%: {_bound(self.baseline_low, unit)}-{_bound(self.baseline_high, unit)} vs "
            f"{_bound(self.low, unit)}-{_bound(self.high, unit)}"
        )
        return (
            f"{where}: {self.figure} {_number(self.baseline, unit)} -> {_number(self.value, unit)}{size}: "
            f"{self.verdict} ({intervals})"
        )


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "beyond every answer"
    if unit == "share":
        return f"{value:.2%}"
    if unit == "":
        return f"{value:.4g}"
    return f"{value:.2f} {unit}"


def _bound(value: float | None, unit: str) -> str:
    if value is None:
        return "unbounded"
    return f"{value:.2%}" if unit == "share" else f"{value:.4g}"


class BestChoice(KaliperModel):
    """How certain the choice of the best trial is."""

    certainty: Literal["Clear", "Tie", "Disturbed"]
    runner_up: int | None = None
    """The next-best trial that met the SLO."""
    cost_difference: float | None = None
    """How much more the runner-up costs per request than the best, as a fraction."""
    noise: float | None = None
    """The relative uncertainty of the two costs together: differences below it are ties."""
    explanation: str


TieRule = Literal["undisturbed", "headroom", "cheaper", "first"]  # the tie order, in order (decisions.tie_key)


QualityVerdict = Literal["Held", "Below", "Unknown"]


class QualityScore(KaliperModel):
    """A configuration's score on the quality dataset (spec.quality) against the floor
    (kaliper.profiling.quality)."""

    rows: int
    correct: int
    """Rows answered correctly (agreement: as the original configuration answered them)."""
    score: float
    """correct / rows."""
    ci_low: float
    ci_high: float
    """Wilson 95% interval of the score."""
    floor: float | None = None
    """The least score it may have (floor.min, or the original's score less floor.maxDrop); None: unknown."""
    verdict: QualityVerdict
    """Below: the whole interval is under the floor, and it is not chosen; Held: not shown below; Unknown: not
    scored (none of its trials answered the rows, or the original was not scored)."""
    observed: str
    """In a line: "14 of 20 rows (70.0%, 95% CI 48.1-85.5%) against the floor 80.0%"."""


class ConfigurationRow(KaliperModel):
    """One configuration (a trial's parameters without the load level) as the choice weighed it
    (kaliper.profiling.choice_rows): the answer page, the terminal and `kaliper report` read these rows and
    decide nothing again."""

    parameters: dict[str, str]
    trials: list[int]
    """Its trials' indexes, every load level and repetition."""
    qualified: bool
    """At a load level of it, every trial that measured it succeeded with throughput and met the SLO."""
    chosen: bool = False
    tied: bool = False
    """Not chosen, but within the measurement noise of the choice's cost: a tie the choice won."""
    cost: float | None = None
    """What the choice weighed it at, money per million requests (output tokens for generation): its cheapest
    qualified load level, the mean of that level's trials. None: not qualified or no prices."""
    cost_trial: int | None = None
    """The trial that stands for that load level."""
    cost_change: float | None = None
    """Its cost against the chosen configuration's, as a fraction."""
    decided_by: TieRule | None = None
    """A tie the choice won: the rule of the tie order that decided it (measured undisturbed, latency headroom,
    the cheaper, the first measured); the choice's explanation names the same rule."""
    quality: QualityScore | None = None
    """Its score on the quality dataset (spec.quality); a configuration scored Below is not chosen."""
    reason: str
    """Why it was or was not chosen, in a line."""


class RunReport(KaliperModel):
    """What every run's report starts with: its schema (each report narrows it), the run and its times."""

    schema_version: str
    name: str
    namespace: str | None = None
    started_at: datetime
    finished_at: datetime | None = None


class ProfileReport(RunReport):
    """The full report of a ProfileRun."""

    schema_version: Literal["kaliper.dev/profile/v1"] = PROFILE_SCHEMA
    target: str
    """What was loaded: ModelDeployment/<name>, Deployment/<name> (a workloadRef) or the URL."""
    target_container: str | None = None
    """A workloadRef target's serving container: the one its trials varied and its recommendation patches."""
    strategy: str
    currency: str = "USD"
    slo: SloSpec | None = None
    """The objectives the trials were judged against, as the spec wrote them (None: no SLO, or a report written
    before the report carried them)."""
    level_name: str | None = None
    """The load level's parameter: concurrency, rate or speedup (a trace replay's)."""
    trials: list[TrialReport] = Field(default_factory=list)
    best_trial: int | None = None
    choice: BestChoice | None = None
    configurations: list[ConfigurationRow] = Field(default_factory=list)
    """Each configuration as the choice weighed it, in the order of their first trials."""
    frontier: list[int] = Field(default_factory=list)
    """Indexes of the trials on the Pareto frontier of cost per million requests against p99: no other trial
    is both cheaper and faster."""
    baseline: BaselineComparison | None = None
    """This run against spec.baseline: the counts and the regressions (the status carries the same)."""
    comparison: list[FigureComparison] = Field(default_factory=list)
    """Every figure compared with the baseline."""
    capacities: list[Capacity] = Field(default_factory=list)
    """Each configuration's capacity under the SLO (runs with an SLO and load levels)."""
    workload: FittedWorkload | None = None
    """The workload fitted from Prometheus (payload.prompts.fromPrometheus) that every trial sent."""
    production: ProductionStatus | None = None
    """Production held to this profile (`kaliper compare --from-prometheus --html`): its figures at the load it
    served, drawn over the profile's curves."""
    verdict: RunVerdict = "Unknown"
    verdict_reason: str | None = None
    """Why the verdict is what it is, in the words of the trial that decided it: the best trial's checks when
    Met, else the closest trial's missed or undecided objectives."""
    recommendation: RecommendationReport | None = None
    load_generation_s: float = 0.0
    """Seconds spent generating load across trials (the cost of the search)."""
    warnings: list[str] = Field(default_factory=list)
    error: str | None = None
    interrupted: bool = False
    """The run was stopped (Ctrl-C, SIGTERM) before every trial ran: the finished trials are kept, the others
    are reported Skipped, and the verdict and best configuration cover only what ran."""
    expires_at: datetime | None = None
    """When the run's ttl (spec.ttl) lets `kaliper gc` remove this report's folder; unset: kept."""

    def drop_time_series(self) -> None:
        """Keep the figures, drop what is measured over time: windows, histograms, resource series."""
        for trial in self.trials:
            if trial.stage is not None:
                trial.stage.windows = []
                trial.stage.latency.histogram = trial.stage.service_time.histogram = None
            if trial.resources is not None:
                trial.resources.series = []
