"""The cross-field rules of a ProfileRun's spec, each stated once: its CEL for the API server and its check
for `kaliper validate`, `kaliper run` and the operator (kaliper.api.base.Rule). The load generator's
config applies the ones about requests and payloads to itself (kaliper.loadgen.config).
"""

from __future__ import annotations

from typing import Any

from kaliper.api.base import Rule, only_with
from kaliper.api.profilerun.vocabulary import LLM_PROTOCOLS, OIP_PROTOCOLS, WORKLOAD_SWEEP_FIELDS
from kaliper.measure.figures import figure, token_names_text

# Where a rule holds, said where it is defined; the specs and the load generator's config take their lists from
# here (rules_of), so a rule is named once.
TEMPLATE = "template"  # every ProfileRun spec, and a ModelOptimization's follow-up template
TARGET = "target"  # a ProfileRun spec with its target
LOAD = "load"  # the load generator's own config (kaliper.loadgen.config): requests and payloads
_SCOPED: list[tuple[Rule, tuple[str, ...]]] = []


def rule(*scopes: str, **fields: Any) -> Rule:
    """A Rule (kaliper.api.base) that holds in `scopes`."""
    return scoped(Rule(**fields), *scopes)


def scoped(made: Rule, *scopes: str) -> Rule:
    """`made` (a Rule, or one of base.py's kinds of rule) holds in `scopes`."""
    _SCOPED.append((made, scopes))
    return made


def rules_of(scope: str) -> tuple[Rule, ...]:
    """The rules of a scope, in the order they are defined (the API server reports them in this order)."""
    return tuple(made for made, scopes in _SCOPED if scope in scopes)


def streaming_metrics_used(spec: Any) -> bool:
    """Whether an objective or the stopping rule watches a token figure (spec: a ProfileRun's, or a
    load-generator config's, with .slo and .load)."""
    objectives = spec.slo.latency if spec.slo and spec.slo.latency else []
    stopping = spec.load.stopping
    metrics = [o.metric for o in objectives] + ([stopping.metric] if stopping is not None else [])
    return any(figure(m).token for m in metrics)


SWEPT_CONCURRENCY_NEEDS_CLOSED_LOOP = scoped(
    only_with(
        "sweep.concurrency",
        "load.closed_loop",
        message="sweep.concurrency sets closed-loop load levels; use load.closedLoop, or sweep.rate with load.openLoop",
    ),
    TEMPLATE,
)


SWEPT_RATE_NEEDS_OPEN_LOOP = scoped(
    only_with(
        "sweep.rate",
        "load.open_loop",
        message="sweep.rate sets open-loop load levels; use load.openLoop, or sweep.concurrency with load.closedLoop",
    ),
    TEMPLATE,
)


TENSORS_NEED_OIP = rule(
    TEMPLATE,
    cel="!has(self.payload.tensors) || !has(self.request) || !has(self.request.protocol) || "
    "self.request.protocol in ['oip-v2', 'oip-v2-grpc']",
    message="payload.tensors generates Open Inference Protocol v2 requests; set request.protocol to oip-v2 "
    "or oip-v2-grpc, or use payload.inline or payload.dataset",
    check=lambda s: s.payload.tensors is None or s.request.protocol in OIP_PROTOCOLS,
    field_path=".payload.tensors",
)


SWEPT_PROTOCOL_NEEDS_OIP = rule(
    TEMPLATE,
    cel="!has(self.sweep) || !has(self.sweep.protocol) || ((!has(self.request) || "
    "!has(self.request.protocol) || self.request.protocol in ['oip-v2', 'oip-v2-grpc']) && "
    "!has(self.payload.prompts))",
    message="sweep.protocol compares the Open Inference Protocol's REST and gRPC faces; the requests must "
    "be oip-v2 (request.protocol oip-v2 or oip-v2-grpc, payload tensors, inline or dataset)",
    check=lambda s: (
        s.sweep is None
        or s.sweep.protocol is None
        or (s.request.protocol in OIP_PROTOCOLS and s.payload.prompts is None)
    ),
    field_path=".sweep.protocol",
)


