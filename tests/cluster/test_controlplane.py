"""The test control plane itself: it stops without leaving a process behind, also when its owner is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.controlplane import ControlPlane, build_binaries

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) counts as gone.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_stop_leaves_no_process_and_no_files() -> None:
    plane = ControlPlane(build_binaries("controlplane")).start()
    pids, root = plane.pids(), plane.root
    assert len(pids) == 5 and all(alive(p) for p in pids)
    plane.stop()
    assert not any(alive(p) for p in pids)
    assert not root.exists()


def test_killing_the_owner_takes_the_control_plane_down() -> None:
    """SIGKILL gives no chance to clean up: the children's parent-death signal does it."""
    owner = subprocess.Popen(
        [sys.executable, "-m", "tests.support.controlplane", "up"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    try:
        line = owner.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("export KUBECONFIG="), line
        root = Path(line.strip().split("=", 1)[1]).parent
        children = [int(p) for p in Path(f"/proc/{owner.pid}/task/{owner.pid}/children").read_text().split()]
        assert len(children) == 5
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 20
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in children)
    subprocess.run(["rm", "-rf", str(root)], check=False)  # the killed owner could not remove its directory
