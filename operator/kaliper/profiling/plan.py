"""Expand a ProfileRun's sweep into configurations to deploy and load levels to run against each."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kaliper.api.common import GpuRequest, ResourceList, ResourceRequirements
from kaliper.api.modeldeployment import (
    LlmServing,
    ModelDeploymentSpec,
    ModelDeploymentTemplate,
    ServingRuntime,
    Threads,
)
from kaliper.api.profilerun import (
    DEPLOYMENT_SWEEP_FIELDS,
    DatasetSource,
    LengthDistribution,
    ProfileRunSpec,
    TokenizerSource,
    TraceSource,
)
from kaliper.manifests.modeldeployment import BuildError, build_deployment
from kaliper.runtimes import grpc_port_of, runtime_of


@dataclass(frozen=True)
class Configuration:
    """One deployment configuration of the sweep, and the load levels to run against it."""

    index: int
    parameters: dict[str, str]
    # None: an external URL target. A ModelDeploymentSpec for a ModelDeployment target; for a workload target
    # (kaliper.manifests.workload), the template its serving container is read as.
    deployment: ModelDeploymentTemplate | None
    levels: list[float]
    level_name: str  # "concurrency" or "rate"


MAX_TRIALS_PER_RUN = 1000  # a ProfileRun's status lists every trial


def trial_count_problem(spec: ProfileRunSpec, configs: list[Configuration]) -> str | None:
    """Why a sweep of these configurations cannot run (counting its capacity probes and tie-break trials),
    or None."""
    tie_break = 2 * spec.search.tie_break.rounds if spec.search.tie_break.budget is not None else 0
    count = sum(len(c.levels) + spec.search.capacity_probes() for c in configs) + tie_break
    if count > MAX_TRIALS_PER_RUN:
        return f"the sweep has {count} trials; a ProfileRun holds at most {MAX_TRIALS_PER_RUN}"
    if spec.search.strategy == "grid" and count > spec.search.max_trials:
        return (
            f"the sweep has {count} trials, more than search.maxTrials ({spec.search.max_trials}); "
            "narrow the sweep or raise maxTrials"
        )
    return None


def load_levels(spec: ProfileRunSpec) -> tuple[list[float], str]:
    sweep = spec.sweep
    if spec.load.closed_loop is not None:
        levels = sweep.concurrency if sweep and sweep.concurrency else [spec.load.closed_loop.concurrency]
        return sorted(float(v) for v in levels), "concurrency"
    if spec.load.trace is not None:
        return [spec.load.trace.speedup], "speedup"
    assert spec.load.open_loop is not None
    levels = sweep.rate if sweep and sweep.rate else [spec.load.open_loop.rate]
    return sorted(float(v) for v in levels), "rate"


def configurations(spec: ProfileRunSpec, base: ModelDeploymentTemplate | None) -> list[Configuration]:
    """Every combination of the swept deployment parameters (a single one without a sweep)."""
    levels, level_name = load_levels(spec)
    sweep = spec.sweep
    axes: list[tuple[str, list[Any]]] = []
    if sweep is not None:
        for name in DEPLOYMENT_SWEEP_FIELDS:
            values = getattr(sweep, name)
            if values is not None:
                axes.append(("model_variant" if name == "model_variants" else name, list(values)))
    combos = itertools.product(*(values for _, values in axes)) if axes else [()]
    result = []
    for index, combo in enumerate(combos):
        chosen = dict(zip((name for name, _ in axes), combo, strict=True))
        parameters = {name: _parameter_text(name, value) for name, value in chosen.items()}
        deployment = apply(base, chosen) if base is not None else None
        result.append(Configuration(index, parameters, deployment, levels, level_name))
    return result


def _parameter_text(name: str, value: Any) -> str:
    if name in ("model_variant", "engine_args", "autoscaling"):
        return value.name
    return str(value).lower() if isinstance(value, bool) else str(value)  # as YAML writes it


def apply(base: ModelDeploymentTemplate, chosen: dict[str, Any]) -> ModelDeploymentTemplate:
    """The base deployment with the swept values applied; a swept CPU or memory sets request = limit."""
    spec = base.model_copy(deep=True)
    resources = spec.resources or ResourceRequirements()
    requests = resources.requests or ResourceList()
    limits = resources.limits or ResourceList()
    for key in ("cpu", "memory"):
        if key in chosen:
            requests = requests.model_copy(update={key: str(chosen[key])})
            limits = limits.model_copy(update={key: str(chosen[key])})
    gpu = resources.gpu
    if "gpu" in chosen:
        gpu = (gpu or GpuRequest()).model_copy(update={"count": chosen["gpu"]})
    if "gpu_resource" in chosen:
        gpu = (gpu or GpuRequest()).model_copy(update={"resource_name": chosen["gpu_resource"]})
    spec.resources = ResourceRequirements(requests=requests, limits=limits, gpu=gpu)
    if "replicas" in chosen:
        spec.replicas = chosen["replicas"]
    if "runtime" in chosen:
        spec.runtime = (spec.runtime or ServingRuntime()).model_copy(update={"type": chosen["runtime"]})
    if "slots" in chosen:
        spec.llm = (spec.llm or LlmServing()).model_copy(update={"slots": chosen["slots"]})
    if "context_size" in chosen:
        spec = runtime_of(spec).with_context_size(spec, chosen["context_size"])  # the runtime says what it is
    if "prefix_caching" in chosen:
        spec.llm = (spec.llm or LlmServing()).model_copy(update={"prefix_caching": chosen["prefix_caching"]})
    if "batch_size" in chosen:
        spec = runtime_of(spec).with_batch_size(spec, chosen["batch_size"])  # what a batch is, the runtime says
    if "threads" in chosen:
        spec.threads = (spec.threads or Threads()).model_copy(update={"intra_op": chosen["threads"]})
    if "model_variant" in chosen:
        spec.model = chosen["model_variant"].model
    if "engine_args" in chosen:
        runtime = spec.runtime or ServingRuntime()
        spec.runtime = runtime.model_copy(update={"args": [*(runtime.args or []), *chosen["engine_args"].args]})
    if "autoscaling" in chosen and spec.autoscaling is not None:  # without one, sweep_problem says so
        spec.autoscaling = chosen["autoscaling"].over(spec.autoscaling)
    return spec


def longest_request(spec: ProfileRunSpec) -> tuple[int, int, str] | None:
    """(prompt tokens, output tokens, where each comes from) of the longest generation request the run
    sends, as far as the spec says (a dataset's prompts are not read here: counted as 0), for the whole of a
    multi-turn session; None for a run that does not generate."""
    prompts, generation = spec.payload.prompts, spec.request.generation
    if prompts is None:
        return None
    max_tokens = generation.max_tokens if generation else 128
    prompt, output, source = 0, max_tokens, f"max_tokens {max_tokens}"
    synthetic = prompts.synthetic
    if synthetic is not None:
        prompt = _largest(synthetic.input_tokens)
        if synthetic.output_tokens is not None:
            output = _largest(synthetic.output_tokens)
            source = f"outputTokens up to {output}"
        source = f"prompts of up to {prompt} tokens + {source}"
    if prompts.turns > 1:
        source += f", over {prompts.turns} turns of a session"
    return prompt * prompts.turns, output * prompts.turns, source


def _largest(lengths: LengthDistribution) -> int:
    if lengths.distribution == "fixed":
        return lengths.mean
    return lengths.max if lengths.max is not None else 4 * lengths.mean


def context_problem(spec: ProfileRunSpec, deployment: ModelDeploymentTemplate) -> str | None:
    """Why the run's longest request cannot fit the server as configured (its runtime says), or None."""
    request = longest_request(spec)
    if request is None:
        return None
    prompt, output, source = request
    return runtime_of(deployment).request_fit_problem(deployment, prompt + output, source)


def sweep_problem(spec: ProfileRunSpec, configs: list[Configuration]) -> str | None:
    """Why a configuration of the sweep cannot serve the run, or None: the swept values break a rule of the
    ModelDeployment (its own validation, run again on the combination), or the requests do not fit."""
    for config in configs:
        if config.deployment is None:
            continue
        where = f"configuration {describe(config.parameters)}: " if config.parameters else ""
        if "autoscaling" in config.parameters and config.deployment.autoscaling is None:
            return (
                "spec.sweep.autoscaling lays autoscaler settings over the target's spec.autoscaling, and the "
                "target has none: give its ModelDeployment spec.autoscaling (minReplicas, maxReplicas, a metric)"
            )
        try:
            type(config.deployment).model_validate(config.deployment.to_manifest())
        except ValidationError as error:
            return where + "; ".join(e["msg"] for e in error.errors())
        problem = context_problem(spec, config.deployment) or runtime_of(config.deployment).args_problem(
            config.deployment.runtime.args or []
        )
        if problem:
            return where + problem
        if trial_protocol(spec, config.parameters) == "oip-v2-grpc" and grpc_port_of(config.deployment) is None:
            return where + (
                f"oip-v2-grpc calls the Open Inference Protocol's gRPC service, which runtime "
                f"{config.deployment.runtime.type} does not serve (onnxruntime, mlserver and triton do; a custom "
                "runtime names its port in runtime.grpcPort)"
            )
    return None


def trial_protocol(spec: ProfileRunSpec, parameters: dict[str, str]) -> str:
    """A trial's request protocol: its value of sweep.protocol, else request.protocol."""
    return parameters.get("protocol", spec.request.protocol)


ParametersKey = tuple[tuple[str, str], ...]


def parameters_key(parameters: dict[str, str]) -> ParametersKey:
    """Parameters as a key that does not depend on their order (a status read back from the API server lists
    them alphabetically): how a configuration, or a configuration at a load level, is found again."""
    return tuple(sorted(parameters.items()))


def describe(parameters: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in parameters.items()) or "the target as it is"


def file_sources(spec: ProfileRunSpec) -> list[tuple[str, DatasetSource | TraceSource | TokenizerSource]]:
    """The run's files a load generator reads, by field: each a path on one machine (`file`, `kaliper run`) or a
    ConfigMap's key (a cluster's pods)."""
    prompts = spec.payload.prompts
    named = (
        ("payload.dataset", spec.payload.dataset),
        ("payload.prompts.dataset", prompts.dataset if prompts else None),
        ("payload.prompts.trace", prompts.trace if prompts else None),
        ("payload.prompts.tokenizer", prompts.tokenizer if prompts else None),
        ("quality.dataset", spec.quality.dataset if spec.quality else None),
    )
    return [(field, source) for field, source in named if source is not None]


def machine_paths_problem(spec: ProfileRunSpec) -> str | None:
    """Files named by a path on one machine cannot reach a load-generator pod: they go in ConfigMaps."""
    for field, source in file_sources(spec):
        if source.file is not None:
            return (
                f"spec.{field}.file is a path on one machine; on Kubernetes put the file in a ConfigMap and use "
                f"{field}.configMap"
            )
    return None


def deploy_problem(configs: list[Configuration], namespace: str, image: str) -> str | None:
    """Why a configuration of the sweep cannot be deployed on Kubernetes (its runtime's rules there), or None."""
    for config in configs:
        if (
            config.deployment is not None
            and config.deployment.autoscaling is not None
            and "replicas" in config.parameters
        ):
            return (
                "spec.sweep.replicas on an autoscaled target: its autoscaler sets the replicas, between "
                "spec.autoscaling.minReplicas and maxReplicas; leave sweep.replicas out"
            )
        if isinstance(config.deployment, ModelDeploymentSpec):  # a workload's copy is built from its template
            try:
                build_deployment("check", namespace, "", config.deployment, image)
            except BuildError as exc:
                where = f" in configuration {describe(config.parameters)}" if config.parameters else ""
                return f"the target cannot be deployed on Kubernetes{where}: {exc}"
    return None
