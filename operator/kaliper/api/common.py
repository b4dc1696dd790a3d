"""Types shared by the four kinds: units, names, references, resources, scheduling, conditions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator

from kaliper.api.base import KaliperModel, Rule, exactly_one_of
from kaliper.api.units import (
    CPU_PATTERN,
    DURATION_PATTERN,
    QUANTITY_PATTERN,
    parse_cpu,
    parse_duration,
    parse_quantity,
)

GROUP = "kaliper.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


# --- units -------------------------------------------------------------------------------------------


def _quantity_text(value: Any) -> Any:
    """YAML gives `cpu: 2` as an int; the API server accepts ints and strings (int-or-string), not floats."""
    if isinstance(value, bool):
        raise ValueError("must be a quantity such as 500m or 2Gi, not a boolean")
    if isinstance(value, float):
        raise ValueError(f'write {value} as a string ("{value}") or in smaller units (for example 500m)')
    if isinstance(value, int):
        if value < 0:
            raise ValueError("must not be negative")
        return str(value)
    if isinstance(value, str) and len(value) > 64:
        raise ValueError("is longer than 64 characters; no quantity needs that many")
    return value


def _int_or_string_schema(pattern: str, description: str) -> dict[str, Any]:
    # The only anyOf a structural schema allows here is exactly [integer, string]; the pattern applies to
    # strings, and a CEL rule refuses negative integers.
    return {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": pattern,
        "maxLength": 64,
        "description": description,
        "x-kubernetes-validations": [{"rule": "type(self) != int || self >= 0", "message": "must not be negative"}],
    }


def _checked(parse: Any) -> Any:
    def check(value: str) -> str:
        parse(value)  # raises UnitError (a ValueError) with a message that says what is accepted
        return value

    return check


CpuQuantity = Annotated[
    str,
    BeforeValidator(_quantity_text),
    AfterValidator(_checked(parse_cpu)),
    WithJsonSchema(_int_or_string_schema(CPU_PATTERN, "CPU in cores (2, 0.5) or millicores (500m).")),
]
MemoryQuantity = Annotated[
    str,
    BeforeValidator(_quantity_text),
    AfterValidator(_checked(parse_quantity)),
    WithJsonSchema(_int_or_string_schema(QUANTITY_PATTERN, "A Kubernetes quantity such as 512Mi or 2Gi.")),
]
Duration = Annotated[
    str,
    AfterValidator(_checked(parse_duration)),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": DURATION_PATTERN,
            "maxLength": 32,
            "description": "A duration such as 500ms, 30s, 5m or 1h30m.",
        }
    ),
]


def _positive_duration(value: str) -> str:
    if parse_duration(value) <= 0:
        raise ValueError(f"{value!r} must be longer than zero, for example 30s")
    return value


PositiveDuration = Annotated[
    Duration,
    AfterValidator(_positive_duration),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": DURATION_PATTERN,
            "maxLength": 32,
            "description": "A duration longer than zero, such as 500ms, 30s, 5m or 1h30m.",
            "x-kubernetes-validations": [
                {"rule": "duration(self) > duration('0s')", "message": "must be longer than zero, for example 30s"}
            ],
        }
    ),
]

# Names of objects Kaliper creates or refers to (DNS-1123 labels: Services and Deployments need these).
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Name = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
# Names of Kaliper objects themselves (what the API server accepts for any custom resource).
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Keys of ConfigMaps and Secrets.
KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
Key = Annotated[str, Field(min_length=1, max_length=253, pattern=KEY_PATTERN)]
# http:// or https:// followed by something.
HTTP_URL_PATTERN = r"^https?://[^\s/$.?#][^\s]*$"
HttpUrl = Annotated[str, Field(max_length=2048, pattern=HTTP_URL_PATTERN)]
# Extended resource names such as nvidia.com/gpu, amd.com/gpu or a MIG profile nvidia.com/mig-1g.5gb.
RESOURCE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9._]*[a-zA-Z0-9])?$"
LabelMap = Annotated[dict[str, Annotated[str, Field(max_length=63)]], Field(max_length=64)]
StringMap = Annotated[dict[str, Annotated[str, Field(max_length=4096)]], Field(max_length=64)]


def set_of(item: Any, most: int) -> Any:
    """The type of a list the CRD marks as a set (x-kubernetes-list-type: set): 1 to `most` items of `item`, each
    listed once (unique_items refuses a repeat here too, as the API server does)."""
    return Annotated[
        list[item],
        Field(min_length=1, max_length=most, json_schema_extra={"x-kubernetes-list-type": "set"}),
        AfterValidator(unique_items),
    ]


def named_list(item: Any, most: int, fewest: int | None = None) -> Any:
    """The type of a list the CRD keys by its items' `name` (x-kubernetes-list-type: map): a server-side apply
    merges it item by item, and the API server refuses two items of one name."""
    return Annotated[
        list[item],
        Field(
            min_length=fewest,
            max_length=most,
            json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
    ]


def unique_items(values: list[Any]) -> list[Any]:
    """Lists that the CRD marks as sets (x-kubernetes-list-type: set) refuse duplicates here too."""
    seen: list[Any] = []
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice; list each value once")
        seen.append(value)
    return values


# --- references --------------------------------------------------------------------------------------


class LocalObjectReference(KaliperModel):
    """An object in the same namespace, by name."""

    name: Name
    """Name of the object."""


class ConfigMapKeyReference(KaliperModel):
    """One key of a ConfigMap in the same namespace."""

    name: Name
    """Name of the ConfigMap."""
    key: Key
    """Key inside the ConfigMap."""


class SecretKeyReference(KaliperModel):
    """One key of a Secret in the same namespace. Kaliper never reads it; the pod that needs it does."""

    name: Name
    """Name of the Secret."""
    key: Key
    """Key inside the Secret."""


class PvcReference(KaliperModel):
    """A file or folder on a PersistentVolumeClaim in the same namespace."""

    claim_name: Name
    """Name of the PersistentVolumeClaim."""
    path: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[^\s]+$")]
    """Path of the file or folder inside the volume, such as models/resnet50.onnx."""


# --- resources ---------------------------------------------------------------------------------------


def _quantity_order_rule(resource: Literal["cpu", "memory"]) -> Rule:
    parse = parse_cpu if resource == "cpu" else parse_quantity

    def check(resources: ResourceRequirements) -> bool:
        request = getattr(resources.requests, resource, None) if resources.requests else None
        limit = getattr(resources.limits, resource, None) if resources.limits else None
        return request is None or limit is None or parse(request) <= parse(limit)

    return Rule(
        cel=(
            f"!has(self.requests) || !has(self.limits) || !has(self.requests.{resource}) || "
            f"!has(self.limits.{resource}) || "
            f"quantity(string(self.requests.{resource})).compareTo(quantity(string(self.limits.{resource}))) <= 0"
        ),
        message=f"requests.{resource} must not exceed limits.{resource}; raise the limit or lower the request",
        check=check,
        field_path=f".requests.{resource}",
    )


class ResourceList(KaliperModel):
    """CPU and memory amounts."""

    cpu: CpuQuantity | None = None
    """CPU in cores (2, 0.5) or millicores (500m)."""
    memory: MemoryQuantity | None = None
    """Memory as a Kubernetes quantity (512Mi, 2Gi)."""


class GpuRequest(KaliperModel):
    """Accelerators for each replica, requested as a Kubernetes extended resource."""

    count: Annotated[int, Field(ge=0, le=16)] = 1
    """Number of devices (or MIG slices) per replica."""
    resource_name: Annotated[str, Field(max_length=253, pattern=RESOURCE_NAME_PATTERN)] = "nvidia.com/gpu"
    """Extended resource name: nvidia.com/gpu, a MIG profile such as nvidia.com/mig-1g.5gb, or amd.com/gpu."""


class ResourceRequirements(KaliperModel):
    """Requests and limits for each replica, enforced by Kubernetes (or by cgroups under `kaliper run`)."""

    requests: ResourceList | None = None
    """What the scheduler reserves for each replica."""
    limits: ResourceList | None = None
    """The ceiling: CPU above it is throttled (CFS quota), memory above it is OOM-killed."""
    gpu: GpuRequest | None = None
    """Accelerators for each replica."""

    cross_field_rules = (_quantity_order_rule("cpu"), _quantity_order_rule("memory"))


# --- scheduling --------------------------------------------------------------------------------------


class Toleration(KaliperModel):
    """A Kubernetes toleration, copied onto the pods."""

    key: Annotated[str, Field(max_length=316)] | None = None
    """Taint key; empty with operator Exists matches every taint."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """Exists matches any value; Equal matches `value`."""
    value: Annotated[str, Field(max_length=63)] | None = None
    """Taint value to match when operator is Equal."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """Taint effect to match; empty matches all effects."""
    toleration_seconds: Annotated[int, Field(ge=0)] | None = None
    """For NoExecute: how long the pod stays bound after the taint appears."""

    cross_field_rules = (
        Rule(
            cel="!has(self.value) || !has(self.operator) || self.operator != 'Exists'",
            message="operator Exists takes no value; remove value or use operator Equal",
            check=lambda t: t.value is None or t.operator != "Exists",
            field_path=".value",
        ),
    )


# --- environment -------------------------------------------------------------------------------------


class EnvVarSource(KaliperModel):
    """Where an environment variable's value comes from."""

    secret_key_ref: SecretKeyReference | None = None
    """A key of a Secret; the value goes straight into the pod and never through Kaliper."""
    config_map_key_ref: ConfigMapKeyReference | None = None
    """A key of a ConfigMap."""

    cross_field_rules = (exactly_one_of("secret_key_ref", "config_map_key_ref"),)


