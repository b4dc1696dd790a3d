"""Running a tutorial's commands, or a make target's recipe, as a user's shell runs them: in a folder of their
own that holds the examples they read and this checkout's `.venv` (the suite runs in a set-up tree, so `make
setup` is the one command these tests leave out)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.paths import REPO


def make_recipe(target: str) -> list[str]:
    """A Makefile target's commands as written, `$(BIN)` spelled out."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"{target}:"))) + 1
    recipe = []
    for line in lines[start:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().replace("$(BIN)", ".venv/bin"))
    return recipe


def workspace(folder: Path, *paths: str) -> Path:
    """`folder` holding copies of the repository's `paths` (files or folders, at the same places) and a link to
    this checkout's `.venv`."""
    for path in paths:
        source, copy = REPO / path, folder / path
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, copy)
        else:
            shutil.copy(source, copy)
    (folder / ".venv").symlink_to(REPO / ".venv")
    return folder


def run_as_written(
    commands: list[str], folder: Path, env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """Each command run by bash in `folder`, in order, each to exit 0 (else the test fails with the command and
    what it printed last), with what it printed. KUBECONFIG is left out: a tutorial on one machine must not
    reach the suite's clusters."""
    finished = []
    environment = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"} | (env or {})
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command], cwd=folder, capture_output=True, text=True, timeout=600, env=environment
        )
        assert done.returncode == 0, (command, done.stderr[-3000:])
        finished.append(done)
    return finished
