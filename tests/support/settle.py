"""Waiting for the machine to be quiet before the tests that need it (tests/support/tiers.py's QUIET).

`make test` runs them right after the parallel phase, whose last tiers tear down a kind cluster:
their processes exit, and the gigabytes they wrote (images, etcd, containers' layers) are still being written
back for a while. A quiet test that starts then is timed beside that work: CI's trace replay read a time to
first token 10 ms (2.7%) above the server's own at the quiet phase's start, against 0.3-2 ms in three runs
on the settled machine after it. So the quiet phase starts once the machine's CPU and its pending writes have
settled, read from /proc (not through the code under test), and says what it waited for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SAMPLE_S = 2.0
BUSY_CORES = 0.25  # other work at most a quarter of a core over a sample
PENDING_WRITES_MB = 128  # Dirty + Writeback
MAX_WAIT_S = 180.0


@dataclass(frozen=True)
class Sample:
    busy_cores: float
    pending_writes_mb: float
    busiest: list[tuple[str, float]]  # the processes that used the most CPU over the sample: (name, cores)

    @property
    def quiet(self) -> bool:
        return self.busy_cores <= BUSY_CORES and self.pending_writes_mb <= PENDING_WRITES_MB

    def text(self) -> str:
        top = ", ".join(f"{name} {cores:.2f}" for name, cores in self.busiest) or "none"
        return f"{self.busy_cores:.2f} cores busy (most: {top}), {self.pending_writes_mb:.0f} MB of writes pending"


def busy_jiffies(stat: str) -> int:
    """The whole machine's busy time in clock ticks, from /proc/stat's first line (idle and iowait left out)."""
    fields = [int(x) for x in stat.splitlines()[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]


def pending_writes_mb(meminfo: str) -> float:
    kib = {line.split(":")[0]: int(line.split()[1]) for line in meminfo.splitlines() if line.endswith(" kB")}
    return (kib.get("Dirty", 0) + kib.get("Writeback", 0)) / 1024


def process_jiffies() -> dict[int, tuple[str, int]]:
    """Each process's name and CPU time so far (utime + stime, ticks)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2 :].split()
        found[int(entry.name)] = (name, int(rest[11]) + int(rest[12]))
    return found


def sample(seconds: float = SAMPLE_S) -> Sample:
    ticks = os.sysconf("SC_CLK_TCK")
    before, processes = busy_jiffies(Path("/proc/stat").read_text()), process_jiffies()
    time.sleep(seconds)  # the sample's length: CPU use is a rate
    after, later = busy_jiffies(Path("/proc/stat").read_text()), process_jiffies()
    used = {
        (pid, name): (spent - processes[pid][1]) / ticks / seconds
        for pid, (name, spent) in later.items()
        if pid in processes and spent > processes[pid][1]
    }
    busiest = sorted(((name, cores) for (_, name), cores in used.items()), key=lambda x: -x[1])[:3]
    return Sample((after - before) / ticks / seconds, pending_writes_mb(Path("/proc/meminfo").read_text()), busiest)


def wait_until_quiet(say: Callable[[str], None], max_wait_s: float = MAX_WAIT_S) -> Sample:
    """Samples until the machine is quiet or max_wait_s has passed, and says what it found."""
    started = time.monotonic()
    found = sample()
    while not found.quiet and time.monotonic() - started < max_wait_s:
        found = sample()
    waited = time.monotonic() - started
    if found.quiet:
        say(f"quiet tests: the machine settled in {waited:.0f} s ({found.text()})")
    else:
        say(f"quiet tests: the machine did not settle in {waited:.0f} s ({found.text()}); running them anyway")
    return found