class EnvVar(KaliperModel):
    """An environment variable for the serving container."""

    name: Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")]
    """Variable name."""
    value: Annotated[str, Field(max_length=32768)] | None = None
    """A literal value."""
    value_from: EnvVarSource | None = None
    """A value read from a Secret or ConfigMap key."""

    cross_field_rules = (
        Rule(
            cel="!(has(self.value) && has(self.valueFrom))",
            message="value and valueFrom are mutually exclusive; set at most one",
            check=lambda e: not (e.value is not None and e.value_from is not None),
        ),
    )


# --- tensors -----------------------------------------------------------------------------------------

TensorDatatype = Literal[
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
]


class TensorSpec(KaliperModel):
    """A named tensor: what the model takes or returns (Open Inference Protocol v2 names the datatypes)."""

    name: Annotated[str, Field(min_length=1, max_length=128)]
    """Tensor name as the model knows it, such as input or float_input."""
    shape: Annotated[list[Annotated[int, Field(ge=-1)]], Field(min_length=1, max_length=8)]
    """Dimensions; -1 marks a dynamic one (usually the batch), filled with the batch size when generating."""
    datatype: TensorDatatype = "FP32"
    """Element type, as the Open Inference Protocol v2 spells it."""


# --- status ------------------------------------------------------------------------------------------


