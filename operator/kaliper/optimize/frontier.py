"""Decisions over measured candidates: which meet the goals, which are on the Pareto frontiers, which is
chosen. Pure functions over the report's types."""

from __future__ import annotations

from collections.abc import Sequence

from kaliper.api.modeloptimization import Evaluator
from kaliper.pareto import pareto_front
from kaliper.report.optimization import CandidateResult


def frontiers(measured: Sequence[CandidateResult], higher_is_better: bool) -> tuple[list[str], list[str]]:
    """(latency vs accuracy, latency vs size) frontiers over the succeeded models (original included).
    Without an accuracy figure the first frontier is latency alone: the fastest model(s)."""
    usable = [c for c in measured if c.status == "Succeeded" and c.latency_ms is not None]
    sign = -1.0 if higher_is_better else 1.0
    by_accuracy = pareto_front(
        [(c.latency_ms or 0.0, sign * c.accuracy if c.accuracy is not None else 0.0, c.id) for c in usable]
    )
    by_size = pareto_front(
        [(c.latency_ms or 0.0, float(c.model_size_bytes or 0), c.id) for c in usable if c.model_size_bytes is not None]
    )
    return by_accuracy, by_size


def short_of(improvement: float, wanted: float, setting: str, better: str, worse: str, figure: str = "") -> str:
    """Why an improvement below the one `setting` asks for misses it, in words either way: "10.0% faster than
    the original, less than ..." or, for a candidate slower than the original, "8.0% slower than the
    original; ... allows at most 5% slower" (a negative goal) or "... asks for faster"."""
    if improvement >= 0:
        return f"{improvement:.1f}% {better}{figure} than the original, less than {setting}"
    allowed = f"allows at most {-wanted:g}% {worse}" if wanted < 0 else f"asks for {better}"
    return f"{-improvement:.1f}% {worse}{figure} than the original; {setting} {allowed}"


def goal_problems(candidate: CandidateResult, evaluator: Evaluator, noise_percent: float = 0.0) -> list[str]:
    """Why a measured candidate misses the goals (empty: it meets them). Improvements are read against the
    original measured alongside the candidate (`originalLatencyMs`). Without minImprovementPercent a
    candidate must still be faster beyond the noise: by more than `noise_percent` (how far two measurements
    of one model differ here) and with its latency interval below the original's figure. A variant that is
    not measurably faster is never worth deploying."""
    problems = []
    accuracy = evaluator.accuracy
    lost = candidate.accuracy_degradation
    if accuracy is not None and lost is not None and lost > accuracy.max_degradation:
        problems.append(
            f"loses {lost:.4g} {accuracy.metric}, more than "
            f"evaluator.accuracy.maxDegradation={accuracy.max_degradation:g}"
        )
    improvement = candidate.latency_improvement_percent
    wanted = evaluator.latency.min_improvement_percent
    if improvement is None:
        return problems
    if wanted is not None and improvement < wanted:
        setting = f"evaluator.latency.minImprovementPercent={wanted:g}"
        problems.append(short_of(improvement, wanted, setting, "faster", "slower"))
    elif wanted is None and improvement <= 0:
        problems.append(f"not faster than the original ({improvement:.1f}%)")
    elif wanted is None and improvement <= noise_percent:
        problems.append(
            f"not faster than the original beyond the noise ({improvement:.1f}%, not more than {noise_percent:g}%)"
        )
    elif wanted is None and within_noise(candidate):
        problems.append(
            f"not faster than the original beyond the noise ({improvement:.1f}%; its interval reaches the original's "
            "figure)"
        )
    return problems


def within_noise(candidate: CandidateResult) -> bool:
    """Whether the candidate's latency interval reaches the original's figure measured beside it."""
    high, figure = candidate.latency_ci_high_ms, candidate.original_latency_ms
    return high is not None and figure is not None and high >= figure


def choose(candidates: Sequence[CandidateResult]) -> CandidateResult | None:
    """The fastest candidate that meets the goals; on equal speed, the smaller file."""
    eligible = [c for c in candidates if c.meets_goals and c.latency_ms is not None]
    if not eligible:
        return None
    return min(eligible, key=lambda c: (_relative_latency(c, eligible), c.model_size_bytes or 0))


def closest(candidates: Sequence[CandidateResult]) -> CandidateResult | None:
    """When none meets the goals: the fastest measured one, to name in the message."""
    measured = [c for c in candidates if c.status == "Succeeded" and c.latency_ms is not None]
    return min(measured, key=lambda c: _relative_latency(c, measured)) if measured else None


def _relative_latency(candidate: CandidateResult, among: Sequence[CandidateResult]) -> float:
    """How a candidate's speed compares: its latency over the original's measured alongside it when every
    candidate compared has that pairing (the machine's drift between candidates cancels, as it does in their
    improvement percentages), else its latency."""
    assert candidate.latency_ms is not None
    if all(c.original_latency_ms for c in among):
        return candidate.latency_ms / candidate.original_latency_ms  # type: ignore[operator]
    return candidate.latency_ms


THROTTLED_PERCENT = 10.0


def throttling_note(measured: Sequence[CandidateResult], metric: str) -> str | None:
    """A warning when the CPU limit throttled measurements: the quota then sets the tail, which a median
    hides (more threads than the limit has cores often look fast at p50 and slow at p99)."""
    hit = [c for c in measured if (c.throttled_percent or 0.0) >= THROTTLED_PERCENT]
    if not hit:
        return None
    named = ", ".join(f"{c.id} ({c.throttled_percent:g}%)" for c in hit)
    note = f"the CPU limit throttled the measurements of {named} of their 100 ms periods"
    if metric in ("p50", "p90"):
        note += f"; evaluator.latency.metric={metric} does not show the stalls this causes, p99 or avg does"
    return note
