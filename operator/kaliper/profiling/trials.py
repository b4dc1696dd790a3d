"""What the local runtime and the operator do alike with a measured trial: price it, judge it against the
SLO, and, once every trial is in, pick the best and recommend. Pure functions."""

from __future__ import annotations

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.profiling import decisions
from kaliper.profiling.plan import Configuration
from kaliper.report.schema import ProfileReport, TrialReport


def allocated(config: Configuration) -> tuple[float, float, int, int]:
    """(cores, memory bytes, GPUs, replicas) the configuration reserves: limits, else requests."""
    spec = config.deployment
    if spec is None or spec.resources is None:
        return 0.0, 0.0, 0, spec.replicas if spec else 1
    chosen = spec.resources.limits or spec.resources.requests
    fallback = spec.resources.requests
    cpu = (chosen and chosen.cpu) or (fallback and fallback.cpu)
    memory = (chosen and chosen.memory) or (fallback and fallback.memory)
    gpus = spec.resources.gpu.count if spec.resources.gpu else 0
    return (
        float(parse_cpu(cpu)) if cpu else 0.0,
        float(parse_quantity(memory)) if memory else 0.0,
        gpus,
        spec.replicas,
    )


def hourly_cost(spec: ProfileRunSpec, config: Configuration) -> float:
    cores, memory, gpus, replicas = allocated(config)
    return decisions.hourly_cost(cores, memory, gpus, replicas, spec.cost)


def judge(trial: TrialReport, spec: ProfileRunSpec, config: Configuration) -> TrialReport:
    """The trial with its price (per hour, per million requests, core-hours) and SLO checks filled in."""
    cores, _, _, replicas = allocated(config)
    hourly = hourly_cost(spec, config)
    trial = trial.model_copy(update={"replicas": replicas, "cost_per_hour": round(hourly, 6) if hourly else None})
    stage = trial.stage
    if stage is None:
        return trial
    if hourly and stage.throughput_rps > 0:
        trial.cost_per_million_requests = decisions.per_million(hourly, stage.throughput_rps)
    if cores and stage.throughput_rps > 0:
        trial.core_hours_per_million_requests = cores * replicas * 1e6 / stage.throughput_rps / 3600
    trial.slo, trial.slo_met = decisions.slo_checks(stage, spec.slo)
    return trial


def conclude(spec: ProfileRunSpec, report: ProfileReport) -> None:
    """The verdict, the best trial and the recommendation, from every trial of the report; a run none of whose
    trials succeeded has failed (on both paths: the operator marks it Failed, `kaliper run` exits 1)."""
    if not any(t.status == "Succeeded" for t in report.trials):
        first = next((t.message for t in report.trials if t.status == "Failed"), None) or "no trial ran"
        report.error = f"no trial succeeded; the first failure: {first}"
    have_slo = spec.slo is not None
    best = decisions.best_trial(report.trials, have_slo)
    if have_slo:
        report.verdict = "Met" if best is not None else "NotMet"
    if best is None:
        return
    report.best_trial = best.index
    report.recommendation = decisions.recommend(
        best, report.trials, spec.recommendation, best.replicas, spec.slo.target_throughput if spec.slo else None
    )
