"""The suite's builds (Go binaries, llama.cpp, the images, the pytorch and vLLM environments), timed where a test
waits for one.

Every build script is a no-op when its result is cached, and builds it otherwise, when the first test that needs
it asks (docs/development.md, "What the suite costs"). A test's time ceiling (tests/support/tiers.py) bounds its
own body, so the time it spent waiting for a build, its own or another worker's behind the script's lock, is
taken off before it is judged. A run that waited minutes for builds (a cold cache) also ran its tests beside
them on both cores: its ceilings are listed, not enforced (`COLD_BUILDS_S`).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

BUILD_PROPERTY = "build_s"  # a report's user property: seconds its phase waited for builds

# Waiting for builds this long in one run means a cold cache (a cold build is about 40 minutes of both cores);
# a warm run after a code change rebuilds the image's last layers, about a minute.
COLD_BUILDS_S = 300.0

_waited = {"seconds": 0.0}


@contextlib.contextmanager
def waiting_for_build() -> Iterator[None]:
    """Times the block as waiting for a build (a no-op that returns at once when the build is cached)."""
    start = time.monotonic()
    try:
        yield
    finally:
        _waited["seconds"] += time.monotonic() - start


def run_build(argv: list[str], **options: Any) -> subprocess.CompletedProcess:
    """subprocess.run of a build script, timed as waiting for a build."""
    with waiting_for_build():
        return subprocess.run(argv, **options)


def waited_s() -> float:
    """Seconds this process has waited for builds so far."""
    return _waited["seconds"]


def ceilings_enforced(run_waited_s: float) -> bool:
    """Whether a run that waited this long for builds, all workers together, fails on a test over its ceiling."""
    return run_waited_s < COLD_BUILDS_S
