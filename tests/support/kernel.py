"""What the kernel itself says about local processes, to check `kaliper run` against: the cgroup a
process is in (/proc/<pid>/cgroup), a group's CPU quota, and the TCP sockets a process listens on or that
are connected to a port (/proc/net/tcp)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from kaliper.local import cgroups
from kaliper.local.sockets import socket_inodes

LISTEN, ESTABLISHED = "0A", "01"  # socket states in /proc/net/tcp


def kernel_cgroups(pid: int) -> dict[str, str]:
    """The cgroup the kernel has the process in, by controller ("" is the cgroup v2 hierarchy)."""
    found = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        found.update(dict.fromkeys(controllers.split(","), path))
    return found


def limit_controllers() -> tuple[str, ...]:
    """The controllers whose groups hold a replica's limits and accounting here."""
    return ("cpu", "cpuacct", "memory") if cgroups.detect() == "v1" else ("",)


def kaliper_group(name: str) -> str:
    """The path /proc/<pid>/cgroup shows for a process in Kaliper's group `name`."""
    return f"/kaliper/{name}"


def group_pids(name: str) -> list[int]:
    """The processes in Kaliper's group `name`, from the kernel's cgroup.procs ([] once it is gone)."""
    directory = cgroups.ROOT / "kaliper" / name if cgroups.detect() == "v2" else cgroups.ROOT / "cpu" / "kaliper" / name
    with contextlib.suppress(OSError):
        return [int(p) for p in (directory / "cgroup.procs").read_text().split()]
    return []


def kaliper_groups(prefix: str) -> list[str]:
    """The names of Kaliper's groups that start with `prefix` (such as "<pid of a run>-")."""
    parent = cgroups.ROOT / "kaliper" if cgroups.detect() == "v2" else cgroups.ROOT / "cpu" / "kaliper"
    with contextlib.suppress(OSError):
        return sorted(p.name for p in parent.iterdir() if p.is_dir() and p.name.startswith(prefix))
    return []


def cpu_quota_us(name: str) -> str:
    """The CFS quota of Kaliper's group `name`, from the kernel's own file ("max" or -1: none)."""
    if cgroups.detect() == "v2":
        return (cgroups.ROOT / "kaliper" / name / "cpu.max").read_text().split()[0]
    return (cgroups.ROOT / "cpu" / "kaliper" / name / "cpu.cfs_quota_us").read_text().strip()


def _sockets(pid: int) -> list[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every IPv4 and IPv6 TCP socket in the process's network."""
    found = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
                found.append((local, remote, fields[3], fields[9]))
    return found


def listening_ports(pid: int) -> set[int]:
    """The TCP ports the process listens on: its own sockets (/proc/<pid>/fd) that are LISTENing."""
    inodes = socket_inodes(pid)
    return {local for local, _, state, inode in _sockets(pid) if state == LISTEN and inode in inodes}


def connections_to(port: int) -> int:
    """TCP connections established to a local port (its server's end of each), on this machine's network."""
    return sum(local == port and state == ESTABLISHED for local, _, state, _ in _sockets(os.getpid()))
