"""Which processes listen on a TCP port, from the kernel's tables: replicas that share a port (SO_REUSEPORT)
answer on it as soon as the first is up, so readiness asks the kernel whether every one is listening."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

LISTEN = "0A"  # the socket state in /proc/net/tcp


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets the process holds open (its /proc/<pid>/fd links)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    return inodes


def listening_inodes(port: int) -> set[str]:
    """Inodes of the sockets listening on `port` (IPv4 and IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(fields[9])
    return found


def listens_on(pids: list[int], port: int) -> bool:
    """Whether any of these processes (one replica's) holds a socket listening on the port."""
    listening = listening_inodes(port)
    return any(socket_inodes(pid) & listening for pid in pids)
