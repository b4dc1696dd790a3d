"""Expand a ProfileRun's sweep into configurations to deploy and load levels to run against each."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from kaliper.api.common import GpuRequest, ResourceList, ResourceRequirements
from kaliper.api.modeldeployment import Batching, ModelDeploymentSpec, ServingRuntime, Threads
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.manifests.modeldeployment import BuildError, build_deployment


@dataclass(frozen=True)
class Configuration:
    """One deployment configuration of the sweep, and the load levels to run against it."""

    index: int
    parameters: dict[str, str]
    deployment: ModelDeploymentSpec | None  # None: an external URL target
    levels: list[float]
    level_name: str  # "concurrency" or "rate"


MAX_TRIALS_PER_RUN = 1000  # a ProfileRun's status lists every trial


def trial_count_problem(spec: ProfileRunSpec, count: int) -> str | None:
    """Why a sweep of `count` trials cannot run, or None."""
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
    assert spec.load.open_loop is not None
    levels = sweep.rate if sweep and sweep.rate else [spec.load.open_loop.rate]
    return sorted(float(v) for v in levels), "rate"


def configurations(spec: ProfileRunSpec, base: ModelDeploymentSpec | None) -> list[Configuration]:
    """Every combination of the swept deployment parameters (a single one without a sweep)."""
    levels, level_name = load_levels(spec)
    sweep = spec.sweep
    axes: list[tuple[str, list[Any]]] = []
    if sweep is not None:
        for name in ("cpu", "memory", "gpu", "replicas", "batch_size", "threads", "runtime"):
            values = getattr(sweep, name)
            if values is not None:
                axes.append((name, list(values)))
        if sweep.model_variants is not None:
            axes.append(("model_variant", list(sweep.model_variants)))
    combos = itertools.product(*(values for _, values in axes)) if axes else [()]
    result = []
    for index, combo in enumerate(combos):
        chosen = dict(zip((name for name, _ in axes), combo, strict=True))
        parameters = {name: (value.name if name == "model_variant" else str(value)) for name, value in chosen.items()}
        deployment = apply(base, chosen) if base is not None else None
        result.append(Configuration(index, parameters, deployment, levels, level_name))
    return result


def apply(base: ModelDeploymentSpec, chosen: dict[str, Any]) -> ModelDeploymentSpec:
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
    spec.resources = ResourceRequirements(requests=requests, limits=limits, gpu=gpu)
    if "replicas" in chosen:
        spec.replicas = chosen["replicas"]
    if "batch_size" in chosen:
        size = chosen["batch_size"]
        spec.batching = (
            None
            if size <= 1
            else (spec.batching or Batching(max_batch_size=size)).model_copy(update={"max_batch_size": size})
        )
    if "threads" in chosen:
        spec.threads = (spec.threads or Threads()).model_copy(update={"intra_op": chosen["threads"]})
    if "runtime" in chosen:
        spec.runtime = (spec.runtime or ServingRuntime()).model_copy(update={"type": chosen["runtime"]})
    if "model_variant" in chosen:
        spec.model = chosen["model_variant"].model
    return spec


def machine_paths_problem(spec: ProfileRunSpec) -> str | None:
    """Files named by a path on one machine cannot reach a load-generator pod: they go in ConfigMaps."""
    prompts = spec.payload.prompts
    for field, source in (
        ("payload.dataset", spec.payload.dataset),
        ("payload.prompts.dataset", prompts.dataset if prompts else None),
        ("payload.prompts.tokenizer", prompts.tokenizer if prompts else None),
    ):
        if source is not None and source.file is not None:
            return (
                f"spec.{field}.file is a path on one machine; on Kubernetes put the file in a ConfigMap and use "
                f"{field}.configMap"
            )
    return None


def cluster_problem(spec: ProfileRunSpec, configs: list[Configuration], namespace: str, image: str) -> str | None:
    """Why the sweep cannot run on Kubernetes, or None: too many trials, or a configuration the cluster
    cannot deploy."""
    problem = trial_count_problem(spec, sum(len(c.levels) for c in configs))
    if problem:
        return problem
    for config in configs:
        if config.deployment is not None:
            try:
                build_deployment("check", namespace, "", config.deployment, image)
            except BuildError as exc:
                return f"the target cannot be deployed on Kubernetes: {exc}"
    return None
