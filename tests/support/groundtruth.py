"""The ground-truth servers of bench/ (Go, standard library only), each built on first use and cached by
the hash of its source: bench/groundtruth (known latency, its own records of every request) and
bench/streamtruth (an OpenAI-compatible token stream of known timing, recording when it sent every chunk)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kaliper.netutil import free_port
from kaliper.report.schema import StageResult
from tests.support.builds import waiting_for_build
from tests.support.controlplane import wait_for
from tests.support.paths import CACHE as KALIPER_CACHE

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "bench" / "groundtruth"
STREAM_SOURCE = REPO / "bench" / "streamtruth"
CACHE = KALIPER_CACHE / "bench"


def binary(source: Path = SOURCE) -> Path:
    files = [*sorted(source.glob("*.go")), source / "go.mod"]
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()
    target = CACHE / f"{source.name}-{digest[:12]}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with waiting_for_build(), open(CACHE / f"{source.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # make test's two pytest workers may both ask for it
        if not target.exists():
            subprocess.run(
                ["go", "build", "-o", str(target), "."],
                cwd=source,
                check=True,
                env={**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"},
            )
    return target


def wait_http(url: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    unverified = ssl._create_unverified_context()  # a test server's own certificate
    while True:
        try:
            urllib.request.urlopen(url, timeout=1, context=unverified).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def groundtruth(
    *flags: str, port: int | None = None, source: Path = SOURCE, prefix: tuple[str, ...] = ()
) -> Iterator[str]:
    """Run the server on loopback (after `prefix`, such as taskset); yields its base URL."""
    port = port or free_port()
    command = [*prefix, str(binary(source)), "-addr", f"127.0.0.1:{port}", *flags]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    scheme = "https" if "-tls-cert" in flags else "http"
    try:
        wait_http(f"{scheme}://127.0.0.1:{port}/_truth/records")
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait()


def records(base: str) -> tuple[float, list[tuple[float, float]]]:
    """(stall epoch, [(completed unix seconds, service ms)]) of every request served so far."""
    unverified = ssl._create_unverified_context()
    data = json.loads(urllib.request.urlopen(f"{base}/_truth/records", timeout=30, context=unverified).read())
    return data["epoch"], [(ns / 1e9, us / 1000) for ns, us in data["records"] or []]  # none: null


def served_in_measured_window(base: str, stage: StageResult) -> list[float]:
    """Service ms of every request the server received inside a stage's measured window, sorted.

    Their count is the stage's `requests` (the load generator counts what it sent in the window, those the
    graceful stop awaited after it included), apart only by requests whose two timestamps straddle an edge:
    sent by the client before it, received by the server after it. At most one per user (or connection) at
    each edge, one edge adding and the other taking away: so never further apart than the users, however busy
    the machine."""
    start = stage.started_at.timestamp() + stage.warmup_s
    return sorted(ms for done, ms in records(base)[1] if start <= done - ms / 1000 < start + stage.measured_s)


def wait_served_for(base: str, seconds: float, timeout: float = 60, skip: int = 0) -> None:
    """Wait until the server has been answering for `seconds` (first to last completion in its records): a
    point in the load generator's own run, however long the generator took to start. `skip`: calls made before
    the run, left out (a gRPC run's preflight calls, made a second or more before its client process starts)."""

    def span() -> float:
        done = sorted(completed for completed, _ in records(base)[1])[skip:]
        return done[-1] - done[0] if done else 0.0

    wait_for(lambda: span() >= seconds, timeout=timeout, what=f"{base} to answer for {seconds} s")


def reset(base: str) -> None:
    urllib.request.urlopen(urllib.request.Request(f"{base}/_truth/reset", method="POST"), timeout=10).read()
