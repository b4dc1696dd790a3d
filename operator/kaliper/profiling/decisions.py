"""SLO verdicts, cost, the best configuration and the rightsizing recommendation. Pure functions.

Rightsizing follows the Vertical Pod Autoscaler: the CPU request is a percentile (P90) of usage plus a
safety margin (+15%); memory comes from the peak, plus the margin; a configuration that was OOM-killed
raises memory by max(+100 MiB, x1.2) over the limit it died at.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from kaliper.api.profilerun import CostModel, LatencyObjective, RecommendationSpec, SloSpec, SloVerdict
from kaliper.api.units import format_cpu, format_memory, parse_cpu, parse_duration, parse_quantity
from kaliper.measure.figures import figure
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.judgement import Judgement, Samples, judge
from kaliper.measure.statistics import (
    PercentileEstimate,
    best_case_among_answered,
    estimate,
    nearest_rank,
    percentile_among_answered,
    share_interval,
)
from kaliper.pareto import pareto_front
from kaliper.report.schema import (
    BestChoice,
    LatencyFigures,
    RecommendationReport,
    SloCheck,
    StageResult,
    TieRule,
    TrialReport,
)

GIB = 2**30
MIN_CPU_CORES = 0.01
OOM_BUMP_BYTES = 100 * 2**20
OOM_BUMP_FACTOR = 1.2


@dataclass(frozen=True)
class Interval:
    """A percentile in milliseconds and its confidence interval (high is None: too few samples to bound it)."""

    value_ms: float | None
    low_ms: float | None = None
    high_ms: float | None = None


def metric_figures(stage: StageResult, measure: str = "corrected", metric: str = "latency") -> LatencyFigures | None:
    """The distribution an objective is about (a figure of kaliper.measure.figures), as users see it or, with
    measure "service", from the actual send. None where the stage has no token figures."""
    row = figure(metric)
    holder = stage.tokens if row.token else stage
    if holder is None:
        return None
    return getattr(holder, row.report_service if measure != "corrected" and row.report_service else row.report)


def objective_text(objective: LatencyObjective) -> str:
    """Such as "p99 <= 50ms", or "ttft p90 <= 200ms"."""
    row = figure(objective.metric)
    prefix = f"{row.label} " if row.token else ""
    return f"{prefix}p{objective.percentile:g} <= {objective.max}"


def latency_interval(
    stage: StageResult, percentile: float, measure: str = "corrected", metric: str = "latency"
) -> Interval:
    """A percentile with its interval; percentiles the report does not list come from the histogram."""
    figures = metric_figures(stage, measure, metric)
    if figures is None:
        return Interval(None)
    listed = figures.at(percentile)
    if listed is not None:
        return Interval(listed.value_ms, listed.ci_low_ms, listed.ci_high_ms)
    if not figures.histogram:
        return Interval(None)
    found = estimate(LatencyHistogram.decode(figures.histogram), percentile)
    ms = [None if v is None else v * 1000 for v in (found.value_s, found.ci_low_s, found.ci_high_s)]
    return Interval(*ms)


def latency_at(stage: StageResult, percentile: float, measure: str = "corrected") -> float | None:
    return latency_interval(stage, percentile, measure).value_ms


def interval_text(found: Interval) -> str:
    if found.value_ms is None:
        return "no samples"
    low = "?" if found.low_ms is None else f"{found.low_ms:.2f}"
    high = "unbounded: too few samples" if found.high_ms is None else f"{found.high_ms:.2f}ms"
    return f"{found.value_ms:.2f}ms (95% CI {low}-{high})"


def goodput_check(stage: StageResult, bound: float) -> SloCheck:
    """The share of requests that met every latency objective on their own, judged by its interval."""
    objective = f"goodput >= {bound:.0%} of requests"
    tokens = stage.tokens
    if tokens is None or tokens.goodput_share is None or not stage.requests:
        return SloCheck(objective=objective, verdict="Inconclusive", observed="no generation requests measured")
    low, high = share_interval(tokens.goodput_share, stage.requests)
    verdict: SloVerdict = "Met" if low >= bound else ("NotMet" if high < bound else "Inconclusive")
    observed = f"{tokens.goodput_share:.1%} of {stage.requests} (95% CI {low:.1%}-{high:.1%})"
    return SloCheck(objective=objective, verdict=verdict, observed=observed)


def answered_percentile(stage: StageResult, percentile: float) -> float | None:
    """Which percentile of the answered requests an objective's percentile of every request is, a failed
    request, or one still in flight when the stage ended, counted as slower than any answer (it was not
    answered in time). None where more requests went unanswered than the percentile leaves: the objective is
    missed whatever the answered requests took."""
    unanswered = stage.errors + stage.in_flight_at_end
    return percentile_among_answered(percentile, stage.requests - stage.errors, unanswered)


def judgement(stage: StageResult, objective: LatencyObjective) -> Judgement:
    """The objective judged on the stage's answered, failed and still-unanswered requests
    (kaliper.measure.judgement: the same judgement the stopping rule makes while a stage runs)."""
    figures = metric_figures(stage, objective.measure, objective.metric)

    def at(percentile: float) -> PercentileEstimate:
        found = latency_interval(stage, percentile, objective.measure, objective.metric)
        seconds = [None if v is None else v / 1000 for v in (found.value_ms, found.low_ms, found.high_ms)]
        return PercentileEstimate(percentile, *seconds, count=figures.count if figures else 0, confidence=0.95)

    stage = for_figure(stage, objective.metric)
    samples = Samples(stage.requests - stage.errors, at, stage.errors, stage.in_flight_at_end, stage.in_flight_oldest_s)
    return judge(objective.bound(), samples)


def for_figure(stage: StageResult, metric: str) -> StageResult:
    """The stage as an objective on `metric` counts it: a request still in flight at its end that reached the
    figure (its first token came, for ttft) has its value in the distribution, so it counts as answered."""
    reached = stage.in_flight_reached.get(metric, 0)
    if not reached:
        return stage
    return stage.model_copy(
        update={
            "requests": stage.requests + reached,
            "in_flight_at_end": stage.in_flight_at_end - reached,
            "in_flight_reached": {},
        }
    )


def best_case_percentile(stage: StageResult, objective: LatencyObjective) -> float | None:
    """Which percentile of the answered requests the objective's is in the best case the requests in flight at
    the stage's end allow (measure.statistics.best_case_among_answered)."""
    return best_case_among_answered(
        objective.percentile,
        stage.requests - stage.errors,
        stage.errors,
        stage.in_flight_at_end,
        stage.in_flight_oldest_s,
        parse_duration(objective.max),
        whole=objective.metric == "latency",
    )


