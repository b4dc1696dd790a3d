"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """For a child between fork and exec (subprocess's preexec_fn): the kernel sends it `sig` when the thread
    that started it ends, even if the parent was killed with SIGKILL and had no chance to stop it."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, sig)
