"""The generator's own CPU: its quota read from cgroup files laid out as the kernel lays them out, and its
usage recorded into the windows it closes."""

from __future__ import annotations

import time
from pathlib import Path

from kaliper.loadgen.recorder import Recorder
from kaliper.measure.cpu import quota_cores


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_quota_from_cgroup_v1(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    write(proc, "12:memory:/kubepods/pod1/c1\n4:cpu,cpuacct:/kubepods/pod1/c1\n")
    write(tmp_path / "fs/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us", "50000\n")
    write(tmp_path / "fs/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us", "100000\n")
    assert quota_cores(proc, tmp_path / "fs") == 0.5
    write(tmp_path / "fs/cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us", "-1\n")
    assert quota_cores(proc, tmp_path / "fs") is None


def test_quota_from_cgroup_v2_inside_a_container(tmp_path: Path) -> None:
    # In a container with a cgroup namespace the path is "/" and the files are at the mount's root.
    proc = tmp_path / "cgroup"
    write(proc, "0::/\n")
    write(tmp_path / "fs/cpu.max", "150000 100000\n")
    assert quota_cores(proc, tmp_path / "fs") == 1.5
    write(tmp_path / "fs/cpu.max", "max 100000\n")
    assert quota_cores(proc, tmp_path / "fs") is None


def test_closed_windows_carry_the_cpu_this_process_used() -> None:
    recorder = Recorder(window_s=0.2, open_loop=False)
    start = time.time()
    recorder.begin_stage(0, start)
    spent = time.process_time()
    while time.process_time() - spent < 0.15:  # burn CPU inside window 0
        pass
    recorder.record(start + 0.01, 0.001)  # completed inside window 0, however long the burn took on a busy machine
    while recorder.closed_until(time.time()) < 0:
        time.sleep(0.01)
    windows, _ = recorder.take_closed(time.time())
    # Window 0 first (a busy machine may take past 0.4 s to burn 0.15 s of CPU, and window 1 closes too).
    assert windows[0].index == 0
    assert windows[0].cpu_s > 0
    assert windows[0].capacity_s == recorder._cpu.capacity * 0.2
