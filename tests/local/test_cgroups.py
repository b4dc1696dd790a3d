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


def test_this_machine_has_cgroups() -> None:
    # CI must exercise the real thing: a machine without writable cgroups fails here, loudly.
    assert cgroups.detect() in ("v1", "v2")


def test_cpu_limit_is_enforced_and_accounted(make_group) -> None:  # type: ignore[no-untyped-def]
    group = make_group(Limits(cpu_cores=0.5))
    process = start_in(group, BUSY)
    try:
        time.sleep(0.5)
        before = group.sample()
        time.sleep(2.0)
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
    time.sleep(0.2)
    assert process.pid in group.pids()
    group.remove()
    assert process.wait(timeout=10) == -9
    assert not any(d.exists() for d in group.dirs.values())


def test_no_cgroups_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    with pytest.raises(CgroupError, match="--no-limits"):
        Cgroup("x", Limits(cpu_cores=1))
