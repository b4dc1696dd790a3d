"""Real cgroups on this machine: limits are enforced by the kernel and the accounting shows it."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaliper.local import cgroups
from kaliper.local.cgroups import Cgroup, CgroupError, Limits
from tests.support.controlplane import wait_for

BUSY = "while True: pass"
HOG = "import time; blocks = [bytearray(8 << 20) for _ in range(40)]; time.sleep(30)"  # 320 MiB


@pytest.fixture
def make_group() -> Iterator:  # type: ignore[type-arg]
    made: list[Cgroup] = []

    def make(limits: Limits) -> Cgroup:
        group = Cgroup(f"test-{uuid.uuid4().hex[:8]}", limits).create()
        made.append(group)
        return group

    yield make
    for group in made:
        group.remove()


def start_in(group: Cgroup, code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], preexec_fn=group.join_in_child)


def mounted_version() -> str | None:
    """The cgroup version the kernel's mount table shows: cgroup2 mounted at /sys/fs/cgroup is v2; v1
    hierarchies with the cpu and the memory controller (a v2 mount beside them, as on hybrid hosts, is unused)."""
    mounts = [line.split()[1:4] for line in Path("/proc/self/mounts").read_text().splitlines()]
    if any(target == "/sys/fs/cgroup" and fstype == "cgroup2" for target, fstype, _ in mounts):
        return "v2"
    v1 = {option for _, fstype, options in mounts if fstype == "cgroup" for option in options.split(",")}
    return "v1" if {"cpu", "memory"} <= v1 else None


def test_this_machine_has_cgroups() -> None:
    # CI must exercise the real thing: a machine without cgroups fails here, loudly.
    mounted = mounted_version()
    assert mounted is not None, "no cgroup hierarchy with the cpu and memory controllers is mounted"
    assert cgroups.detect() == mounted


def test_cpu_limit_is_enforced_and_accounted(make_group) -> None:  # type: ignore[no-untyped-def]
    group = make_group(Limits(cpu_cores=0.5))
    # The most CPU weight a group can have: the loop gets all its quota allows even beside busy groups (other
    # runs' servers), so what is measured is the quota, not the machine's spare time.
    weight = ("cpu.shares", "262144") if group.version == "v1" else ("cpu.weight", "10000")
    (group.dirs["cpu" if group.version == "v1" else "unified"] / weight[0]).write_text(weight[1])
    process = start_in(group, BUSY)
    try:
        # From the first period the busy loop is throttled in, it runs into its quota every period.
        wait_for(lambda: group.sample().throttled_periods > 0, timeout=20, what="the busy loop to reach its quota")
        before = group.sample()
        time.sleep(2.0)  # the measured interval
        after = group.sample()
    finally:
        process.kill()
        process.wait()
    used_cores = (after.cpu_usage_s - before.cpu_usage_s) / (after.time_s - before.time_s)
    assert 0.3 < used_cores <= 0.6  # a busy loop would use a whole core without the quota
    throttled = after.throttled_periods - before.throttled_periods
    periods = after.periods - before.periods
    assert periods > 0 and throttled / periods > 0.8  # throttled in nearly every 100 ms period


def test_memory_limit_kills_with_oom_and_counts_it(make_group) -> None:  # type: ignore[no-untyped-def]
    group = make_group(Limits(memory_bytes=64 << 20))
    process = start_in(group, HOG)
    code = process.wait(timeout=30)
    assert code == -9  # SIGKILL from the kernel's OOM killer
    sample = group.sample()
    assert sample.oom_kills >= 1
    assert sample.memory_peak_bytes >= 60 << 20


def test_memory_working_set_follows_allocation(make_group) -> None:  # type: ignore[no-untyped-def]
    group = make_group(Limits(memory_bytes=1 << 30))
    process = start_in(group, HOG)
    try:
        deadline = time.monotonic() + 20
        sample = group.sample()
        while sample.memory_working_set_bytes < 300 << 20 and time.monotonic() < deadline:
            time.sleep(0.1)
            sample = group.sample()
    finally:
        process.kill()
        process.wait()
    assert sample.memory_working_set_bytes >= 300 << 20
    assert sample.oom_kills == 0


def test_remove_kills_leftovers_and_deletes_the_group(make_group) -> None:  # type: ignore[no-untyped-def]
    group = make_group(Limits(cpu_cores=1))
    process = start_in(group, "import time; time.sleep(60)")
    assert process.pid in group.pids()  # it joined before it exec'd: no wait needed
    group.remove()
    assert process.wait(timeout=10) == -9
    assert not any(d.exists() for d in group.dirs.values())


def test_no_cgroups_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    with pytest.raises(CgroupError, match="--no-limits"):
        Cgroup("x", Limits(cpu_cores=1))
