"""Real resource limits on one machine: Linux cgroups, the mechanism Kubernetes uses for pod limits.

A CPU limit is a CFS quota (cpu.cfs_quota_us / cpu.cfs_period_us in v1, cpu.max in v2): the group may run
quota microseconds per period, then it is throttled until the next period, exactly as a container with
`limits.cpu` is. A memory limit (memory.limit_in_bytes / memory.max) makes the kernel OOM-kill the group's
processes when they exceed it. Accounting comes from the same files cAdvisor reads for Kubernetes metrics:
CPU usage, throttled periods, the memory working set (usage minus inactive file cache), its peak, OOM kills
and block I/O.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# KALIPER_CGROUP_ROOT points elsewhere only to see how Kaliper behaves without cgroups.
ROOT = Path(os.environ.get("KALIPER_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "kaliper"
V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "blkio")
CFS_PERIOD_US = 100_000  # Kubernetes' (and the kernel's) default period: 100 ms


def group_name(model_name: str, replica: int) -> str:
    """<pid of this process>-<model>-<replica>-<random>: the pid tells `kaliper gc` whether the run that made
    the group is still going."""
    return f"{os.getpid()}-{model_name}-{replica}-{uuid.uuid4().hex[:6]}"


def owner_pid(name: str) -> int | None:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def hierarchy_dirs(version: Literal["v1", "v2"]) -> list[Path]:
    """Kaliper's parent group in each hierarchy it uses; groups of runs are its subdirectories."""
    if version == "v1":
        return [ROOT / c / PARENT for c in V1_CONTROLLERS]
    return [ROOT / PARENT]


