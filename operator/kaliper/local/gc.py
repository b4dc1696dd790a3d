"""What `kaliper run` can leave on this machine, found and removed by `kaliper gc`.

A run cleans up after itself (Ctrl-C and SIGTERM included: its servers stop and their cgroups go). What can
remain is what a run killed outright (SIGKILL, a crash of the machine's OOM killer) had no chance to remove:
- cgroups of its servers: each is named after the pid of the `kaliper run` that made it, so a group whose
  run is no longer alive is a leftover (its processes, if any, are killed when it is removed);
- server or load-generator processes that lost their parent (servers are started with a parent-death
  signal, so this only happens to processes that ignored it);
- Kaliper's parent cgroup (`kaliper` in each hierarchy), which runs keep on purpose between runs, so that
  one run's teardown never races another's set-up: listed as such, removed once no run is going;
- report folders whose run set a ttl (`spec.ttl`) that has passed (`expiresAt` in report.json).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from kaliper.local import cgroups
from kaliper.local.cgroups import Cgroup, Limits
from kaliper.report.schema import ProfileReport

# Command-line fragments of the processes a local run starts.
RUN_PROCESSES = ("-m kaliper.serving", "-m kaliper.loadgen", "mlserver start")


@dataclass(frozen=True)
class Leftover:
    kind: str  # cgroup, process, parent-cgroup, report
    what: str  # a path or a pid
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "what": self.what, "why": self.why}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _started_at(pid: int) -> float | None:
    """When a process started (seconds since the epoch), from /proc; None when it does not exist."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _owner_alive(pid: int, group: Path) -> bool:
    """The process that made the group is still running: it exists and started before the group was made
    (a later process with the same pid is not it)."""
    started = _started_at(pid)
    try:
        made = group.stat().st_mtime
    except OSError:
        return False
    return started is not None and started <= made + 1


def run_groups() -> list[tuple[Path, int | None, list[int]]]:
    """(directory in the first hierarchy, owner pid, pids inside) of every group under Kaliper's parent."""
    version = cgroups.detect()
    if version is None:
        return []
    groups: dict[str, Path] = {}
    for parent in cgroups.hierarchy_dirs(version):
        with contextlib.suppress(OSError):
            for path in parent.iterdir():
                if path.is_dir():
                    groups.setdefault(path.name, path)
    return [
        (path, cgroups.owner_pid(name), Cgroup(name, Limits(), version).pids()) for name, path in sorted(groups.items())
    ]


def find_local(reports: Path | None, now: datetime) -> list[Leftover]:
    found: list[Leftover] = []
    live_runs = 0
    for path, owner, pids in run_groups():
        if owner is not None and _owner_alive(owner, path):
            live_runs += 1
            continue
        who = f"the run that made it (pid {owner}) has ended" if owner else "made by an older Kaliper"
        found.append(Leftover("cgroup", path.name, f"{who}; {len(pids)} processes inside"))
    for pid in sorted(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()):
        command = _cmdline(pid)
        if pid != os.getpid() and any(f in command for f in RUN_PROCESSES) and _parent_pid(pid) == 1:
            found.append(Leftover("process", str(pid), f"orphaned: {command[:120]}"))
    version = cgroups.detect()
    if version is not None and live_runs == 0 and not [f for f in found if f.kind == "cgroup"]:
        for parent in cgroups.hierarchy_dirs(version):
            if parent.is_dir():
                found.append(Leftover("parent-cgroup", str(parent), "kept between runs on purpose; no run is going"))
    if reports is not None and reports.is_dir():
        for path in sorted(reports.glob("*/report.json")):
            try:
                report = ProfileReport.model_validate_json(path.read_text())
            except (OSError, ValidationError):
                continue
            if report.expires_at is not None and report.expires_at <= now:
                expired = f"its ttl ran out at {report.expires_at:%Y-%m-%d %H:%M:%S}"
                found.append(Leftover("report", str(path.parent), expired))
    return found


def remove_local(leftover: Leftover) -> None:
    """Remove one leftover; OSError when it cannot be."""
    if leftover.kind == "cgroup":
        version = cgroups.detect()
        if version is not None:
            Cgroup(leftover.what, Limits(), version).remove()
    elif leftover.kind == "process":
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(leftover.what), 9)
    elif leftover.kind == "parent-cgroup":
        Path(leftover.what).rmdir()
    elif leftover.kind == "report":
        shutil.rmtree(leftover.what)
