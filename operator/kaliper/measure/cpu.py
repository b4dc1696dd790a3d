"""How much CPU this generator process may use, and how much it has used: a generator near its capacity
sets the pace itself, and what it measures is then its own limit rather than the target's."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _cpu_directories(proc_cgroup: Path, root: Path) -> list[tuple[str, Path]]:
    """("v1" or "v2", directory) where this process's CPU controller files may be, most specific first: in a
    container the cgroup root is usually the container's own, so its listed path may not exist there."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controllers == "":  # v2: one hierarchy
            found += [("v2", root / relative), ("v2", root)]
        elif "cpu" in controllers.split(","):
            for base in (root / "cpu", root / "cpu,cpuacct"):
                found += [("v1", base / relative), ("v1", base)]
    return found


def quota_cores(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CFS quota of this process's cgroup in cores (cgroup v1 cpu controller or v2 cpu.max); None when
    unlimited or unreadable."""
    for version, directory in _cpu_directories(proc_cgroup, root):
        found = _read_v2(directory / "cpu.max") if version == "v2" else _read_v1(directory)
        if found is not False:
            return found
    return None


def throttling(
    proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")
) -> tuple[int, int] | None:
    """(CFS periods, periods throttled) so far in this process's cgroup, from its cpu.stat; None when
    unreadable. Two readings bracket a measurement: the share of its periods the quota ran out in."""
    for _, directory in _cpu_directories(proc_cgroup, root):
        try:
            fields = dict(line.split() for line in (directory / "cpu.stat").read_text().splitlines() if line.strip())
            return int(fields["nr_periods"]), int(fields["nr_throttled"])
        except (OSError, KeyError, ValueError):
            continue
    return None


def _read_v2(path: Path) -> float | bool | None:
    try:
        quota, period = path.read_text().split()
    except (OSError, ValueError):
        return False
    return None if quota == "max" else int(quota) / int(period)


def _read_v1(directory: Path) -> float | bool | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return False
    return None if quota <= 0 else quota / period


def capacity_cores() -> float:
    """What one generator process can use: one core at most (Python runs one thread at a time), fewer when
    its CPU set or quota is smaller."""
    limits = [1.0, float(len(os.sched_getaffinity(0)))]
    quota = quota_cores()
    if quota is not None:
        limits.append(quota)
    return min(limits)


class CpuClock:
    """This process's CPU time, read as a rate between marks."""

    def __init__(self) -> None:
        self.capacity = capacity_cores()
        self._wall, self._cpu = time.time(), time.process_time()

    def cores_since_mark(self, now_wall: float) -> float:
        """Average cores used since the last call (or creation), then a new mark."""
        cpu = time.process_time()
        span = now_wall - self._wall
        used = (cpu - self._cpu) / span if span > 0 else 0.0
        self._wall, self._cpu = now_wall, cpu
        return used
