"""The four kinds as whole objects (apiVersion, kind, metadata, spec, status) and what the CRDs say about them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel

from kaliper.api.base import KaliperModel, Rule
from kaliper.api.cleanup import CleanupSpec, CleanupStatus
from kaliper.api.common import API_VERSION, ObjectMeta
from kaliper.api.modeldeployment import ModelDeploymentSpec, ModelDeploymentStatus
from kaliper.api.modeloptimization import ModelOptimizationSpec, ModelOptimizationStatus
from kaliper.api.profilerun import ProfileRunSpec, ProfileRunStatus

SpecT = TypeVar("SpecT", bound=BaseModel)
StatusT = TypeVar("StatusT", bound=BaseModel)

# Service names are DNS-1035 labels (start with a letter, at most 63 characters).
_DNS_1035 = "^[a-z]([-a-z0-9]*[a-z0-9])?$"


def _name_rule(max_length: int, why: str) -> Rule:
    """metadata.name must be usable in the names of the objects Kaliper creates for this one."""
    pattern = re.compile(_DNS_1035)

    def check(obj: KaliperModel) -> bool:
        name = obj.metadata.name  # type: ignore[attr-defined]
        return name is None or (len(name) <= max_length and bool(pattern.match(name)))

    return Rule(
        cel=f"self.metadata.name.size() <= {max_length} && self.metadata.name.matches('{_DNS_1035}')",
        message=f"metadata.name must be at most {max_length} lowercase letters, digits and '-', starting with a "
        f"letter ({why})",
        check=check,
    )


class Resource(KaliperModel, Generic[SpecT, StatusT]):
    """What every kind has: apiVersion, kind, metadata, spec and status (each kind narrows kind to its name)."""

    api_version: Literal["kaliper.dev/v1alpha1"]
    kind: str
    metadata: ObjectMeta
    spec: SpecT
    status: StatusT | None = None


class ModelDeployment(Resource[ModelDeploymentSpec, ModelDeploymentStatus]):
    """Serve a model as an inference Deployment and Service, with resource requests/limits and GPUs."""

    kind: Literal["ModelDeployment"]
    cross_field_rules = (_name_rule(63, "it names the Service and Deployment"),)


class ProfileRun(Resource[ProfileRunSpec, ProfileRunStatus]):
    """Load-test a target over a sweep of configurations and recommend the cheapest one that meets the SLO."""

    kind: Literal["ProfileRun"]
    cross_field_rules = (_name_rule(52, "trial deployments are named <run>-t<index>"),)


class ModelOptimization(Resource[ModelOptimizationSpec, ModelOptimizationStatus]):
    """Make a model faster under an accuracy goal; report the candidates and the Pareto frontier."""

    kind: Literal["ModelOptimization"]
    cross_field_rules = (_name_rule(52, "candidate and follow-up objects are named after it"),)


class Cleanup(Resource[CleanupSpec, CleanupStatus]):
    """Remove finished runs and the objects they created, by selector, age and phase."""

    kind: Literal["Cleanup"]


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    type: Literal["string", "integer", "number", "boolean", "date"]
    json_path: str
    description: str
    priority: int = 0


_AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since the object was created.")


@dataclass(frozen=True)
class KindInfo:
    """Everything the CRD of one kind is generated from."""

    model: type[KaliperModel]
    plural: str
    short_names: tuple[str, ...]
    printer_columns: tuple[PrinterColumn, ...]

    @property
    def kind(self) -> str:
        return self.model.__name__

    @property
    def spec_model(self) -> type[BaseModel]:
        return self.model.model_fields["spec"].annotation  # type: ignore[return-value]

    @property
    def status_model(self) -> type[BaseModel]:
        annotation = self.model.model_fields["status"].annotation
        return next(a for a in annotation.__args__ if a is not type(None))  # type: ignore[union-attr]


KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        model=ModelOptimization,
        plural="modeloptimizations",
        short_names=("mopt",),
        printer_columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Pending, Running, Succeeded or Failed."),
            PrinterColumn("Evaluated", "integer", ".status.evaluated", "Candidates evaluated."),
            PrinterColumn("Chosen", "string", ".status.chosen.candidateId", "The chosen candidate."),
            PrinterColumn(
                "Speedup%",
                "number",
                ".status.chosen.latencyImprovementPercent",
                "Latency improvement of the chosen one.",
            ),
            _AGE,
        ),
    ),
    KindInfo(
        model=ModelDeployment,
        plural="modeldeployments",
        short_names=("mdep",),
        printer_columns=(
            PrinterColumn("Runtime", "string", ".spec.runtime.type", "Serving runtime."),
            PrinterColumn("Replicas", "integer", ".spec.replicas", "Desired replicas."),
            PrinterColumn("Ready", "integer", ".status.readyReplicas", "Ready replicas."),
            PrinterColumn("Phase", "string", ".status.phase", "Pending, Progressing, Ready, Degraded or Failed."),
            PrinterColumn("Endpoint", "string", ".status.endpoint", "Base URL of the served model.", priority=1),
            PrinterColumn(
                "Prediction", "string", ".status.production.reason", "The latest check of spec.prediction.", priority=1
            ),
            _AGE,
        ),
    ),
    KindInfo(
        model=ProfileRun,
        plural="profileruns",
        short_names=("prun",),
        printer_columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Pending, Running, Succeeded or Failed."),
            PrinterColumn("Progress", "string", ".status.progress.summary", "Trials completed of total."),
            PrinterColumn("P99-ms", "number", ".status.best.p99Ms", "p99 latency of the best configuration."),
            PrinterColumn("RPS", "number", ".status.best.throughputRps", "Throughput of the best configuration."),
            PrinterColumn("Verdict", "string", ".status.verdict", "Whether any configuration met the SLO."),
            PrinterColumn(
                "Cost/1M", "number", ".status.cost.currencyPerMillionRequests", "Cost per million requests.", priority=1
            ),
            _AGE,
        ),
    ),
    KindInfo(
        model=Cleanup,
        plural="cleanups",
        short_names=("kclean",),
        printer_columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Pending, Running, Succeeded, Failed or Scheduled."),
            PrinterColumn("Removed", "integer", ".status.removedCount", "Objects removed in the latest pass."),
            PrinterColumn("Schedule", "string", ".spec.schedule", "Cron schedule, if any."),
            PrinterColumn("Last-Run", "date", ".status.lastRunTime", "When the latest pass ran."),
            _AGE,
        ),
    ),
)

KINDS_BY_NAME: dict[str, KindInfo] = {info.kind: info for info in KINDS}
__all__ = [
    "API_VERSION",
    "KINDS",
    "KINDS_BY_NAME",
    "Cleanup",
    "KindInfo",
    "ModelDeployment",
    "ModelOptimization",
    "PrinterColumn",
    "ProfileRun",
]