class CgroupError(RuntimeError):
    """Cgroups cannot be used here; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    cpu_cores: float | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True)
class Sample:
    """Cumulative counters and current gauges of one group at one moment."""

    time_s: float  # time.monotonic()
    cpu_usage_s: float
    periods: int
    throttled_periods: int
    memory_working_set_bytes: int
    memory_peak_bytes: int
    oom_kills: int
    io_read_bytes: int
    io_write_bytes: int


def detect() -> Literal["v1", "v2"] | None:
    """Which cgroup version can set CPU and memory limits here (None: neither)."""
    if (ROOT / "cgroup.controllers").exists():
        controllers = (ROOT / "cgroup.controllers").read_text().split()
        return "v2" if {"cpu", "memory"} <= set(controllers) else None
    if (ROOT / "cpu" / "cpu.cfs_quota_us").exists() and (ROOT / "memory" / "memory.limit_in_bytes").exists():
        return "v1"
    return None


def _read_int(path: Path, default: int = 0) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def _read_keyed(path: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                values[key] = int(value)
    return values


class Cgroup:
    """One group with limits; processes join it before they exec (see `join_in_child`)."""

    def __init__(self, name: str, limits: Limits, version: Literal["v1", "v2"] | None = None) -> None:
        found = version or detect()
        if found is None:
            raise CgroupError(
                "no writable cgroup hierarchy with CPU and memory controllers was found under /sys/fs/cgroup; "
                "run as root on Linux (cgroup v1 or v2), or pass --no-limits to run without limits"
            )
        self.version: Literal["v1", "v2"] = found
        self.name, self.limits = name, limits
        if found == "v1":
            self.dirs = {c: ROOT / c / PARENT / name for c in V1_CONTROLLERS}
        else:
            self.dirs = {"unified": ROOT / PARENT / name}
        self._peak_seen = 0

    # --- lifecycle -----------------------------------------------------------------------------------

    def create(self) -> Cgroup:
        try:
            if self.version == "v2":
                parent = ROOT / PARENT
                parent.mkdir(exist_ok=True)
                (parent / "cgroup.subtree_control").write_text("+cpu +memory +io")
            for directory in self.dirs.values():
                directory.mkdir(parents=True, exist_ok=True)
            self._apply_limits()
        except PermissionError as exc:
            self.remove()
            raise CgroupError(f"cannot write {exc.filename}: cgroups need root; or pass --no-limits") from exc
        except OSError as exc:
            self.remove()
            raise CgroupError(f"cannot set up cgroup {self.name}: {exc}") from exc
        return self

    def _apply_limits(self) -> None:
        cpu, memory = self.limits.cpu_cores, self.limits.memory_bytes
        if self.version == "v1":
            quota = -1 if cpu is None else max(1000, round(cpu * CFS_PERIOD_US))
            (self.dirs["cpu"] / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(str(quota))
            if memory is not None:
                (self.dirs["memory"] / "memory.limit_in_bytes").write_text(str(memory))
                # Kubernetes nodes run without swap: an over-limit container is killed, not swapped.
                with contextlib.suppress(OSError):
                    (self.dirs["memory"] / "memory.swappiness").write_text("0")
        else:
            group = self.dirs["unified"]
            quota = "max" if cpu is None else str(max(1000, round(cpu * CFS_PERIOD_US)))
            (group / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")
            if memory is not None:
                (group / "memory.max").write_text(str(memory))
                with contextlib.suppress(OSError):
                    (group / "memory.swap.max").write_text("0")

    def procs_files(self) -> list[Path]:
        return [directory / "cgroup.procs" for directory in self.dirs.values()]

    def join_in_child(self) -> None:
        """For subprocess's preexec_fn: the child joins the group before it execs, so nothing it allocates
        escapes the limits."""
        pid = str(os.getpid())
        for path in self.procs_files():
            path.write_text(pid)

    def add(self, pid: int) -> None:
        for path in self.procs_files():
            path.write_text(str(pid))

    def pids(self) -> list[int]:
        path = self.procs_files()[0]
        try:
            return [int(p) for p in path.read_text().split()]
        except OSError:
            return []

    def remove(self, timeout_s: float = 10.0) -> None:
        """Kill what is left in the group and delete it (a group with processes cannot be removed)."""
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            time.sleep(0.05)
        for directory in self.dirs.values():
            with contextlib.suppress(FileNotFoundError):
                directory.rmdir()

    # --- accounting ----------------------------------------------------------------------------------

    def sample(self) -> Sample:
        now = time.monotonic()
        if self.version == "v1":
            cpu_stat = _read_keyed(self.dirs["cpu"] / "cpu.stat")
            memory_stat = _read_keyed(self.dirs["memory"] / "memory.stat")
            usage = _read_int(self.dirs["memory"] / "memory.usage_in_bytes")
            working_set = max(0, usage - memory_stat.get("total_inactive_file", 0))
            peak = _read_int(self.dirs["memory"] / "memory.max_usage_in_bytes")
            oom = _read_keyed(self.dirs["memory"] / "memory.oom_control").get("oom_kill", 0)
            read, write = self._blkio_v1()
            cpu_s = _read_int(self.dirs["cpuacct"] / "cpuacct.usage") / 1e9
            periods, throttled = cpu_stat.get("nr_periods", 0), cpu_stat.get("nr_throttled", 0)
        else:
            group = self.dirs["unified"]
            cpu_stat = _read_keyed(group / "cpu.stat")
            memory_stat = _read_keyed(group / "memory.stat")
            usage = _read_int(group / "memory.current")
            working_set = max(0, usage - memory_stat.get("inactive_file", 0))
            peak = _read_int(group / "memory.peak", default=0)  # kernels before 5.19 lack it
            oom = _read_keyed(group / "memory.events").get("oom_kill", 0)
            read, write = self._io_v2()
            cpu_s = cpu_stat.get("usage_usec", 0) / 1e6
            periods, throttled = cpu_stat.get("nr_periods", 0), cpu_stat.get("nr_throttled", 0)
        self._peak_seen = max(self._peak_seen, working_set)
        return Sample(
            time_s=now,
            cpu_usage_s=cpu_s,
            periods=periods,
            throttled_periods=throttled,
            memory_working_set_bytes=working_set,
            memory_peak_bytes=max(peak, self._peak_seen),
            oom_kills=oom,
            io_read_bytes=read,
            io_write_bytes=write,
        )

    def _blkio_v1(self) -> tuple[int, int]:
        read = write = 0
        with contextlib.suppress(OSError):
            for line in (self.dirs["blkio"] / "blkio.throttle.io_service_bytes").read_text().splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] == "Read":
                    read += int(parts[2])
                elif len(parts) == 3 and parts[1] == "Write":
                    write += int(parts[2])
        return read, write

    def _io_v2(self) -> tuple[int, int]:
        read = write = 0
        with contextlib.suppress(OSError):
            for line in (self.dirs["unified"] / "io.stat").read_text().splitlines():
                fields = dict(item.split("=", 1) for item in line.split()[1:] if "=" in item)
                read += int(fields.get("rbytes", 0))
                write += int(fields.get("wbytes", 0))
        return read, write
