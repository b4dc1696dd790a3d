"""The manifests of a small local profiling run (the `kaliper` command is tests.support.paths.KALIPER), and
`kaliper run` of manifests written to a folder."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kaliper.report.schema import ProfileReport
from tests.support.paths import KALIPER


def deployment(model: Path, **spec: Any) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "iris"},
        "spec": {"model": {"file": str(model), "name": "iris"}, "threads": {"intraOp": 1}, **spec},
    }


def profile_run(**spec: Any) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "iris-test"},
        "spec": {
            "target": {"deploymentRef": {"name": "iris"}},
            "payload": {"tensors": {"inputs": [{"name": "float_input", "shape": [-1, 4]}], "seed": 1}},
            "load": {
                "closedLoop": {"concurrency": 4},
                "warmup": "1s",
                "minDuration": "3s",
                "maxDuration": "3s",
                "stopping": {"window": "1s"},
            },
            "metrics": {"sampleInterval": "250ms"},
            **spec,
        },
    }


def run_manifests(
    directory: Path,
    manifests: list[dict],
    env: dict[str, str] | None = None,
    expect: int = 0,
    favoured: bool = False,
) -> tuple[ProfileReport, subprocess.CompletedProcess]:
    """`kaliper run --ignore-other-work` of `manifests` (written to DIRECTORY/run.yaml) into DIRECTORY/reports:
    its report and the finished process, whose exit status must be `expect`. The busy-machine check is off:
    make test runs another pytest worker beside these runs (tests/local/test_kaliper_run.py tests the check).

    `favoured` runs it (its load generator and servers too) at nice -10, for a run whose verdicts sit within tens
    of milliseconds of a bound: beside a process burning a core and the other worker, the load generator pinned
    to one core otherwise waits behind them for whole scheduler slices."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "run.yaml"
    path.write_text("\n---\n".join(json.dumps(m) for m in manifests))
    process = subprocess.run(
        [str(KALIPER), "run", str(path), "--output-dir", str(directory / "reports"), "--ignore-other-work"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        preexec_fn=(lambda: os.nice(-10)) if favoured else None,
    )
    assert process.returncode == expect, process.stderr
    return ProfileReport.model_validate_json((directory / "reports" / "report.json").read_text()), process


def run_watching(command: list[str], watch: Callable[[int], None], timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the command, calling watch(its pid) every tenth of a second while it runs."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            watch(process.pid)
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
        process.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(command, process.returncode, out.read(), err.read())


def kaliper_run(
    tmp_path: Path, *documents: dict, flags: tuple[str, ...] = (), watch: Callable[[int], None] | None = None
) -> tuple[subprocess.CompletedProcess, ProfileReport | None]:
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    out = tmp_path / "reports"
    command = [str(KALIPER), "run", str(manifest), "--output-dir", str(out), *flags]
    if watch is None:
        process = subprocess.run(command, capture_output=True, text=True, timeout=300)
    else:
        process = run_watching(command, watch)
    report = out / "report.json"
    return process, ProfileReport.model_validate_json(report.read_text()) if report.exists() else None
