"""Small specs the profiling tests build on: a ModelDeployment to sweep and a ProfileRun around it."""

from __future__ import annotations

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunSpec

BASE = ModelDeploymentSpec.model_validate({"model": {"file": "m.onnx"}, "resources": {"requests": {"memory": "1Gi"}}})


def spec(**extra: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {
            "target": {"deploymentRef": {"name": "m"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 2}},
            **extra,
        }
    )