def in_flight_text(stage: StageResult) -> str:
    pending, oldest = stage.in_flight_at_end, stage.in_flight_oldest_s
    return f"{pending} were still in flight when the stage ended (the oldest for {oldest:.1f} s)"


def unanswered_text(stage: StageResult) -> str:
    """How many requests went unanswered, in words: failed, and still in flight at the stage's end."""
    failed = stage.errors
    if not stage.in_flight_at_end:
        return f"{failed} of {stage.requests} requests failed"
    if not stage.requests:
        return f"no request completed: {in_flight_text(stage)}"
    return f"{failed} of {stage.requests} requests failed and {in_flight_text(stage)}"


def estimate_interval(found: PercentileEstimate | None) -> Interval:
    if found is None:
        return Interval(None)
    ms = [None if v is None else v * 1000 for v in (found.value_s, found.ci_low_s, found.ci_high_s)]
    return Interval(*ms)


def latency_check(stage: StageResult, objective: LatencyObjective) -> SloCheck:
    """A latency objective over every request of the stage, as `judgement` decides it. Failed requests, and
    those still in flight when the graceful stop ended, are in no latency figure; here they count as over the
    bound, so a server that fails fast (or not at all) never meets a latency objective by failing. A NotMet
    that rests on requests in flight but not yet past the bound is Inconclusive: they might yet have been
    answered in time."""
    stage = for_figure(stage, objective.metric)
    judged = judgement(stage, objective)
    check = worst_case_check(stage, objective, judged)
    if judged.best is None:
        return check
    if judged.best == "NotMet":
        if judged.best_found is None or judged.best_found.value_s is None:
            return check
        interval = interval_text(estimate_interval(judged.best_found))
        observed = f"{check.observed}; even if those in flight were answered now: {interval}"
        return SloCheck(objective=check.objective, verdict="NotMet", observed=observed)
    observed = (
        f"{check.observed}; but {stage.in_flight_at_end} of those in flight (the oldest for "
        f"{stage.in_flight_oldest_s:.1f} s) may yet be answered within {objective.max}: "
        + ("Met if they all are" if judged.best == "Met" else "undecided even if they all are")
    )
    return SloCheck(objective=check.objective, verdict=judged.verdict, observed=observed)


