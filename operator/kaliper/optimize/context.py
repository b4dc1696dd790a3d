"""What an optimization is given and how it fails, shared by the ONNX engine and the GGUF one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Inputs:
    """Where things are on the machine that runs the optimization."""

    model: Path
    """The model file."""
    output: Path
    """The folder the kept models and the report go to."""
    artifact_uri: Callable[[Path], str]
    """How a file under `output` is named in the status (a local path, or pvc://claim/path)."""
    cpus: float
    """CPUs the optimizer may use (its CPU limit, else the CPUs it sees): the default thread counts."""
    limited: bool = False
    """Whether `cpus` is a CPU limit (a CFS quota), whose throttling is then read around each measurement."""
    dataset: Path | None = None
    """The labelled rows of evaluator.accuracy.dataset."""


class OptimizationFailed(Exception):
    """A failed optimization: a reason (a CamelCase word for the status condition) and a message a person can
    act on."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
