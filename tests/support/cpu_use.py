"""CPU time by test module, printed at the end of a run: on this project's 2-core machines the suite is bound by
CPU (docs/development.md, "What the suite costs"), so its time comes down only with the CPU its modules use,
and this says which.

Each test's set-up, call and teardown reports carry the CPU seconds its worker used meanwhile: the worker
process (threads included) and the child processes it has waited for (with their own children that they waited
for). Daemons a module starts and stops itself are counted in that module; those of a session fixture (the
control planes) when the session ends, under SESSION_END. Processes that are not the worker's
descendants (containerd's and kind's containers) are not counted.
"""

from __future__ import annotations

import os
import resource
from collections import defaultdict
from pathlib import Path

CPU_PROPERTY = "cpu_s"
SESSION_END = "(the last module's teardown and the session fixtures')"


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since it booted (every process, containers included):
    /proc/stat's first line, all but idle, iowait and the time the hypervisor kept for others (steal)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def wall_lines(seconds_by_group: dict[str, float], seconds_by_worker: dict[str, float], top: int = 12) -> list[str]:
    """Where the wall time went: each worker's busy seconds (the longest bounds the phase), then the groups of
    tests/support/tiers.py that took longest (set-up, call and teardown of their tests)."""
    lines = ["busy per worker: " + ", ".join(f"{w} {s / 60:.1f} min" for w, s in sorted(seconds_by_worker.items()))]
    for group, seconds in sorted(seconds_by_group.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        lines.append(f"{seconds / 60:6.1f} min  {group}")
    return lines


def cpu_seconds() -> float:
    """User and system CPU seconds of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def by_module(samples: list[tuple[str, float]]) -> dict[str, float]:
    """(module or SESSION_END, CPU seconds) samples, summed by module."""
    summed: dict[str, float] = defaultdict(float)
    for module, seconds in samples:
        summed[module] += seconds
    return dict(summed)


def busiest_lines(summed: dict[str, float], wall_s: float, top: int = 15) -> list[str]:
    """The modules that used the most CPU, each with its CPU minutes and share, after a line with the total
    and the cores it kept busy on average over `wall_s`."""
    total = sum(summed.values())
    if total <= 0:
        return []
    cores = f", {total / wall_s:.2f} cores busy on average over {wall_s / 60:.1f} min" if wall_s > 0 else ""
    lines = [f"{total / 60:.1f} CPU minutes in all{cores}"]
    for module, seconds in sorted(summed.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        lines.append(f"{seconds / 60:6.1f} min {seconds / total:6.1%}  {module}")
    return lines