def worst_case_check(stage: StageResult, objective: LatencyObjective, judged: Judgement) -> SloCheck:
    """The objective's check with every request still in flight at the end counted as over the bound."""
    text = objective_text(objective)
    unanswered = stage.errors + stage.in_flight_at_end
    if judged.found is None:
        total = stage.requests + stage.in_flight_at_end
        if stage.requests and stage.errors == stage.requests:
            observed = f"every one of the {stage.errors} requests failed"
            if stage.in_flight_at_end:
                observed += f" and {in_flight_text(stage)}"
        else:
            observed = (
                f"{unanswered_text(stage)} ({unanswered / total:.2%}), more than the "
                f"{100 - objective.percentile:g}% that p{objective.percentile:g} leaves"
            )
        return SloCheck(objective=text, verdict="NotMet", observed=observed)
    observed = interval_text(estimate_interval(judged.found))
    if unanswered:
        observed += (
            f" at p{judged.among:.4g} of the answered requests: {unanswered_text(stage)}, counted as over the bound"
        )
    worst = judged.verdict if judged.best is None else "NotMet"  # where a best case exists, the worst missed
    return SloCheck(objective=text, verdict=worst, observed=observed)


def error_rate_check(stage: StageResult, bound: float) -> SloCheck:
    """The share of requests that failed, or of the time users spent failing, whichever is larger: in closed
    loop, users who back off during an outage send few requests while it lasts, and the share of requests
    alone would hide it."""
    objective = f"error rate <= {bound:.2%}"
    if not stage.requests:  # nothing completed: no rate to judge, and never Met
        return SloCheck(objective=objective, verdict="Inconclusive", observed="no request completed")
    judged = max(stage.error_rate, stage.error_time_share)
    observed = f"{stage.error_rate:.2%} of requests, {stage.error_time_share:.2%} of the time"
    return SloCheck(objective=objective, verdict="Met" if judged <= bound else "NotMet", observed=observed)


def slo_checks(stage: StageResult, slo: SloSpec | None) -> tuple[list[SloCheck], SloVerdict | None]:
    """Each objective's verdict, and the trial's: NotMet if any is, else Inconclusive if any is, else Met."""
    if slo is None:
        return [], None
    checks = [latency_check(stage, objective) for objective in slo.latency or []]
    if slo.max_error_rate is not None:
        checks.append(error_rate_check(stage, slo.max_error_rate))
    if slo.min_goodput_share is not None:
        checks.append(goodput_check(stage, slo.min_goodput_share))
    if slo.min_throughput is not None:
        checks.append(
            SloCheck(
                objective=f"throughput >= {slo.min_throughput:g}/s",
                verdict="Met" if stage.throughput_rps >= slo.min_throughput else "NotMet",
                observed=f"{stage.throughput_rps:.1f}/s",
            )
        )
    return checks, overall([c.verdict for c in checks])


def verdict_reason(trials: Sequence[TrialReport], verdict: str, best: int | None, slo: SloSpec | None) -> str | None:
    """The run verdict's reason, from the trial that decided it: the best trial when Met; else, of the
    measured trials with the run's verdict, the one closest to its latency objectives."""
    measured = [t for t in trials if t.status == "Succeeded" and t.stage is not None and t.slo]
    if verdict == "Met":
        deciding = next((t for t in measured if t.index == best), None)
    else:
        candidates = [t for t in measured if t.slo_verdict == verdict]
        deciding = max(candidates, key=lambda t: headroom(t, slo), default=None)
    if deciding is None:
        return None
    shown = deciding.slo if verdict == "Met" else [c for c in deciding.slo if c.verdict != "Met"]
    checks = "; ".join(f"{c.objective}: {c.observed} ({c.verdict})" for c in shown)
    return f"trial {deciding.name}: {checks}"


