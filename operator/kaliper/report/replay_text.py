"""A replayed trace over time in words, for the load generator's summary and the profile report alike: the
trace's own rate beside what the server made of it, window by window."""

from __future__ import annotations

import math

from kaliper.report.schema import StageResult

MOST_LINES = 30  # a long replay's windows are shown in groups, so its lines stay readable


def replay_lines(stage: StageResult, most: int = MOST_LINES) -> list[str]:
    """One line per window (or per group of windows, at most `most` lines): the sends the trace asked for,
    the requests that ended and failed, the worst window's p99 from the intended send, the late sends."""
    windows = [w for w in stage.windows if w.scheduled is not None]
    if not windows:
        return []
    window_s = (stage.warmup_s + stage.measured_s) / len(stage.windows)
    lines = []
    size = math.ceil(len(windows) / most)
    for group in (windows[i : i + size] for i in range(0, len(windows), size)):
        start, length = group[0].start_s, len(group) * window_s
        asked = sum(w.scheduled or 0 for w in group)
        p99 = max((w.p99_ms for w in group if w.p99_ms is not None), default=None)
        worst = f"p99 {p99:.2f}ms" if p99 is not None else "p99 -"
        warmup = " (warm-up)" if all(w.warmup for w in group) else ""
        lines.append(
            f"trace {start:g}-{start + length:g}s{warmup}: {asked} sent on its clock ({asked / length:.1f}/s), "
            f"{sum(w.requests for w in group)} ended, {sum(w.errors for w in group)} failed, {worst}, "
            f"late sends {sum(w.late_sends for w in group)}"
        )
    return lines
