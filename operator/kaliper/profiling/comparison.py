"""A run against a baseline run: for each configuration both measured at the same load, each figure better,
worse or within the noise, judged from the 95% intervals both runs measured. Pure functions.

A figure is worse when the two intervals do not overlap and the new one lies on the bad side; within the noise
when they overlap. A rate's or a percentile's interval is at least RERUN_NOISE_FLOOR wide on each side: one run's
own intervals do not see how much the machine moves from one run to the next. Failures count against every
figure, as in the SLO verdicts: a latency percentile is read among every request sent (a failed or unanswered
one slower than any answer), so a server that fails more cannot look faster; and the error rate is compared
with its own interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kaliper.api.profilerun import BaselineComparison, RegressionTolerance
from kaliper.measure.figures import LATENCY, STATUS_PERCENTILES, status_figures_shown
from kaliper.measure.statistics import share_interval
from kaliper.profiling.decisions import (
    answered_percentile,
    for_figure,
    latency_interval,
    relative_noise,
)
from kaliper.profiling.plan import ParametersKey, parameters_key
from kaliper.report.schema import ConfigurationRow, FigureComparison, ProfileReport, StageResult, TrialReport

INFINITE = float("inf")


@dataclass(frozen=True)
class Reading:
    """A figure with its 95% interval (high may be infinite: too many failures to read it at all)."""

    value: float
    low: float
    high: float


def _latency(metric: str, percentile: float) -> Callable[[TrialReport], Reading | None]:
    def read(trial: TrialReport) -> Reading | None:
        assert trial.stage is not None
        if metric != "latency" and trial.stage.tokens is None:
            return None
        stage = for_figure(trial.stage, metric)  # in flight with its first token: counted, as the verdict does
        among_all = answered_percentile(stage, percentile)
        if among_all is None:  # more requests failed than the percentile leaves: it is beyond any answer
            return Reading(INFINITE, INFINITE, INFINITE)
        found = latency_interval(stage, among_all, "corrected", metric)
        if found.value_ms is None:
            return None
        low = found.low_ms if found.low_ms is not None else 0.0
        high = found.high_ms if found.high_ms is not None else INFINITE
        floor = found.value_ms * RERUN_NOISE_FLOOR
        return Reading(found.value_ms, min(low, found.value_ms - floor), max(high, found.value_ms + floor))

    return read


# A rate's or a percentile's interval is at least this wide on each side: one run's windows and order
# statistics understate how much a rerun moves. Measured on this project's 2-core machine: the same ground-truth
# server (4 users, 20 ms) run 22 times in a row, p50 20.8-22.5 ms and throughput 173-190 req/s while each run's
# own interval was about +-1.1%; in the suite's quiet phase two runs 10 s apart read 170.7 and 180.3 req/s
# (5.6%), each run's windows steady. Two figures less than 8% apart are within the noise.
RERUN_NOISE_FLOOR = 0.04


def _with_noise(value: Callable[[TrialReport], float | None]) -> Callable[[TrialReport], Reading | None]:
    """A rate (or a cost per unit of it), its interval from the trial's throughput uncertainty."""

    def read(trial: TrialReport) -> Reading | None:
        found = value(trial)
        if found is None:
            return None
        noise = max(relative_noise(trial), RERUN_NOISE_FLOOR)
        return Reading(found, found * (1 - noise), found * (1 + noise))

    return read


def _error_rate(trial: TrialReport) -> Reading | None:
    stage: StageResult = trial.stage  # type: ignore[assignment]
    sent = stage.requests + stage.in_flight_at_end
    if not sent:
        return None
    share = (stage.errors + stage.in_flight_at_end) / sent
    low, high = share_interval(share, sent)
    return Reading(share, low, high)


def _output_tokens(trial: TrialReport) -> float | None:
    return trial.stage.tokens.output_tokens_per_s if trial.stage and trial.stage.tokens else None


@dataclass(frozen=True)
class ComparedFigure:
    """One figure a comparison reads from both runs' trials."""

    label: str
    """As reports print it: "throughput", "ttft p99"."""
    family: str
    """The catalogue's name (kaliper.measure.figures) for a percentile, else throughput, error_rate or cost: the
    slo.failIfRegressed field that sets its tolerance."""
    unit: str
    higher_is_better: bool
    read: Callable[[TrialReport], Reading | None]


RATES = (
    ComparedFigure(
        "throughput", "throughput", "req/s", True, _with_noise(lambda t: t.stage.throughput_rps if t.stage else None)
    ),
    ComparedFigure("output tokens/s", "throughput", "tok/s", True, _with_noise(_output_tokens)),
)
FAILURES_AND_COST = (
    ComparedFigure("error rate", "error_rate", "share", False, _error_rate),
    ComparedFigure("cost per million", "cost", "", False, _with_noise(lambda t: t.unit_cost())),
)


def compared_figures(thought: bool) -> list[ComparedFigure]:
    """What a comparison reads: the rates, p50 and p99 of latency and of every token figure the status shows
    (time to first output only where a model thought: it is ttft otherwise), the error rate and the cost."""
    percentiles = [
        ComparedFigure(f"{row.label} p{p}", row.name, "ms", False, _latency(row.name, p))
        for row in (LATENCY, *status_figures_shown(thought))
        for p in STATUS_PERCENTILES
    ]
    return [*RATES, *percentiles, *FAILURES_AND_COST]


QUALITY = "quality"  # a configuration's score on the quality dataset (spec.quality), from the report's rows
FAMILIES = (*dict.fromkeys(c.family for c in compared_figures(thought=True)), QUALITY)