def overall(verdicts: list[SloVerdict]) -> SloVerdict:
    if "NotMet" in verdicts:
        return "NotMet"
    return "Inconclusive" if "Inconclusive" in verdicts else "Met"


def allocation_cost_per_hour(
    cpu_cores: float, memory_bytes: float, gpus: int, replicas: int, prices: CostModel
) -> float:
    per_replica = cpu_cores * prices.per_core_hour + memory_bytes / GIB * prices.per_gib_hour
    return replicas * (per_replica + gpus * prices.per_gpu_hour)


def per_million(hourly: float, throughput_rps: float) -> float | None:
    """What one million requests (or tokens) cost at this throughput per second (hourly figure x hours per
    million)."""
    if throughput_rps <= 0:
        return None
    return hourly * (1e6 / throughput_rps) / 3600


@dataclass(frozen=True)
class Choice:
    best: int
    report: BestChoice
    won_by: dict[int, TieRule] = field(default_factory=dict)
    """The first trials of the load levels that tied with the chosen one and lost the tie, each with the rule of
    the tie order (tie_key) that decided against it."""


def score(trial: TrialReport) -> float:
    """What the best trial minimises: money per million output tokens for generation, per million requests
    otherwise; without prices, 1 / (output tokens or requests per second)."""
    assert trial.stage is not None
    cost = trial.unit_cost()
    if cost is not None:
        return cost
    if trial.stage.tokens is not None and trial.stage.tokens.output_tokens_per_s > 0:
        return 1 / trial.stage.tokens.output_tokens_per_s
    return 1 / trial.stage.throughput_rps


def relative_noise(trial: TrialReport) -> float:
    """The 95% relative uncertainty of a trial's throughput (and so of its cost per request), from the spread
    of its measured windows (0 with fewer than two) or of its repetitions, whichever is larger."""
    assert trial.stage is not None
    # Repetitions see what windows of one run cannot (the machine's state from one run to the next): half
    # their spread is the noise when it is larger.
    return max(window_noise([trial]), (trial.spread or 0.0) / 2)


def window_noise(trials: list[TrialReport]) -> float:
    """The 95% relative half-width of the mean throughput of the trials' measured windows, all together (0
    with fewer than two windows)."""
    rates = [w.throughput_rps for t in trials if t.stage for w in t.stage.windows if not w.warmup]
    if len(rates) < 2 or not sum(rates):
        return 0.0
    mean = sum(rates) / len(rates)
    variance = sum((r - mean) ** 2 for r in rates) / (len(rates) - 1)
    return 1.96 * math.sqrt(variance / len(rates)) / mean


def headroom(trial: TrialReport, slo: SloSpec | None) -> float:
    """How far below its latency objectives the trial stayed (the smallest margin, as a fraction of the
    bound, at the upper end of the interval); without latency objectives, minus its p99 in seconds."""
    assert trial.stage is not None
    objectives = (slo.latency or []) if slo else []
    if not objectives:
        return -(latency_at(trial.stage, 99) or 0.0) / 1000
    margins = []
    for objective in objectives:
        found = estimate_interval(judgement(trial.stage, objective).found)
        if found.value_ms is None:
            margins.append(-1.0)  # the failures alone miss it
            continue
        upper = found.high_ms if found.high_ms is not None else found.value_ms
        bound = parse_duration(objective.max) * 1000
        margins.append((bound - (upper or bound)) / bound)
    return min(margins)


KV_CACHE_FULL = 0.99  # share of the KV cache in use from which new sequences wait or evict others


def server_saturation(trial: TrialReport) -> list[str]:
    """What the generation server's own gauges say held the trial back: requests queued for a free slot,
    a full KV cache, preemptions. These are the configuration's own limits (slots, memory for the KV cache),
    so they explain the trial's latency rather than disturb its measurement."""
    tokens = trial.stage.tokens if trial.stage is not None else None
    load = tokens.server_load if tokens is not None else None
    if load is None:
        return []
    flags = []
    if load.waiting_max:
        flags.append(
            f"requests queued in the {load.source} server for a free slot (up to {load.waiting_max:g}, "
            f"{load.waiting_mean or 0:.1f} on average) while its slots were busy: the slots set the pace"
        )
    if load.kv_cache_usage_max is not None and load.kv_cache_usage_max >= KV_CACHE_FULL:
        flags.append(f"the {load.source} server's KV cache was full ({load.kv_cache_usage_max:.0%} in use)")
    if load.preemptions:
        flags.append(f"the {load.source} server preempted {load.preemptions:g} sequences (KV cache evicted)")
    return flags


