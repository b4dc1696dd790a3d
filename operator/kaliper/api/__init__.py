"""The Kaliper API: pydantic models of the four kinds, the single source of the CRDs."""

from kaliper.api.common import API_VERSION, GROUP, VERSION
from kaliper.api.resources import KINDS, KINDS_BY_NAME, Cleanup, ModelDeployment, ModelOptimization, ProfileRun

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "KINDS_BY_NAME",
    "VERSION",
    "Cleanup",
    "ModelDeployment",
    "ModelOptimization",
    "ProfileRun",
]
