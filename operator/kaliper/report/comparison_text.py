"""A comparison with a baseline run in words: one line per figure."""

from __future__ import annotations

from collections.abc import Sequence

from kaliper.report.schema import FigureComparison


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "beyond every answer"
    if unit == "share":
        return f"{value:.2%}"
    if unit == "":
        return f"{value:.4g}"
    return f"{value:.2f} {unit}"


def _bound(value: float | None, unit: str) -> str:
    if value is None:
        return "unbounded"
    return f"{value:.2%}" if unit == "share" else f"{value:.4g}"


def comparison_line(found: FigureComparison) -> str:
    """Such as "concurrency=4: latency p99 52.10 ms -> 61.30 ms (+17.7%): worse (95%: 50.2-54 vs 59.8-63.1)"."""
    where = " ".join(f"{k}={v}" for k, v in found.parameters.items()) or "the target"
    size = f" ({found.change:+.1%})" if found.change is not None else ""
    intervals = (
        f"95%: {_bound(found.baseline_low, found.unit)}-{_bound(found.baseline_high, found.unit)} vs "
        f"{_bound(found.low, found.unit)}-{_bound(found.high, found.unit)}"
    )
    return (
        f"{where}: {found.figure} {_number(found.baseline, found.unit)} -> {_number(found.value, found.unit)}{size}: "
        f"{found.verdict} ({intervals})"
    )


def comparison_lines(
    found: Sequence[FigureComparison], unmatched: Sequence[str], regressed: Sequence[FigureComparison]
) -> list[str]:
    lines = [comparison_line(c) for c in found]
    lines += [f"not compared: {line}" for line in unmatched]
    if not found:
        lines.append("no configuration was measured at the same load in both runs")
    worse = sum(c.verdict == "worse" for c in found)
    better = sum(c.verdict == "better" for c in found)
    lines.append(
        f"{len(found)} figures: {worse} worse, {better} better, {len(found) - worse - better} within the noise; "
        f"{len(regressed)} regressed beyond the tolerance"
    )
    return lines
