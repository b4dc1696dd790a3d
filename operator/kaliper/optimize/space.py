"""The candidates a ModelOptimization may try, and the strategies that pick them (exhaustive, random, TPE).

A candidate is a model file (the original with some of the transformer fusions, quantization, float16 and
graph optimization applied, in that order) opened with some session settings (threads, execution mode).
Conversion is not a choice: a scikit-learn, PyTorch or Hugging Face model is converted once, and that ONNX
model is the original."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from kaliper.api.modeloptimization import ModelOptimizationSpec

Objective = Callable[["CandidatePlan"], float | None]  # lower is better; None: the candidate failed


@dataclass(frozen=True)
class CandidatePlan:
    transformers: bool = False
    graph: bool = False
    quantization: bool = False
    float16: bool = False
    intra_op: int | None = None
    inter_op: int | None = None
    execution_mode: str = "sequential"

    @property
    def model_key(self) -> tuple[bool, bool, bool, bool]:
        """Candidates with the same key share one model file; only their session settings differ."""
        return (self.transformers, self.graph, self.quantization, self.float16)

    @property
    def tuned(self) -> bool:
        return self.intra_op is not None or self.inter_op is not None or self.execution_mode != "sequential"

    def passes(self, converted: bool) -> list[str]:
        names = ["conversion"] if converted else []
        names += [
            name
            for name, on in (
                ("transformersOptimization", self.transformers),
                ("quantization", self.quantization),
                ("float16", self.float16),
                ("graphOptimization", self.graph),
                ("threadTuning", self.tuned),
            )
            if on
        ]
        return names

    def parameters(self, spec: ModelOptimizationSpec) -> dict[str, str]:
        """The pass options and session settings that make this candidate, as the status shows them."""
        passes = spec.passes
        found: dict[str, str] = {}
        if self.transformers and passes.transformers_optimization is not None:
            t = passes.transformers_optimization
            found["transformersOptimization.modelType"] = t.model_type
            if t.num_heads:
                found["transformersOptimization.numHeads"] = str(t.num_heads)
                found["transformersOptimization.hiddenSize"] = str(t.hidden_size)
            if t.float16:
                found["transformersOptimization.float16"] = "true"
            changed = t.fusions.model_dump(by_alias=True, exclude_defaults=True)
            if changed:
                found["transformersOptimization.fusions"] = ",".join(
                    f"{name}={str(on).lower()}" for name, on in changed.items()
                )
        if self.graph and passes.graph_optimization is not None:
            found["graphOptimization.level"] = passes.graph_optimization.level
        if self.quantization and passes.quantization is not None:
            q = passes.quantization
            found["quantization.mode"] = q.mode
            found["quantization.weightType"] = q.weight_type
            found["quantization.perChannel"] = str(q.per_channel).lower()
        if self.float16 and passes.float16 is not None:
            found["float16.keepIoTypes"] = str(passes.float16.keep_io_types).lower()
        if self.intra_op is not None:
            found["intraOp"] = str(self.intra_op)
        if self.inter_op is not None:
            found["interOp"] = str(self.inter_op)
        if self.tuned:
            found["executionMode"] = self.execution_mode
        return found


def default_intra_op(cpus: float) -> list[int]:
    """1, 2, 4, ... up to the CPUs the optimizer may use (its limit), always including 1."""
    counts, n = [], 1
    while n <= max(1.0, cpus):
        counts.append(n)
        n *= 2
    return counts


def choices(spec: ModelOptimizationSpec, cpus: float) -> dict[str, list]:
    """Every dimension of the search with the values it may take; a pass not listed has one value, off."""
    passes = spec.passes
    tuning = passes.thread_tuning
    return {
        "transformers": [False, True] if passes.transformers_optimization is not None else [False],
        "graph": [False, True] if passes.graph_optimization is not None else [False],
        "quantization": [False, True] if passes.quantization is not None else [False],
        "float16": [False, True] if passes.float16 is not None else [False],
        "intra_op": sorted(tuning.intra_op or default_intra_op(cpus)) if tuning is not None else [None],
        "inter_op": sorted(tuning.inter_op) if tuning is not None and tuning.inter_op else [None],
        "execution_mode": list(tuning.execution_modes or ["sequential"]) if tuning is not None else ["sequential"],
    }


def plan_of(values: dict) -> CandidatePlan:
    # Inter-op threads only run operators side by side in parallel mode: sequential plans drop them, so
    # plans that differ only there are one candidate.
    inter = values["inter_op"] if values["execution_mode"] == "parallel" else None
    return CandidatePlan(
        transformers=values["transformers"],
        graph=values["graph"],
        quantization=values["quantization"],
        float16=values["float16"],
        intra_op=values["intra_op"],
        inter_op=inter,
        execution_mode=values["execution_mode"],
    )


def all_plans(spec: ModelOptimizationSpec, cpus: float) -> list[CandidatePlan]:
    """Every distinct candidate, in a fixed order, without the original (no pass, default settings)."""
    dims = choices(spec, cpus)
    plans: list[CandidatePlan] = []
    for combination in itertools.product(*dims.values()):
        plan = plan_of(dict(zip(dims, combination, strict=True)))
        if plan != CandidatePlan() and plan not in plans:
            plans.append(plan)
    return plans


def run_search(spec: ModelOptimizationSpec, cpus: float, evaluate: Objective) -> tuple[list[CandidatePlan], str]:
    """Evaluate candidates as the strategy picks them, at most maxCandidates distinct ones; returns the plans
    evaluated in order and a sentence on how many there were to choose from."""
    search = spec.search
    plans = all_plans(spec, cpus)
    limit = min(search.max_candidates, len(plans))
    note = f"{len(plans)} distinct candidates; {search.strategy} evaluates {limit}"
    if limit < len(plans):
        note += f" (search.maxCandidates={search.max_candidates} leaves {len(plans) - limit} out)"
    if search.strategy == "exhaustive":
        for plan in plans[:limit]:
            evaluate(plan)
        return plans[:limit], note
    if search.strategy == "random":
        picked = random.Random(search.seed).sample(plans, limit)
        for plan in picked:
            evaluate(plan)
        return picked, note
    return _tpe(spec, cpus, plans, limit, evaluate), note


def _tpe(
    spec: ModelOptimizationSpec, cpus: float, plans: list[CandidatePlan], limit: int, evaluate: Objective
) -> list[CandidatePlan]:
    """optuna's TPE sampler over the dimensions; a plan it proposes again is answered from the first
    evaluation, so maxCandidates counts distinct candidates."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dims = {name: values for name, values in choices(spec, cpus).items() if len(values) > 1}
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=spec.search.seed))
    seen: dict[CandidatePlan, float | None] = {}
    order: list[CandidatePlan] = []
    attempts = 0
    while len(order) < limit and attempts < 20 * limit:
        attempts += 1
        trial = study.ask()
        values = {name: trial.suggest_categorical(name, values) for name, values in dims.items()}
        plan = plan_of({**{n: v[0] for n, v in choices(spec, cpus).items()}, **values})
        if plan == CandidatePlan() or plan not in plans:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        if plan not in seen:
            seen[plan] = evaluate(plan)
            order.append(plan)
        value = seen[plan]
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
    return order
