"""Scoring answers against what a dataset expects (a ProfileRun's spec.quality), and the score's interval.
Pure: the load generator asks the questions (kaliper.loadgen.quality); the plan compares configurations."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kaliper.measure.statistics import share_interval

_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")
# Where an answer names its choice, most explicit first: "the answer is B", then an answer that starts with it
# ("B", "B.", "(B) Paris"), then a letter in parentheses anywhere. A capital standing alone in prose is not one
# ("I think...").
_CHOICES = (
    re.compile(r"answer(?: is|:)\s*\(?([A-Z])\b", re.IGNORECASE),
    re.compile(r"^\W*([A-Z])(?:[).:]|$)"),
    re.compile(r"\(([A-Z])\)"),
)


def normalized(text: str) -> str:
    """Case, surrounding and repeated spaces and a final full stop do not count."""
    return " ".join(text.split()).casefold().rstrip(".")


def first_number(text: str) -> float | None:
    """The first number written in the text (thousands separators allowed), or None."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    return float(match.group(0).replace(",", ""))


def first_choice(text: str) -> str | None:
    """The choice an answer names: "The answer is B.", "B", "(B) Paris" and "I'd say (B)" all choose B."""
    for pattern in _CHOICES:
        match = pattern.search(text.strip())
        if match:
            return match.group(1).upper()
    return None


def correct(scorer: str, answer: str, expected: str, tolerance: float = 0.0) -> bool:
    """Whether an answer scores: exact (equal when normalized), contains (expected within it), number (its first
    number within tolerance of expected's), choice (the letter it names is expected's), agreement (equal to
    the original's answer, given as `expected`), or accuracy (a model's prediction equal to the row's label)."""
    if scorer in ("exact", "agreement"):
        return normalized(answer) == normalized(expected)
    if scorer == "contains":
        return normalized(expected) in normalized(answer)
    if scorer == "number":
        found, wanted = first_number(answer), first_number(expected)
        return found is not None and wanted is not None and abs(found - wanted) <= tolerance
    if scorer == "choice":
        return first_choice(answer) == expected.strip().upper()
    if scorer == "accuracy":  # a prediction and a label: equal as numbers where both are (2 and 2.0), else as text
        try:
            return float(answer) == float(expected)
        except ValueError:
            return answer.strip() == expected.strip()
    raise ValueError(f"unknown scorer {scorer}")


def score(scorer: str, answers: Sequence[str | None], expected: Sequence[str | None], tolerance: float = 0.0) -> int:
    """How many answers score; an unanswered row (None: the request failed), or one with nothing to hold it to
    (the original did not answer it), does not."""
    return sum(
        answer is not None and wanted is not None and correct(scorer, answer, wanted, tolerance)
        for answer, wanted in zip(answers, expected, strict=True)
    )


def interval(correct_rows: int, rows: int) -> tuple[float, float]:
    """The Wilson 95% interval of a share of rows scored correct."""
    return share_interval(correct_rows / rows, rows) if rows else (0.0, 1.0)
