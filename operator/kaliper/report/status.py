"""A ProfileRun's status from its report: the headline figures of the same measurements, bounded in size
for the Kubernetes object (the full report stays in report.json or the run's ConfigMap)."""

from __future__ import annotations

import contextlib

from kaliper.api.common import ResourceList
from kaliper.api.modeloptimization import Footprint, ModelOptimizationStatus, OperatorTypeShare, ProfileSummary
from kaliper.api.profilerun import (
    BestConfiguration,
    CostSummary,
    LatencySummary,
    ProfileRunStatus,
    Progress,
    Recommendation,
    ReportReference,
    ResourceUsage,
    TokenSummary,
    TrialSummary,
)
from kaliper.measure.figures import STATUS_FIGURES, STATUS_PERCENTILES
from kaliper.report.optimization import CandidateResult, ModelProfile, OptimizationReport
from kaliper.report.recommend import NoRecommendation, patch_text, target_of, target_patch
from kaliper.report.schema import LatencyFigures, ProfileReport, TokenFigures, TrialReport

FIELDS = {"p50": "p50_ms", "p90": "p90_ms", "p95": "p95_ms", "p99": "p99_ms", "p99.9": "p999_ms"}


def latency_summary(figures: LatencyFigures) -> LatencySummary:
    values = {FIELDS[f"p{p.percentile:g}"]: p.value_ms for p in figures.percentiles if f"p{p.percentile:g}" in FIELDS}
    return LatencySummary(count=figures.count, mean_ms=figures.mean_ms, max_ms=figures.max_ms, **values)


def token_headline(tokens: TokenFigures) -> TokenSummary:
    def at(figures: LatencyFigures, percentile: float) -> float | None:
        found = figures.at(percentile)
        return found.value_ms if found is not None else None

    columns = {
        f"{row.name}_p{p}_ms": at(getattr(tokens, row.report), p) for row in STATUS_FIGURES for p in STATUS_PERCENTILES
    }
    return TokenSummary(
        **columns,
        input_tokens=tokens.input_tokens,
        output_tokens=tokens.output_tokens,
        reasoning_tokens=tokens.reasoning_tokens,
        output_tokens_per_s=tokens.output_tokens_per_s,
        goodput_share=tokens.goodput_share,
    )


def trial_summary(trial: TrialReport) -> TrialSummary:
    stage = trial.stage
    resources = None
    if trial.resources is not None:
        resources = ResourceUsage.model_validate(trial.resources.model_dump(include=set(ResourceUsage.model_fields)))
    return TrialSummary(
        index=trial.index,
        name=trial.name,
        parameters=trial.parameters,
        phase=trial.status,
        requests=stage.requests if stage else None,
        throughput_rps=stage.throughput_rps if stage else None,
        error_rate=stage.error_rate if stage else None,
        latency=latency_summary(stage.latency) if stage else None,
        tokens=token_headline(stage.tokens) if stage and stage.tokens else None,
        resources=resources,
        slo_verdict=trial.slo_verdict,
        slo_violations=[f"{c.objective}: {c.verdict}, observed {c.observed}" for c in trial.slo if c.verdict != "Met"]
        or None,
        limited_by=[flag[:512] for flag in trial.limited_by[:8]] or None,
        core_hours_per_million_requests=trial.core_hours_per_million_requests,
        cost_per_million_requests=trial.cost_per_million_requests,
        cost_per_million_output_tokens=trial.cost_per_million_output_tokens,
        stop_reason=stage.stop_reason if stage else None,
        message=(trial.message or "")[:2048] or None,
    )


