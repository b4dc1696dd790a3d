"""What `kaliper run` and the operator do alike with trials: turn a load test and its resource figures
into a trial, price it, judge it against the SLO, flag what limited it, and, once every trial is in, pick the
best and recommend. Pure functions: the two paths differ only in how they deploy and measure."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from kaliper.api.modeldeployment import ModelDeploymentSpec, ModelDeploymentTemplate
from kaliper.api.profilerun import ProfileRunSpec, RegressionTolerance, SloSpec, TrialSummary
from kaliper.api.units import parse_cpu, parse_quantity
from kaliper.profiling import decisions, tiebreak
from kaliper.profiling.capacity import capacities
from kaliper.profiling.choice_rows import configuration_rows
from kaliper.profiling.comparison import against_baseline
from kaliper.profiling.plan import Configuration, load_levels, parameters_key
from kaliper.profiling.quality import held_back_text, quality_scores
from kaliper.report.schema import (
    LoadTestResult,
    ProfileReport,
    Rehearsal,
    Repetition,
    ServerLoad,
    SloCheck,
    StageResult,
    Startup,
    TrialReport,
    TrialResources,
)
from kaliper.runtimes import runtime_of

# A generator using this share of the CPU it can use is saturated: it sets the pace, not the target.
GENERATOR_SATURATED = 0.9
# A server using less than this share of its CPU limit, and throttled in fewer than THROTTLE_FREE of its
# periods, is not held back by its limit.
BELOW_LIMIT, THROTTLE_FREE = 0.8, 0.02
# Latency this many times the configuration's lowest level's (p50) is latency that rose with the load.
LATENCY_ROSE = 1.5
# Cores the machine spent on work other than the server and the load generator that disturb a local trial
# (the runtime's own sampling and the kernel take a few hundredths of a core).
OTHER_WORK_CORES = 0.25


def new_report(spec: ProfileRunSpec, name: str, namespace: str | None, started_at: datetime) -> ProfileReport:
    """The report's header, as both paths write it."""
    reference, workload = spec.target.deployment_ref, spec.target.workload_ref
    if reference is not None:
        target = f"ModelDeployment/{reference.name}"
    else:
        target = f"{workload.kind}/{workload.name}" if workload is not None else str(spec.target.url)
    return ProfileReport(
        name=name,
        namespace=namespace,
        started_at=started_at,
        target=target,
        strategy=spec.search.strategy,
        currency=spec.cost.currency,
        slo=spec.slo,
        level_name=load_levels(spec)[1],
    )


def from_load_test(
    index: int, name: str, parameters: dict[str, str], result: LoadTestResult, slo: SloSpec | None = None
) -> TrialReport:
    """A trial from the load generator's results document: Succeeded with its stage, or Failed with why.
    Repetitions (several stages of one level) are listed with their own SLO verdicts; the median by
    throughput stands for the trial."""
    if result.error or not result.stages:
        message = result.error or "the load generator measured nothing"
        # What a run stopped early measured (a target that went down mid-stage) is kept for the report.
        measured = result.stages[-1] if result.stages else None
        return TrialReport(
            index=index, name=name, parameters=parameters, status="Failed", message=message, stage=measured
        )
    stages = result.stages
    median = median_stage(stages)
    trial = TrialReport(
        index=index, name=name, parameters=parameters, status="Succeeded", stage=median, quality=result.quality
    )
    if len(stages) > 1:
        trial.repetitions = [
            Repetition(
                stage=s.index,
                throughput_rps=s.throughput_rps,
                p99_ms=decisions.latency_at(s, 99),
                error_rate=s.error_rate,
                slo_verdict=decisions.slo_checks(s, slo)[1],
            )
            for s in stages
        ]
        rates = [s.throughput_rps for s in stages]
        trial.spread = round((max(rates) - min(rates)) / median.throughput_rps, 4) if median.throughput_rps else None
    return trial