GRPC_HAS_NO_PATH = rule(
    TEMPLATE,
    cel="!has(self.request) || !has(self.request.protocol) || self.request.protocol != 'oip-v2-grpc' || "
    "!has(self.request.path)",
    message="request.path is an HTTP path; oip-v2-grpc calls inference.GRPCInferenceService/ModelInfer on "
    "the target's gRPC port: remove request.path",
    check=lambda s: s.request.protocol != "oip-v2-grpc" or s.request.path is None,
    field_path=".request.path",
)


GRPC_CHANNELS_NEED_GRPC = rule(
    TEMPLATE,
    cel="!has(self.request) || !has(self.request.grpc) || (has(self.request.protocol) && "
    "self.request.protocol == 'oip-v2-grpc') || (has(self.sweep) && has(self.sweep.protocol) && "
    "'oip-v2-grpc' in self.sweep.protocol)",
    message="request.grpc sets the connections of gRPC calls; set request.protocol to oip-v2-grpc (or "
    "sweep.protocol) or remove request.grpc",
    check=lambda s: (
        s.request.grpc is None
        or s.request.protocol == "oip-v2-grpc"
        or (s.sweep is not None and s.sweep.protocol is not None and "oip-v2-grpc" in s.sweep.protocol)
    ),
    field_path=".request.grpc",
)


GRPC_HAS_NO_MAX_CONNECTIONS = rule(
    TEMPLATE,
    cel="!has(self.load.openLoop) || !has(self.load.openLoop.maxConnections) || !has(self.request) || "
    "!has(self.request.protocol) || self.request.protocol != 'oip-v2-grpc'",
    message="gRPC calls share HTTP/2 connections: bound them with request.grpc.connections and "
    "streamsPerConnection instead of load.openLoop.maxConnections",
    check=lambda s: (
        s.load.open_loop is None or s.load.open_loop.max_connections is None or s.request.protocol != "oip-v2-grpc"
    ),
    field_path=".load.openLoop.maxConnections",
)


PROMPTS_NEED_GENERATION = rule(
    TEMPLATE,
    LOAD,
    cel="!has(self.payload.prompts) || (has(self.request) && has(self.request.protocol) && "
    "self.request.protocol in ['openai-chat', 'openai-completions'])",
    message="payload.prompts are for generation requests; set request.protocol to openai-chat or openai-completions",
    check=lambda s: s.payload.prompts is None or s.request.protocol in LLM_PROTOCOLS,
    field_path=".payload.prompts",
)


SESSIONS_NEED_CHAT = rule(
    TEMPLATE,
    LOAD,
    cel="!has(self.payload.prompts) || !has(self.payload.prompts.turns) || self.payload.prompts.turns == 1 "
    "|| (has(self.request) && has(self.request.protocol) && self.request.protocol == 'openai-chat')",
    message="multi-turn sessions carry earlier answers as chat messages; set request.protocol to "
    "openai-chat or payload.prompts.turns to 1",
    check=lambda s: s.payload.prompts is None or s.payload.prompts.turns == 1 or s.request.protocol == "openai-chat",
    field_path=".payload.prompts.turns",
)


GENERATION_NEEDS_PROMPTS = rule(
    TEMPLATE,
    LOAD,
    cel="!has(self.request) || !has(self.request.protocol) || "
    "!(self.request.protocol in ['openai-chat', 'openai-completions']) || has(self.payload.prompts)",
    message="openai-chat and openai-completions requests are built from payload.prompts (synthetic or a "
    "dataset of prompts or messages); set payload.prompts",
    check=lambda s: s.request.protocol not in LLM_PROTOCOLS or s.payload.prompts is not None,
    field_path=".payload",
)