def _thought(*trials: TrialReport) -> bool:
    return any(t.stage is not None and t.stage.tokens is not None and t.stage.tokens.reasoning_requests for t in trials)


def verdict(baseline: Reading, new: Reading, higher_is_better: bool) -> str:
    if new.low > baseline.high:
        return "better" if higher_is_better else "worse"
    if new.high < baseline.low:
        return "worse" if higher_is_better else "better"
    return "within the noise"


def change(baseline: float, new: float) -> float | None:
    """(new - baseline) / baseline; None where that means nothing (a zero or infinite baseline)."""
    if baseline in (0, INFINITE) or new == INFINITE:
        return None
    return (new - baseline) / baseline


def compare_trials(baseline: TrialReport, new: TrialReport) -> list[FigureComparison]:
    """Every figure both trials measured."""
    found = []
    for compared in compared_figures(_thought(baseline, new)):
        a, b = compared.read(baseline), compared.read(new)
        if a is not None and b is not None:
            found.append(_compared(new.parameters, compared, a, b))
    return found


def _compared(parameters: dict[str, str], compared: ComparedFigure, a: Reading, b: Reading) -> FigureComparison:
    return FigureComparison(
        parameters=parameters,
        figure=compared.label,
        family=compared.family,
        unit=compared.unit,
        baseline=_finite(a.value),
        baseline_low=_finite(a.low),
        baseline_high=_finite(a.high),
        value=_finite(b.value),
        low=_finite(b.low),
        high=_finite(b.high),
        change=change(a.value, b.value),
        verdict=verdict(a, b, compared.higher_is_better),  # type: ignore[arg-type]
    )


# A configuration's quality is its row's (spec.quality), not any one trial's: compare_quality reads it.
QUALITY_SCORE = ComparedFigure("quality", QUALITY, "share", True, lambda trial: None)


def compare_quality(baseline: Sequence[ConfigurationRow], new: Sequence[ConfigurationRow]) -> list[FigureComparison]:
    """Each configuration's quality score (spec.quality) in both runs, higher being better, by its interval."""
    scored = {parameters_key(r.parameters): r.quality for r in baseline if r.quality and r.quality.verdict != "Unknown"}
    found = []
    for row in new:
        before, now = scored.get(parameters_key(row.parameters)), row.quality
        if before is not None and now is not None and now.verdict != "Unknown":
            a, b = Reading(before.score, before.ci_low, before.ci_high), Reading(now.score, now.ci_low, now.ci_high)
            found.append(_compared(row.parameters, QUALITY_SCORE, a, b))
    return found


def _finite(value: float) -> float | None:
    return None if value == INFINITE else value


def compare_runs(baseline: Sequence[TrialReport], new: Sequence[TrialReport]) -> list[FigureComparison]:
    """Every figure of every trial that both runs measured with the same parameters (configuration and load)."""
    measured = {_key(t): t for t in baseline if t.status == "Succeeded" and t.stage is not None}
    found = []
    for trial in new:
        match = measured.get(_key(trial))
        if trial.status == "Succeeded" and trial.stage is not None and match is not None:
            found += compare_trials(match, trial)
    return found


def unmatched(baseline: Sequence[TrialReport], new: Sequence[TrialReport]) -> list[str]:
    """Configurations one run measured and the other did not (or failed), in words."""
    lines = []
    ok_a = {_key(t) for t in baseline if t.status == "Succeeded"}
    ok_b = {_key(t) for t in new if t.status == "Succeeded"}
    for trial in new:
        if _key(trial) in ok_a and _key(trial) not in ok_b:
            lines.append(f"{_words(trial.parameters)}: measured in the baseline, {trial.status} now")
    for trial in baseline:
        if _key(trial) in ok_b and _key(trial) not in ok_a:
            lines.append(f"{_words(trial.parameters)}: {trial.status} in the baseline, measured now")
    return lines


def regressions(found: Sequence[FigureComparison], tolerance: Callable[[str], float]) -> list[FigureComparison]:
    """The figures that got worse beyond the noise and by more than their tolerance (a fraction of the
    baseline, by the figure's family; a worsening whose size cannot be stated, such as a percentile beyond every
    answer, always counts)."""
    return [
        c
        for c in found
        if c.verdict == "worse" and (c.change is None or abs(c.change) > tolerance(c.family or c.figure))
    ]


def compare_reports(baseline: ProfileReport, new: ProfileReport) -> list[FigureComparison]:
    """Every figure of every trial both runs measured alike, then each configuration's quality both scored."""
    return [*compare_runs(baseline.trials, new.trials), *compare_quality(baseline.configurations, new.configurations)]


def against_baseline(
    source: str, baseline: ProfileReport, new: ProfileReport, tolerance: RegressionTolerance
) -> tuple[BaselineComparison, list[FigureComparison]]:
    """A run against its baseline: the summary its report and status carry, and every figure compared."""
    found = compare_reports(baseline, new)
    summary = BaselineComparison(
        source=source,
        figures=len(found),
        worse=sum(c.verdict == "worse" for c in found),
        better=sum(c.verdict == "better" for c in found),
        regressions=[c.line()[:512] for c in regressions(found, tolerance.for_figure)][:20],
        not_compared=[line[:512] for line in unmatched(baseline.trials, new.trials)][:20],
    )
    return summary, found


def _key(trial: TrialReport) -> ParametersKey:
    return parameters_key(trial.parameters)


def _words(parameters: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in parameters.items()) or "the target"
