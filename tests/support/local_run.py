"""The manifests of a small local profiling run (the `kaliper` command is tests.support.paths.KALIPER)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