TOKEN_FIGURES_NEED_GENERATION = rule(
    TEMPLATE,
    LOAD,
    cel="(!has(self.slo) || !has(self.slo.latency) || self.slo.latency.all(o, !has(o.metric) || "
    "o.metric == 'latency')) && (!has(self.load.stopping) || !has(self.load.stopping.metric) || "
    "self.load.stopping.metric == 'latency') || (has(self.request) && has(self.request.protocol) && "
    "self.request.protocol in ['openai-chat', 'openai-completions'])",
    message=f"{token_names_text()} are measured on streamed generation; set request.protocol to "
    "openai-chat or openai-completions, or use metric latency",
    check=lambda s: s.request.protocol in LLM_PROTOCOLS or not streaming_metrics_used(s),
    field_path=".request.protocol",
)


REGRESSION_NEEDS_BASELINE = scoped(
    only_with(
        "slo.fail_if_regressed",
        "baseline",
        message="failIfRegressed compares with a baseline run; set spec.baseline (run, configMap or report)",
    ),
    TEMPLATE,
)


KNEE_NEEDS_LEVELS = rule(
    TEMPLATE,
    cel="!has(self.search) || !has(self.search.strategy) || self.search.strategy != 'knee' || "
    "(has(self.sweep) && (has(self.sweep.concurrency) || has(self.sweep.rate)))",
    message="the knee search climbs load levels; list them in sweep.concurrency or sweep.rate",
    check=lambda s: (
        s.search.strategy != "knee"
        or (s.sweep is not None and (s.sweep.concurrency is not None or s.sweep.rate is not None))
    ),
    field_path=".search.strategy",
)


URL_TARGET_SWEEPS_ONLY_LOAD = rule(
    TARGET,
    cel="has(self.target.deploymentRef) || has(self.target.workloadRef) || !has(self.sweep) || "
    "[has(self.sweep.cpu), has(self.sweep.memory), has(self.sweep.gpu), has(self.sweep.gpuResource), "
    "has(self.sweep.replicas), has(self.sweep.batchSize), has(self.sweep.threads), has(self.sweep.slots), "
    "has(self.sweep.contextSize), has(self.sweep.prefixCaching), has(self.sweep.runtime), "
    "has(self.sweep.modelVariants), has(self.sweep.engineArgs), has(self.sweep.autoscaling), "
    "has(self.sweep.protocol)].all(x, !x)",
    message="sweeping deployment parameters or the protocol needs target.deploymentRef (or "
    "target.workloadRef); a target url can only sweep load levels (concurrency or rate)",
    check=lambda s: (
        s.target.deployment_ref is not None
        or s.target.workload_ref is not None
        or s.sweep is None
        or not s.sweep.deployment_parameters()
    ),
    field_path=".sweep",
)


WORKLOAD_SWEEPS_ONLY_POD_SETTINGS = rule(
    TARGET,
    cel="!has(self.target.workloadRef) || !has(self.sweep) || "
    "[has(self.sweep.batchSize), has(self.sweep.threads), has(self.sweep.slots), "
    "has(self.sweep.contextSize), has(self.sweep.prefixCaching), has(self.sweep.runtime), "
    "has(self.sweep.modelVariants), has(self.sweep.engineArgs), has(self.sweep.autoscaling), "
    "has(self.sweep.protocol)].all(x, !x)",
    message="a target.workloadRef sweeps what Kubernetes sets on its pods (cpu, memory, gpu, gpuResource, "
    "replicas); batchSize, threads, slots, contextSize, prefixCaching, runtime, modelVariants, engineArgs, "
    "autoscaling and protocol need Kaliper's own serving runtimes: serve the model with a ModelDeployment and use "
    "target.deploymentRef",
    check=lambda s: (
        s.target.workload_ref is None
        or s.sweep is None
        or set(s.sweep.deployment_parameters()) <= set(WORKLOAD_SWEEP_FIELDS)
    ),
    field_path=".sweep",
)


TRACE_NEEDS_REPLAY = scoped(
    only_with(
        "payload.prompts.trace",
        "load.trace",
        message="a trace's requests are sent on its own clock: replace load.openLoop or load.closedLoop with "
        "load.trace (speedup, start, duration, loop)",
        at="load",
    ),
    TEMPLATE,
    LOAD,
)