def disturbances(trial: TrialReport) -> list[str]:
    """The trial's flags that are not its server's own saturation: what makes its figures say less about
    the configuration than they seem to."""
    own = set(server_saturation(trial))
    return [flag for flag in trial.limited_by if flag not in own]


@dataclass(frozen=True)
class Measured:
    """One configuration at one load level, from every trial that measured it and met the SLO (a tie-break
    measures the tied ones again): the first of them stands for it in the report."""

    trials: list[TrialReport]

    @property
    def first(self) -> TrialReport:
        return self.trials[0]

    def score(self) -> float:
        return sum(score(t) for t in self.trials) / len(self.trials)

    def noise(self) -> float:
        """One trial's own noise; several trials' pooled: the spread of all their windows over their number,
        or half the spread of the trials' throughputs (what the windows of one run cannot see), the larger."""
        if len(self.trials) == 1:
            return relative_noise(self.first)
        runs = [t.stage.throughput_rps for t in self.trials]  # type: ignore[union-attr]
        between = (max(runs) - min(runs)) / (sum(runs) / len(runs)) / 2 if sum(runs) else 0.0
        return max(window_noise(self.trials), between, *((t.spread or 0.0) / 2 for t in self.trials))


def qualifies(trial: TrialReport, slo: SloSpec | None) -> bool:
    """Succeeded with throughput, and Met when there is an SLO."""
    measured = trial.status == "Succeeded" and trial.stage is not None and trial.stage.throughput_rps > 0
    return measured and (slo is None or trial.slo_verdict == "Met")


def _by_configuration(trials: list[TrialReport]) -> dict[tuple[tuple[str, str], ...], list[TrialReport]]:
    """The trials that ran, by configuration and load level (their parameters), in index order."""
    grouped: dict[tuple[tuple[str, str], ...], list[TrialReport]] = {}
    for trial in sorted((t for t in trials if t.status != "Skipped"), key=lambda t: t.index):
        grouped.setdefault(tuple(sorted(trial.parameters.items())), []).append(trial)
    return grouped


def measured_configurations(trials: list[TrialReport], slo: SloSpec | None) -> list[Measured]:
    """The configurations a choice is made among, one entry per configuration and load level, cheapest first:
    those whose every trial qualified. One measured again (a tie-break) that failed or missed the SLO the second
    time is out: its good trial does not vouch for it."""
    groups = [g for g in _by_configuration(trials).values() if all(qualifies(t, slo) for t in g)]
    return sorted((Measured(group) for group in groups), key=lambda m: (m.score(), m.first.index))


def left_out_for_a_failed_repeat(trials: list[TrialReport], slo: SloSpec | None) -> list[str]:
    """Configurations measured more than once of which one trial qualified and another did not, each named by
    its trials that did not (t2 for t0's configuration)."""
    found = []
    for group in _by_configuration(trials).values():
        failed = [t.name for t in group if not qualifies(t, slo)]
        if failed and len(failed) < len(group):
            good = next(t.name for t in group if qualifies(t, slo))
            found.append(f"{good}'s configuration ({', '.join(failed)} of it failed or missed the SLO)")
    return found


