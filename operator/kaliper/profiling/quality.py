"""Each configuration's quality (a ProfileRun's spec.quality) from the answers its trial collected: scored,
with its interval, against the floor. Pure: the choice passes over a configuration scored Below, and its row
says why (kaliper.profiling.choice_rows)."""

from __future__ import annotations

from kaliper.api.profilerun import QualityCheck
from kaliper.measure.quality import interval, score
from kaliper.profiling.plan import Configuration, ParametersKey, describe, parameters_key
from kaliper.report.schema import ConfigurationRow, QualityAnswers, QualityScore, TrialReport


def original_problem(check: QualityCheck | None, configurations: list[Configuration]) -> str | None:
    """Why quality.original names no configuration of the sweep (its parameters, each named as the report names
    them), or None."""
    if check is None or check.original is None:
        return None
    if any(parameters_key(c.parameters) == parameters_key(check.original) for c in configurations):
        return None
    examples = "; ".join(describe(c.parameters) for c in configurations[:3])
    return (
        f"quality.original {describe(check.original)} names no configuration of the sweep; name one by all its "
        f"parameters, such as {examples}"
    )


def answers_by_configuration(trials: list[TrialReport]) -> dict[ParametersKey, QualityAnswers]:
    """Each configuration's answers: its first trial (by index) that collected them."""
    found: dict[ParametersKey, QualityAnswers] = {}
    for trial in sorted(trials, key=lambda t: t.index):
        if trial.quality is not None:
            found.setdefault(parameters_key(trial.configuration()), trial.quality)
    return found


def quality_scores(check: QualityCheck, trials: list[TrialReport]) -> dict[ParametersKey, QualityScore]:
    """Every configuration's score against the floor, by its parameters; Unknown where it has no answers, or
    where the floor (or the agreement scorer's reference) needs the original's and it has none."""
    answers = answers_by_configuration(trials)
    expected = _expected(check, answers)
    original = answers.get(parameters_key(check.original)) if check.original is not None else None
    original_score = None
    if original is not None and expected is not None:
        original_score = score(check.scorer, original.answers, expected, check.tolerance) / original.rows
    floor = check.floor.min if check.floor.min is not None else _less(original_score, check.floor.max_drop)
    scores: dict[ParametersKey, QualityScore] = {}
    for trial in trials:
        key = parameters_key(trial.configuration())
        if key in scores:
            continue
        given = answers.get(key)
        if given is None or expected is None:
            why = (
                "not scored: none of its trials answered the rows (skipped, or failed before it asked)"
                if given is None
                else "the original was not scored"
            )
            scores[key] = QualityScore(rows=0, correct=0, score=0, ci_low=0, ci_high=1, verdict="Unknown", observed=why)
            continue
        correct = score(check.scorer, given.answers, expected, check.tolerance)
        low, high = interval(correct, given.rows)
        verdict = "Unknown" if floor is None else ("Below" if high < floor else "Held")
        observed = f"{correct} of {given.rows} rows ({correct / given.rows:.1%}, 95% CI {low:.1%}-{high:.1%})"
        observed += f" against the floor {floor:.1%}" if floor is not None else ", the original not scored"
        scores[key] = QualityScore(
            rows=given.rows,
            correct=correct,
            score=round(correct / given.rows, 4),
            ci_low=round(low, 4),
            ci_high=round(high, 4),
            floor=round(floor, 4) if floor is not None else None,
            verdict=verdict,
            observed=observed,
        )
    return scores


def _expected(check: QualityCheck, answers: dict[ParametersKey, QualityAnswers]) -> list[str | None] | None:
    """What each row's answer is held to: the dataset's expected answers (each configuration's answers carry
    them), or for the agreement scorer the original configuration's own answers (None: it has none)."""
    if check.scorer != "agreement":
        found = next(iter(answers.values()), None)
        return list(found.expected) if found is not None else None
    original = answers.get(parameters_key(check.original or {}))
    return list(original.answers) if original is not None else None


def _less(score: float | None, drop: float | None) -> float | None:
    return None if score is None or drop is None else score - drop


def held_back_text(rows: list[ConfigurationRow]) -> str | None:
    """The configurations cheaper than the choice that quality held back, for the choice's explanation."""
    chosen = next((r for r in rows if r.chosen), None)
    cheaper = [
        r
        for r in rows
        if r.quality is not None
        and r.quality.verdict == "Below"
        and r.qualified
        and (chosen is None or chosen.cost is None or r.cost is None or r.cost < chosen.cost)
    ]
    if not cheaper:
        return None
    return "held back by quality: " + "; ".join(f"{describe(r.parameters)} ({r.quality.observed})" for r in cheaper)  # type: ignore[union-attr]
