"""SLO verdicts, cost, the best configuration and the rightsizing recommendation. Pure functions.

Rightsizing follows the Vertical Pod Autoscaler: the CPU request is a percentile (P90) of usage plus a
safety margin (+15%); memory comes from the peak, plus the margin; a configuration that was OOM-killed
raises memory by max(+100 MiB, x1.2) over the limit it died at.
"""

from __future__ import annotations

import math

from kaliper.api.profilerun import CostModel, RecommendationSpec, SloSpec
from kaliper.api.units import format_cpu, format_memory, parse_cpu, parse_duration, parse_quantity
from kaliper.loadgen.histogram import LatencyHistogram
from kaliper.loadgen.statistics import estimate
from kaliper.report.schema import RecommendationReport, SloCheck, StageResult, TrialReport

GIB = 2**30
MIN_CPU_CORES = 0.01
OOM_BUMP_BYTES = 100 * 2**20
OOM_BUMP_FACTOR = 1.2


def latency_at(stage: StageResult, percentile: float, measure: str = "corrected") -> float | None:
    """Milliseconds at a percentile; percentiles the report does not list come from the histogram."""
    figures = stage.latency if measure == "corrected" else stage.service_time
    listed = figures.at(percentile)
    if listed is not None:
        return listed.value_ms
    if not figures.histogram:
        return None
    value = estimate(LatencyHistogram.decode(figures.histogram), percentile).value_s
    return None if value is None else value * 1000


def slo_checks(stage: StageResult, slo: SloSpec | None) -> tuple[list[SloCheck], bool | None]:
    if slo is None:
        return [], None
    checks = []
    for objective in slo.latency or []:
        bound_ms = parse_duration(objective.max) * 1000
        value = latency_at(stage, objective.percentile, objective.measure)
        observed = "no samples" if value is None else f"{value:.2f}ms"
        met = value is not None and value <= bound_ms
        checks.append(SloCheck(objective=f"p{objective.percentile:g} <= {objective.max}", met=met, observed=observed))
    if slo.max_error_rate is not None:
        checks.append(
            SloCheck(
                objective=f"error rate <= {slo.max_error_rate:.2%}",
                met=stage.error_rate <= slo.max_error_rate,
                observed=f"{stage.error_rate:.2%}",
            )
        )
    if slo.min_throughput is not None:
        checks.append(
            SloCheck(
                objective=f"throughput >= {slo.min_throughput:g}/s",
                met=stage.throughput_rps >= slo.min_throughput,
                observed=f"{stage.throughput_rps:.1f}/s",
            )
        )
    return checks, all(c.met for c in checks)


def hourly_cost(cpu_cores: float, memory_bytes: float, gpus: int, replicas: int, prices: CostModel) -> float:
    per_replica = cpu_cores * prices.per_core_hour + memory_bytes / GIB * prices.per_gib_hour
    return replicas * (per_replica + gpus * prices.per_gpu_hour)


def per_million(hourly: float, throughput_rps: float) -> float | None:
    """What one million requests cost at this throughput (hourly figure x hours per million requests)."""
    if throughput_rps <= 0:
        return None
    return hourly * (1e6 / throughput_rps) / 3600


def best_trial(trials: list[TrialReport], have_slo: bool) -> TrialReport | None:
    """The cheapest per million requests among the trials that met the SLO (all succeeded ones without an
    SLO); ties go to the lower p99."""
    eligible = [t for t in trials if t.status == "Succeeded" and t.stage and t.stage.throughput_rps > 0]
    if have_slo:
        eligible = [t for t in eligible if t.slo_met]
    if not eligible:
        return None

    def key(trial: TrialReport) -> tuple[float, float]:
        cost = trial.cost_per_million_requests
        p99 = latency_at(trial.stage, 99) if trial.stage else None  # type: ignore[arg-type]
        return (cost if cost is not None else -trial.stage.throughput_rps, p99 or 0.0)  # type: ignore[union-attr]

    return min(eligible, key=key)


def recommend(
    best: TrialReport,
    trials: list[TrialReport],
    settings: RecommendationSpec,
    replicas: int,
    target_throughput: float | None,
) -> RecommendationReport:
    resources = best.resources
    margin = 1 + settings.safety_margin
    notes = []
    cpu_request = cpu_limit = memory_request = memory_limit = None
    if resources and resources.series:
        cpu_samples = sorted(p.cpu_cores / replicas for p in resources.series)
        rank = max(1, math.ceil(len(cpu_samples) * settings.cpu_percentile / 100)) - 1
        cpu = max(cpu_samples[rank] * margin, MIN_CPU_CORES)
        cpu_request = format_cpu(cpu)
        configured = best.parameters.get("cpu")
        # Keep the limit the best trial ran with, unless the request outgrew it (a limit below it is invalid).
        cpu_limit = configured if configured and float(parse_cpu(configured)) >= cpu else cpu_request
        notes.append(
            f"CPU request: P{settings.cpu_percentile:g} of usage per replica "
            f"({cpu_samples[rank]:.3f} cores) + {settings.safety_margin:.0%}"
        )
    if resources and resources.memory_peak_bytes:
        memory = resources.memory_peak_bytes / replicas * margin
        oom_limits = [t for t in trials if t.resources and t.resources.oom_kills and "memory" in t.parameters]
        for trial in oom_limits:
            died_at = float(parse_quantity(trial.parameters["memory"]))
            memory = max(memory, died_at + OOM_BUMP_BYTES, died_at * OOM_BUMP_FACTOR)
            notes.append(f"memory raised above {trial.parameters['memory']}, where trial {trial.index} was OOM-killed")
        memory_request = format_memory(memory)
        memory_limit = format_memory(memory * (1 + settings.memory_limit_headroom))
        notes.append(f"memory request: peak working set per replica + {settings.safety_margin:.0%}")
    needed = replicas
    if target_throughput and best.stage and best.stage.throughput_rps > 0:
        per_replica = best.stage.throughput_rps / replicas
        needed = max(1, math.ceil(target_throughput / per_replica))
        notes.append(f"replicas: {target_throughput:g} req/s target / {per_replica:.1f} req/s per replica")
    return RecommendationReport(
        cpu_request=cpu_request,
        cpu_limit=cpu_limit,
        memory_request=memory_request,
        memory_limit=memory_limit,
        replicas=needed,
        based_on_trial=best.index,
        rationale="; ".join(notes) or "no resource figures were available",
    )