def status_from_report(report: ProfileReport, report_ref: ReportReference | None = None) -> ProfileRunStatus:
    best = next((t for t in report.trials if t.index == report.best_trial), None)
    status = ProfileRunStatus(
        phase="Failed" if report.error else "Succeeded",
        start_time=report.started_at,
        completion_time=report.finished_at,
        progress=Progress.of(report.trials, len(report.trials)),
        trials=[trial_summary(t) for t in report.trials],
        verdict=report.verdict,
        report_ref=report_ref,
        workload=report.workload,
        message=(report.error or report.verdict_reason or "")[:4096] or None,
    )
    if best is not None and best.stage is not None:
        p99 = best.stage.latency.at(99)
        status.best = BestConfiguration(
            trial=best.index,
            parameters=best.parameters,
            p99_ms=p99.value_ms if p99 else None,
            throughput_rps=best.stage.throughput_rps,
            cost_per_million_requests=best.cost_per_million_requests,
            output_tokens_per_s=best.stage.tokens.output_tokens_per_s if best.stage.tokens else None,
            cost_per_million_output_tokens=best.cost_per_million_output_tokens,
            certainty=report.choice.certainty if report.choice else None,
            explanation=report.choice.explanation[:1024] if report.choice else None,
        )
        status.cost = CostSummary(
            currency=report.currency,
            core_hours_per_million_requests=best.core_hours_per_million_requests,
            currency_per_million_requests=best.cost_per_million_requests,
            core_hours_per_million_output_tokens=best.core_hours_per_million_output_tokens,
            currency_per_million_output_tokens=best.cost_per_million_output_tokens,
            currency_per_million_tokens=best.cost_per_million_tokens,
        )
    status.capacity = report.capacities or None
    status.baseline = report.baseline
    if report.recommendation is not None:
        r = report.recommendation
        status.recommendation = Recommendation(
            requests=ResourceList(cpu=r.cpu_request, memory=r.memory_request),
            limits=ResourceList(cpu=r.cpu_limit, memory=r.memory_limit),
            replicas=r.replicas,
            replicas_low=r.replicas_low,
            replicas_high=r.replicas_high,
            rationale=r.rationale[:4096],
        )
        with contextlib.suppress(NoRecommendation):  # a URL target: nothing to patch
            patch = patch_text(target_patch(report))
            if target_of(report).patch_type == "merge":
                status.recommendation.merge_patch = patch
            else:
                status.recommendation.strategic_merge_patch = patch
    return status


def final_status(report: ProfileReport, reference: ReportReference, running: ProfileRunStatus) -> ProfileRunStatus:
    """A finished run's status: from its report, keeping what only the running status knew (when each trial
    started and ended, where a failed one stopped, the conditions so far)."""
    final = status_from_report(report, reference)
    times = {t.index: t for t in running.trials or []}
    for summary in final.trials or []:
        summary.start_time = times[summary.index].start_time
        summary.completion_time = times[summary.index].completion_time
        summary.failed_in = times[summary.index].failed_in
    final.conditions, final.start_time = running.conditions, running.start_time
    return final


def degraded_condition(report: ProfileReport) -> tuple[bool, str, str]:
    """A finished run's Degraded condition: whether any resource figure could not be measured, and which."""
    unavailable = sorted({u for t in report.trials if t.resources for u in t.resources.unavailable})
    if unavailable:
        return True, "MetricsUnavailable", "; ".join(unavailable)
    return False, "MetricsAvailable", "every resource figure was measured"


# --- ModelOptimization ---------------------------------------------------------------------------------


def profile_summary(profile: ModelProfile, top: int = 10) -> ProfileSummary:
    return ProfileSummary(
        model=profile.model,
        parameters=profile.parameters,
        flops=profile.flops,
        kernel_time_us=profile.kernel_time_us,
        top_operator_types=[
            OperatorTypeShare(op_type=t.op_type, nodes=t.nodes, time_percent=t.time_percent, flops=t.flops)
            for t in profile.operator_types[:top]
        ],
        layout=profile.layout,
        nchwc_block_size=profile.nchwc_block_size,
    )


def footprint(candidate: CandidateResult) -> Footprint:
    """The status's view of a candidate: its footprint without the measurement detail."""
    summary = Footprint.model_validate(candidate.model_dump(include=set(Footprint.model_fields)))
    if summary.message:
        summary.message = summary.message[:2048]
    return summary


def optimization_status(report: OptimizationReport) -> ModelOptimizationStatus:
    """The fields of a ModelOptimization's status that its report decides (phase, conditions and follow-ups
    are the caller's: they depend on where it ran)."""
    return ModelOptimizationStatus(
        start_time=report.started_at,
        completion_time=report.finished_at,
        evaluated=len(report.candidates),
        original=footprint(report.original) if report.original else None,
        candidates=[footprint(c) for c in report.candidates[:1000]],
        pareto_frontier=report.frontiers.latency_accuracy or None,
        size_frontier=report.frontiers.latency_size or None,
        chosen=report.chosen,
        profiles=[profile_summary(p) for p in report.profiles[:3]] or None,
        artifacts=report.artifacts,
        message=(report.message or "")[:4096] or None,
    )
