"""The built-in model server as a process, for the tests that talk to it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kaliper.netutil import free_port

IRIS_ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]]  # one of each iris class


def serve(
    model: Path, *flags: str, name: str = "iris", env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, str]:
    """Start `python -m kaliper.serving` on a free port (in `env`, else this process's environment); returns the
    process and its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "kaliper.serving", "--model", str(model), "--name", name, "--port", str(port), *flags],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return process, f"http://127.0.0.1:{port}"
