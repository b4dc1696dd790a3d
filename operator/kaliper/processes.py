"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """For a child between fork and exec: the kernel sends it `sig` when the thread that started it ends, even
    if the parent was killed with SIGKILL and had no chance to stop it. `parent` is the pid that forked it,
    read before the fork: a parent that died before this request was made sends nothing, so the child, seeing
    it has another parent already, sends the signal to itself."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def dies_with_this_process(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A subprocess `preexec_fn` that ties the child's life to this process (the thread starting it)."""
    parent = os.getpid()
    return lambda: die_with_parent(parent, sig)


def wait_or_kill(process: subprocess.Popen, grace_s: float) -> None:
    """Wait up to `grace_s` for a child asked to end (its input closed, SIGTERM) to exit; then kill it. Either
    way it is reaped."""
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