REPLAY_NEEDS_TRACE = scoped(
    only_with(
        "load.trace",
        "payload.prompts.trace",
        message="load.trace replays a trace: set payload.prompts.trace (file or configMap, and its format)",
        at="payload.prompts",
    ),
    TEMPLATE,
    LOAD,
)


CONVERSATIONS_NEED_CHAT = scoped(
    only_with(
        "load.trace.conversations",
        "request.protocol",
        "openai-chat",
        flag=True,
        message="a conversation carries its earlier answers as chat messages: set request.protocol to openai-chat, "
        "or load.trace.conversations to false",
    ),
    TEMPLATE,
    LOAD,
)


QUALITY_FITS_THE_PROTOCOL = rule(
    TEMPLATE,
    # request.protocol left out is oip-v2, its default (the API server applies none).
    cel="!has(self.quality) || ((has(self.quality.scorer) && self.quality.scorer == 'accuracy') ? (!has(self.request) "
    "|| !has(self.request.protocol) || self.request.protocol == 'oip-v2') : (has(self.request) && "
    "has(self.request.protocol) && self.request.protocol in ['openai-chat', 'openai-completions']))",
    message="quality scores generated answers (request.protocol openai-chat or openai-completions) or, with "
    "quality.scorer accuracy, a model's predictions (request.protocol oip-v2): set the two to match, or remove "
    "quality",
    check=lambda s: (
        s.quality is None
        or (s.request.protocol == "oip-v2" if s.quality.scorer == "accuracy" else s.request.protocol in LLM_PROTOCOLS)
    ),
    field_path=".quality",
)


CONVERSATIONS_NEED_SESSIONS = rule(
    TEMPLATE,
    LOAD,
    cel="!has(self.load.trace) || !has(self.load.trace.conversations) || !self.load.trace.conversations || "
    "!has(self.payload.prompts) || !has(self.payload.prompts.trace) || self.payload.prompts.trace.format == 'mooncake'",
    message="conversations are the rows that share a session_id, which only mooncake traces have: set "
    "payload.prompts.trace.format to mooncake, or load.trace.conversations to false",
    check=lambda s: (
        s.load.trace is None
        or not s.load.trace.conversations
        or s.payload.prompts is None
        or s.payload.prompts.trace is None
        or s.payload.prompts.trace.format == "mooncake"
    ),
    field_path=".load.trace.conversations",
)


FITTED_NEEDS_PROMETHEUS = scoped(
    only_with(
        "load.fitted",
        "payload.prompts.from_prometheus",
        message="load.fitted sends at the rate fitted from Prometheus: set payload.prompts.fromPrometheus (url, "
        "selector, window), or replace load.fitted with openLoop or closedLoop",
    ),
    TEMPLATE,
)


WORKLOAD_NEEDS_A_PROMETHEUS = rule(
    TEMPLATE,
    cel="!has(self.payload.prompts) || !has(self.payload.prompts.fromPrometheus) || "
    "has(self.payload.prompts.fromPrometheus.url) || (has(self.metrics) && has(self.metrics.prometheus))",
    message="payload.prompts.fromPrometheus reads a Prometheus: set its url, or metrics.prometheus.url",
    check=lambda s: (
        s.payload.prompts is None
        or s.payload.prompts.from_prometheus is None
        or s.payload.prompts.from_prometheus.url is not None
        or s.metrics.prometheus is not None
    ),
    field_path=".payload.prompts.fromPrometheus.url",
)


FITTED_WHEN_PLANNED = rule(
    LOAD,
    cel="(!has(self.payload.prompts) || !has(self.payload.prompts.fromPrometheus)) && !has(self.load.fitted)",
    message="prompts.fromPrometheus and load.fitted are fitted when a ProfileRun is planned; give the load "
    "generator the synthetic prompts and openLoop they became (kaliper workload --from-prometheus writes them)",
    check=lambda s: (s.payload.prompts is None or s.payload.prompts.from_prometheus is None) and s.load.fitted is None,
    field_path=".payload.prompts",
)