def best_trial(trials: list[TrialReport], slo: SloSpec | None, tie_tolerance: float) -> Choice | None:
    """The cheapest per million requests (per million output tokens for generation) among the trials that
    met the SLO (all succeeded ones without an SLO), each configuration and load level from every trial that
    measured it. Costs closer than the measurement noise (the two's combined throughput uncertainty, at least
    tie_tolerance) are a tie, which the one with the most latency headroom wins, among those measured
    undisturbed where there are any: a disturbed trial's figures say less about its configuration than they
    seem to (seen: a llama.cpp trial beside another test's load, its p50 doubled at half its CPU limit, won a
    tie on headroom against a trial 42% cheaper)."""
    ranked = measured_configurations(trials, slo)
    if not ranked:
        return None
    unit = "per output token" if any(m.first.generates for m in ranked) else "per request"
    cheapest = ranked[0]

    def noise(a: Measured, b: Measured) -> float:
        return max(tie_tolerance, math.hypot(a.noise(), b.noise()))

    def difference(a: Measured, b: Measured) -> float:
        return abs(b.score() - a.score()) / min(a.score(), b.score())

    tied = [m for m in ranked if difference(cheapest, m) <= noise(cheapest, m)]
    chosen = max(tied, key=lambda m: tie_key(m, slo))
    won_by = {m.first.index: tie_rule(chosen, m, slo) for m in tied if m is not chosen}
    best = chosen.first
    flagged = disturbances(best)
    # Disturbed trials that would have won the tie on headroom alone (none when the chosen one is disturbed too).
    room = headroom(best, slo)
    passed_over = (
        [] if flagged else [m.first.name for m in tied if disturbances(m.first) and headroom(m.first, slo) > room]
    )
    others = [m for m in (tied if len(tied) > 1 else ranked) if m is not chosen]
    runner_up = others[0] if others else None
    if runner_up is None:
        certainty, text = "Clear", f"{best.name} is the only trial that qualified"
        gap = margin = None
    else:
        gap, margin = difference(chosen, runner_up), noise(chosen, runner_up)
        second = runner_up.first
        more = "more" if runner_up.score() >= chosen.score() else "less"
        if len(tied) > 1:
            certainty = "Tie"
            rule = won_by[second.index]
            text = f"{second.name} costs {gap:.1%} {more} {unit}, inside the {margin:.1%} noise: a tie, "
            text += TIE_WORDS[rule][0]
            if rule == "headroom":
                text += f" ({best.name} {_headroom_text(best, slo)}, {second.name} {_headroom_text(second, slo)})"
            if passed_over:
                among = " (" if rule == "undisturbed" else " among the trials measured undisturbed ("
                text += (
                    f"{among}{', '.join(passed_over)} measured while limited by something other than its configuration)"
                )
        else:
            certainty = "Clear"
            text = f"the runner-up {second.name} costs {gap:.1%} more {unit}, beyond the {margin:.1%} noise"
        if len(chosen.trials) > 1 or len(runner_up.trials) > 1:
            text += f" ({best.name} measured {len(chosen.trials)} times, {second.name} {len(runner_up.trials)})"
    if dropped := left_out_for_a_failed_repeat(trials, slo):
        text += f"; left out, measured again without qualifying: {'; '.join(dropped)}"
    if flagged:
        certainty = "Disturbed"
        text = f"measured while limited by something other than its configuration ({flagged[0]}); {text}"
    report = BestChoice(
        certainty=certainty,
        runner_up=runner_up.first.index if runner_up else None,
        cost_difference=round(gap, 4) if gap is not None else None,
        noise=round(margin, 4) if margin is not None else None,
        explanation=text,
    )
    return Choice(best.index, report, won_by)


# Each rule of the tie order in words: how the choice's explanation says it decided, and how the row of the
# configuration that lost says the choice won (choice_rows).
TIE_WORDS: dict[TieRule, tuple[str, str]] = {
    "undisturbed": ("decided as the one measured undisturbed", "won as the one measured undisturbed"),
    "headroom": ("decided by latency headroom", "won on latency headroom"),
    "cheaper": ("decided as the cheaper", "won as the cheaper"),
    "first": ("decided as the first measured", "won as the first measured"),
}


def tie_key(level: Measured, slo: SloSpec | None) -> tuple[bool, float, float, int]:
    """The tie order, highest wins: measured undisturbed, then the most latency headroom, then the cheaper, then
    the first measured."""
    return (not disturbances(level.first), headroom(level.first, slo), -level.score(), -level.first.index)


def tie_rule(chosen: Measured, other: Measured, slo: SloSpec | None) -> TieRule:
    """Which rule of the tie order decided between the chosen load level and another it tied with."""
    rules: tuple[TieRule, ...] = ("undisturbed", "headroom", "cheaper", "first")
    won, lost = tie_key(chosen, slo), tie_key(other, slo)
    return next((rule for rule, a, b in zip(rules, won, lost, strict=True) if a != b), "first")