class Condition(KaliperModel):
    """A Kubernetes-style condition: the latest observation of one aspect of the object."""

    type: Annotated[str, Field(min_length=1, max_length=64)]
    """Condition type, such as Ready, Progressing, Degraded or Complete."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds."""
    reason: Annotated[str, Field(max_length=128)] = ""
    """One CamelCase word for machines."""
    message: Annotated[str, Field(max_length=4096)] = ""
    """A sentence for people: what happened and what to do."""
    last_transition_time: datetime | None = None
    """When status last changed."""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    """The metadata.generation this condition was computed from."""


def with_condition(
    conditions: list[Condition], kind: str, ok: bool, reason: str, message: str, now: datetime, generation: int | None
) -> list[Condition]:
    """The conditions with `kind` set; its transition time moves only when its status changes."""
    status = "True" if ok else "False"
    previous = next((c for c in conditions if c.type == kind), None)
    since = previous.last_transition_time if previous and previous.status == status else now
    updated = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message[:4096],
        last_transition_time=since,
        observed_generation=generation,
    )
    return [c for c in conditions if c.type != kind] + [updated]


# kstatus (sigs.k8s.io/cli-utils, what Flux's health checks and `flux` wait use) and Argo CD's health checks read
# three conditions: Reconciling True means still working, Stalled True means failed for good (both
# "abnormal-true"), and Ready True means done. Exactly one of them holds at any time.
KstatusState = Literal["Reconciling", "Ready", "Stalled"]


class KStatus(NamedTuple):
    state: KstatusState
    reason: str
    message: str


def readiness_of_phase(phase: str | None, conditions: list[Condition]) -> KStatus:
    """What a run-to-completion object's phase means to kstatus, with the reason and message of the
    condition that says the most: Complete once finished, Progressing before."""
    latest = {c.type: c for c in conditions}
    if phase in ("Succeeded", "Failed"):
        complete = latest.get("Complete")
        reason = complete.reason if complete and complete.reason else phase
        message = complete.message if complete else ""
        return KStatus("Ready" if phase == "Succeeded" else "Stalled", reason, message or phase.lower())
    progressing = latest.get("Progressing")
    reason = progressing.reason if progressing and progressing.reason else (phase or "Pending")
    return KStatus("Reconciling", reason, (progressing.message if progressing else "") or "work has not finished")


def with_readiness(
    conditions: list[Condition], readiness: KStatus, now: datetime, generation: int | None
) -> list[Condition]:
    """The conditions with Ready, Reconciling and Stalled set from `readiness`: the one it names True, the
    others False, all three with its reason and message."""
    for kind in ("Ready", "Reconciling", "Stalled"):
        ok = kind == readiness.state
        conditions = with_condition(conditions, kind, ok, readiness.reason, readiness.message, now, generation)
    return conditions


def conditions_field() -> Any:
    return Field(
        default_factory=list,
        max_length=32,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class ObjectStatus(KaliperModel):
    """What every kind's status starts with; each kind narrows `phase` to its own words."""

    phase: str | None = None
    """One word for where the object is; see conditions for details."""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    """The metadata.generation this status describes."""
    conditions: list[Condition] = conditions_field()
    """Kubernetes-style conditions with reasons and messages."""


class WorkStatus(ObjectStatus):
    """The status of a kind that does a piece of work once (a run, an optimization): when it started and ended."""

    start_time: datetime | None = None
    """When work started."""
    completion_time: datetime | None = None
    """When work finished (succeeded or failed)."""


class ObjectMeta(KaliperModel):
    """The parts of Kubernetes object metadata that `kaliper validate` checks; the rest passes through."""

    model_config = KaliperModel.model_config | {"extra": "allow"}

    name: Annotated[str, Field(max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)] | None = None
    generate_name: Annotated[str, Field(max_length=253)] | None = None
    namespace: Annotated[str, Field(max_length=63, pattern=DNS_LABEL_PATTERN)] | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    @model_validator(mode="after")
    def _named(self) -> ObjectMeta:
        # Checked here only: the API server already refuses an object without a name.
        if not (self.name or self.generate_name):
            raise ValueError("set metadata.name (or metadata.generateName)")
        return self
