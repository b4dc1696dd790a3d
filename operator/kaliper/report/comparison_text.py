"""A comparison with a baseline run in words: one line per figure."""

from __future__ import annotations

from collections.abc import Sequence

from kaliper.report.schema import FigureComparison


def comparison_lines(
    found: Sequence[FigureComparison], unmatched: Sequence[str], regressed: Sequence[FigureComparison]
) -> list[str]:
    lines = [c.line() for c in found]
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