def _headroom_text(trial: TrialReport, slo: SloSpec | None) -> str:
    room = headroom(trial, slo)
    if slo is not None and slo.latency:
        return f"{room:.0%} below its latency bound"
    return f"p99 {-room * 1000:.2f}ms"


def replicas_for(target: float, per_replica: float, noise: float) -> tuple[int, int, int | None]:
    """Replicas to serve `target` at `per_replica` each: the count, and its 95% interval from the relative
    uncertainty of the throughput (the high end None when the uncertainty reaches 100%)."""
    needed = max(1, math.ceil(target / per_replica))
    low = max(1, math.ceil(target / (per_replica * (1 + noise))))
    high = max(1, math.ceil(target / (per_replica * (1 - noise)))) if noise < 1 else None
    return needed, low, high


def largest(sizes: list[tuple[int, int, int | None]]) -> tuple[int, int, int | None]:
    """The replicas for several targets (replicas_for each): the larger count and interval end of each."""
    high = None if any(s[2] is None for s in sizes) else max(s[2] or 0 for s in sizes)
    return max(s[0] for s in sizes), max(s[1] for s in sizes), high


def recommend(
    best: TrialReport,
    trials: list[TrialReport],
    settings: RecommendationSpec,
    replicas: int,
    target_throughput: float | None,
    target_output_tokens_per_s: float | None = None,
) -> RecommendationReport:
    resources = best.resources
    margin = 1 + settings.safety_margin
    notes = []
    cpu_request = cpu_limit = memory_request = memory_limit = None
    if resources and resources.series:
        cpu_at = nearest_rank([p.cpu_cores / replicas for p in resources.series], settings.cpu_percentile)
        cpu = max(cpu_at * margin, MIN_CPU_CORES)
        cpu_request = format_cpu(cpu)
        configured = best.parameters.get("cpu")
        # Keep the limit the best trial ran with, unless the request outgrew it (a limit below it is invalid).
        cpu_limit = configured if configured and float(parse_cpu(configured)) >= cpu else cpu_request
        notes.append(
            f"CPU request: P{settings.cpu_percentile:g} of usage per replica "
            f"({cpu_at:.3f} cores) + {settings.safety_margin:.0%}"
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
    sizes: list[tuple[int, int, int | None]] = []
    noise = relative_noise(best) if best.stage else 0.0
    if target_throughput and best.stage and best.stage.throughput_rps > 0:
        per_replica = best.stage.throughput_rps / replicas
        sizes.append(replicas_for(target_throughput, per_replica, noise))
        notes.append(f"replicas: {target_throughput:g} req/s target / {per_replica:.1f} req/s per replica")
    tokens = best.stage.tokens if best.stage else None
    if target_output_tokens_per_s and tokens is not None and tokens.output_tokens_per_s > 0:
        per_replica = tokens.output_tokens_per_s / replicas
        sizes.append(replicas_for(target_output_tokens_per_s, per_replica, noise))
        notes.append(
            f"replicas: {target_output_tokens_per_s:g} output tokens/s target / {per_replica:.1f} tokens/s per replica"
        )
    needed, low, high = replicas, None, None
    if sizes:
        needed, low, high = largest(sizes)
        upper = f"{high}" if high is not None else "unbounded"
        notes.append(f"{needed} replicas, 95% interval {low}-{upper} (throughput uncertain by {noise:.1%})")
    return RecommendationReport(
        cpu_request=cpu_request,
        cpu_limit=cpu_limit,
        memory_request=memory_request,
        memory_limit=memory_limit,
        replicas=needed,
        replicas_low=low,
        replicas_high=high,
        based_on_trial=best.index,
        rationale="; ".join(notes) or "no resource figures were available",
    )


def cost_latency_frontier(trials: Sequence[TrialReport]) -> list[int]:
    """Indexes of the trials no other trial beats on both cost (per million requests; per million output tokens
    for generation) and p99 (of the latency, of the time to first token for generation: the figure the load
    generator reported at 99), in trial order: the report's `frontier`, which its cost chart draws."""
    points = []
    for trial in trials:
        p99 = trial.frontier_p99_ms()
        cost = trial.unit_cost()
        if cost is not None and p99 is not None:
            points.append((cost, p99, trial.index))
    return pareto_front(points)
