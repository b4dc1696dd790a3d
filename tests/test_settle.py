"""The quiet phase's wait for a settled machine (tests/support/settle.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.support import settle

STAT = "cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n"
MEMINFO = (
    "MemTotal:       24000000 kB\nDirty:             81920 kB\nWriteback:         20480 kB\nHugePages_Total:       0\n"
)


def test_busy_time_leaves_out_idle_and_iowait_and_pending_writes_are_dirty_plus_writeback() -> None:
    assert settle.busy_jiffies(STAT) == 100 + 5 + 50 + 3 + 2
    assert settle.pending_writes_mb(MEMINFO) == 100.0


def test_a_busy_process_beside_the_sample_is_measured_and_named() -> None:
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        found = settle.sample(1.0)
    finally:
        loop.kill()
        loop.wait()
    assert found.busy_cores >= 0.8 and not found.quiet, found.text()
    name, cores = found.busiest[0]
    assert name.startswith("python") and cores >= 0.8, found.busiest