def median_stage(stages: list[StageResult]) -> StageResult:
    """The repetition that stands for a trial: the median by throughput (the lower middle of an even count)."""
    return sorted(stages, key=lambda s: (s.throughput_rps, s.index))[(len(stages) - 1) // 2]


def with_resources(
    trial: TrialReport,
    resources: TrialResources | None,
    startup: Startup | None = None,
    rehearsal: Rehearsal | None = None,
) -> TrialReport:
    """The trial with its servers' figures (resources; startup where the executor reads it here, the operator
    from the pods; an autoscaled target's rehearsal); a replica OOM-killed under the load fails it (what it
    measured is kept)."""
    found = {"startup": startup, "rehearsal": rehearsal}
    trial = trial.model_copy(update={"resources": resources, **{k: v for k, v in found.items() if v is not None}})
    if resources is not None and resources.oom_kills and trial.status == "Succeeded":
        trial.status, trial.message = "Failed", "OOMKilled: a replica exceeded its memory limit"
    return trial


def needs_server_load_from_prometheus(trial: TrialReport, deployment: ModelDeploymentTemplate | None) -> bool:
    """A generation trial of an LLM runtime's deployment whose load generator did not read the server's
    gauges: with several replicas it does not (through the Service each read reaches one of them), and only
    Prometheus, scraping every pod, sees them all. With one replica the generator's readings at every window
    edge are denser than scrapes, and stand."""
    tokens = trial.stage.tokens if trial.stage is not None else None
    return (
        tokens is not None
        and tokens.server_load is None
        and deployment is not None
        and runtime_of(deployment).generative
    )


def with_server_load(trial: TrialReport, load: ServerLoad | str) -> TrialReport:
    """The trial with its server load from Prometheus (every server pod), or, when Prometheus could not give
    it, the reason among what was unavailable."""
    stage = trial.stage
    if stage is None or stage.tokens is None:
        return trial
    if isinstance(load, ServerLoad):
        tokens = stage.tokens.model_copy(update={"server_load": load})
        return trial.model_copy(update={"stage": stage.model_copy(update={"tokens": tokens})})
    resources = trial.resources or TrialResources(source="prometheus")
    unavailable = [*resources.unavailable, load]
    return trial.model_copy(update={"resources": resources.model_copy(update={"unavailable": unavailable})})


def target_model_name(spec: ProfileRunSpec, base: ModelDeploymentTemplate | None) -> str:
    """The model name requests carry: the target ModelDeployment's model name, else its name (a workload's
    server has no model name Kaliper knows: request.modelName sets it)."""
    if isinstance(base, ModelDeploymentSpec) and base.model.name:
        return base.model.name
    return spec.target.deployment_ref.name if spec.target.deployment_ref else "model"


def outcome_words(report: TrialReport) -> str:
    """How a finished trial went, for its event: "met the SLO", "failed: <why>"."""
    if report.status != "Succeeded":
        return f"failed: {report.message or ''}"
    verdicts = {"Met": "met the SLO", "NotMet": "missed the SLO", "Inconclusive": "could not decide the SLO"}
    return verdicts.get(report.slo_verdict or "", "measured")


def unmeasured_report(trial: TrialSummary, interrupted: bool = False) -> TrialReport:
    """The report of a trial that measured nothing, from its summary: skipped (with why), failed before it
    measured (its restarts and OOM kills kept), or still Pending at the end: not run, the run interrupted."""
    resources = None
    if trial.resources is not None:  # restarts and OOM kills of a trial that never served
        resources = TrialResources(source="pod-status", **trial.resources.model_dump(exclude_none=True))
    status, message = trial.phase, trial.message
    if status not in ("Skipped", "Failed"):
        status = "Skipped"
        message = "not run: the run was interrupted" if interrupted else (message or "not explored by the search")
    return TrialReport(
        index=trial.index,
        name=trial.name,
        parameters=trial.parameters,
        status=status,
        message=message,
        resources=resources,
    )


def allocated(config: Configuration) -> tuple[float, float, int, int]:
    """(cores, memory bytes, GPUs, replicas) the configuration reserves: limits, else requests; the replicas it
    always holds (an autoscaler's minimum)."""
    spec = config.deployment
    if spec is None or spec.resources is None:
        return 0.0, 0.0, 0, spec.replicas_at_least() if spec else 1
    chosen = spec.resources.limits or spec.resources.requests
    fallback = spec.resources.requests
    cpu = (chosen and chosen.cpu) or (fallback and fallback.cpu)
    memory = (chosen and chosen.memory) or (fallback and fallback.memory)
    gpus = spec.resources.gpu.count if spec.resources.gpu else 0
    return (
        float(parse_cpu(cpu)) if cpu else 0.0,
        float(parse_quantity(memory)) if memory else 0.0,
        gpus,
        spec.replicas_at_least(),
    )


def cpu_limit(config: Configuration) -> float | None:
    """Cores per replica the server may use (its CPU limit); None when unlimited."""
    spec = config.deployment
    if spec is None or spec.resources is None or spec.resources.limits is None or not spec.resources.limits.cpu:
        return None
    return float(parse_cpu(spec.resources.limits.cpu))


def configuration_cost_per_hour(spec: ProfileRunSpec, config: Configuration) -> float:
    cores, memory, gpus, replicas = allocated(config)
    return decisions.allocation_cost_per_hour(cores, memory, gpus, replicas, spec.cost)


def judge_trial(
    trial: TrialReport, spec: ProfileRunSpec, config: Configuration, other_work_cores: float | None = OTHER_WORK_CORES
) -> TrialReport:
    """The trial with its price (per hour, per million requests, core-hours), SLO verdict and the flags
    that need no other trial (the generator's own CPU, late sends, other work on the machine from
    `other_work_cores` up; None: not checked)."""
    cores, _, _, replicas = allocated(config)
    hourly = configuration_cost_per_hour(spec, config)
    held: float = replicas
    if trial.rehearsal is not None and replicas:  # an autoscaler's: priced for the replicas it held, idle or not
        held = trial.rehearsal.mean_replicas
        hourly = hourly / replicas * held
    trial = trial.model_copy(update={"replicas": replicas, "cost_per_hour": round(hourly, 6) if hourly else None})
    stage = trial.stage
    if stage is None:
        return trial
    if hourly and stage.throughput_rps > 0:
        trial.cost_per_million_requests = decisions.per_million(hourly, stage.throughput_rps)
    if cores and stage.throughput_rps > 0:
        trial.core_hours_per_million_requests = cores * held * 1e6 / stage.throughput_rps / 3600
    tokens = stage.tokens
    if tokens is not None and tokens.output_tokens_per_s > 0:
        if hourly:
            trial.cost_per_million_output_tokens = decisions.per_million(hourly, tokens.output_tokens_per_s)
            trial.cost_per_million_tokens = decisions.per_million(hourly, tokens.total_tokens_per_s)
        if cores:
            trial.core_hours_per_million_output_tokens = cores * held * 1e6 / tokens.output_tokens_per_s / 3600
    trial.slo, trial.slo_verdict = decisions.slo_checks(stage, spec.slo)
    verdicts = sorted({r.slo_verdict for r in trial.repetitions if r.slo_verdict})
    if len(verdicts) > 1:  # the repetitions disagree: the SLO cannot be decided from them
        trial.slo_verdict = "Inconclusive"
        trial.slo.append(
            SloCheck(
                objective="repetitions agree",
                verdict="Inconclusive",
                observed=", ".join(r.slo_verdict or "-" for r in trial.repetitions),
            )
        )
    trial.limited_by = trial_limits(trial, other_work_cores)
    return trial


def trial_limits(trial: TrialReport, other_work_cores: float | None = OTHER_WORK_CORES) -> list[str]:
    """Flags from the trial alone: the generator's own CPU, late sends, and (locally, where the whole
    machine's CPU is measured) other work competing with the trial, from `other_work_cores` up (None: not
    checked)."""
    stage = trial.stage
    assert stage is not None
    flags = []
    usage = stage.generator_usage
    if usage is not None and usage.saturation >= GENERATOR_SATURATED:
        flags.append(
            f"the load generator used {usage.cpu_cores:.2f} of the {usage.capacity_cores:g} cores it can use: "
            "it may have set the pace (add load.processes, or give it more CPU)"
        )
    if stage.late_sends is not None and stage.late_sends.flagged:
        flags.append(stage.late_sends.reason or f"{stage.late_sends.share:.1%} of sends were late")
    resources = trial.resources
    if (
        other_work_cores is not None
        and resources is not None
        and resources.host_cpu_cores is not None
        and resources.cpu_avg_cores is not None
    ):
        generator = usage.cpu_cores if usage is not None else 0.0
        other = resources.host_cpu_cores - resources.cpu_avg_cores - generator
        if other >= other_work_cores:
            flags.append(
                f"the machine was busy with other work: {other:.2f} cores besides the server "
                f"({resources.cpu_avg_cores:.2f}) and the load generator ({generator:.2f})"
            )
    return flags + decisions.server_saturation(trial)


def server_limits(trials: list[TrialReport], configurations: list[Configuration], level_name: str) -> None:
    """Flag trials whose latency rose with the load while their server stayed below its CPU limit, not
    throttled: something other than the configuration under test (the machine's other work, the generator,
    the server's own concurrency) capped it. Compared within each configuration, against its lowest level."""
    by_config: dict[tuple, list[TrialReport]] = defaultdict(list)
    for trial in trials:
        key = tuple(sorted((k, v) for k, v in trial.parameters.items() if k != level_name))
        by_config[key].append(trial)
    limits = {tuple(sorted(c.parameters.items())): cpu_limit(c) for c in configurations}
    for key, group in by_config.items():
        limit = limits.get(key)
        measured = sorted(
            (t for t in group if t.status == "Succeeded" and t.stage is not None),
            key=lambda t: float(t.parameters.get(level_name, "0")),
        )
        if limit is None or len(measured) < 2:
            continue
        base = decisions.latency_at(measured[0].stage, 50)  # type: ignore[arg-type]
        for trial in measured[1:]:
            resources, p50 = trial.resources, decisions.latency_at(trial.stage, 50)  # type: ignore[arg-type]
            if not base or p50 is None or resources is None or resources.cpu_avg_cores is None:
                continue
            if decisions.server_saturation(trial):  # the server's own queue explains the rise
                continue
            used = resources.cpu_avg_cores / trial.replicas
            throttled = resources.cpu_throttled_ratio or 0.0
            if p50 >= LATENCY_ROSE * base and used < BELOW_LIMIT * limit and throttled < THROTTLE_FREE:
                flag = (
                    f"p50 rose from {base:.2f}ms at {level_name} {measured[0].parameters[level_name]} to "
                    f"{p50:.2f}ms while the server used {used:.2f} of its {limit:g}-core limit, throttled in "
                    f"{throttled:.1%} of periods: something other than the limit capped it"
                )
                if flag not in trial.limited_by:  # a run concluded twice flags once
                    trial.limited_by.append(flag)


def conclude(
    spec: ProfileRunSpec,
    report: ProfileReport,
    configurations: list[Configuration],
    baseline: ProfileReport | None = None,
) -> None:
    """The verdict, the best trial (with how certain the choice is), the recommendation, each configuration's
    capacity and the comparison with spec.baseline's report (when read), from every trial of the report; a run
    none of whose trials succeeded has failed (on both paths: the operator marks it Failed, `kaliper run`
    exits 1)."""
    report.load_generation_s = sum(t.load_seconds() for t in report.trials)
    server_limits(report.trials, configurations, load_levels(spec)[1])
    if not any(t.status == "Succeeded" for t in report.trials):
        first = next((t.message for t in report.trials if t.status == "Failed"), None) or "no trial ran"
        report.error = f"no trial succeeded; the first failure: {first}"
    report.frontier = decisions.cost_latency_frontier(report.trials)
    have_slo = spec.slo is not None
    tie_break_from = tiebreak.first_index(spec, configurations)
    if spec.slo is not None and configurations:
        first_probe = len(configurations) * len(configurations[0].levels)
        report.capacities = capacities(
            [t for t in report.trials if t.index < tie_break_from],  # a tie-break's trials measure no new load
            configurations[0].level_name,
            first_probe,
            spec.slo.target_throughput,
            spec.slo.target_output_tokens_per_second,
        )
    qualities = quality_scores(spec.quality, report.trials) if spec.quality is not None else {}
    below = {key for key, found in qualities.items() if found.verdict == "Below"}
    eligible = [t for t in report.trials if parameters_key(t.configuration()) not in below]
    choice = decisions.best_trial(eligible, spec.slo, spec.recommendation.tie_tolerance)
    report.configurations = configuration_rows(report.trials, spec.slo, choice, qualities)
    if have_slo:
        verdicts = {t.slo_verdict for t in eligible if t.status == "Succeeded"}
        report.verdict = "Met" if choice else ("Inconclusive" if "Inconclusive" in verdicts else "NotMet")
        best_index = choice.best if choice else None
        report.verdict_reason = decisions.verdict_reason(eligible, report.verdict, best_index, spec.slo)
    if choice is not None and (held := held_back_text(report.configurations)):
        choice.report.explanation += f"; {held}"
    if choice is not None:
        best = next(t for t in report.trials if t.index == choice.best)
        report.best_trial, report.choice = best.index, choice.report
        spent = tiebreak.tie_break_text(report.trials, tie_break_from)
        if spent:
            choice.report.explanation += f"; {spent}"
        if choice.report.certainty != "Clear":
            report.warnings.append(f"best trial {best.name}: {choice.report.explanation}")
        report.recommendation = decisions.recommend(
            best,
            report.trials,
            spec.recommendation,
            best.replicas,
            spec.slo.target_throughput if spec.slo else None,
            spec.slo.target_output_tokens_per_second if spec.slo else None,
        )
        probes = sum(c.probes for c in report.capacities)
        if probes:
            seconds = sum(c.probe_seconds for c in report.capacities)
            report.recommendation.rationale += (
                f"; the capacity search added {probes} probes between the listed load levels ({seconds:.0f} s of load)"
            )
    if baseline is not None and spec.baseline is not None:
        tolerance = (spec.slo.fail_if_regressed if spec.slo else None) or RegressionTolerance()
        report.baseline, report.comparison = against_baseline(spec.baseline.describe(), baseline, report, tolerance)
    if not spec.report.include_time_series:  # after the choice and the recommendation, which use them
        report.drop_time_series()
