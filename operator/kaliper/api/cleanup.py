"""Cleanup: remove finished runs and the objects they created, by selector, age and phase."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from kaliper.api.base import KaliperModel, Rule, at_most_one_of
from kaliper.api.common import Duration, LabelMap, Name, ObjectStatus, set_of

CleanupKind = Literal["ProfileRun", "ModelOptimization", "ModelDeployment"]
# The phases of the kinds above that a Cleanup can select on.
SelectablePhase = Literal["Succeeded", "Failed", "Pending", "Running", "Ready", "Degraded", "Progressing"]
# Five cron fields (minute hour day-of-month month day-of-week) or a macro such as @daily.
CRON_PATTERN = (
    r"^(@(yearly|annually|monthly|weekly|daily|hourly)|"
    r"([0-9*/,-]+)\s+([0-9*/,-]+)\s+([0-9*/,?LW-]+)\s+([0-9A-Za-z*/,-]+)\s+([0-9A-Za-z*/,?L#-]+))$"
)


class LabelSelectorRequirement(KaliperModel):
    """A set-based label requirement, as in Kubernetes label selectors."""

    key: Annotated[str, Field(min_length=1, max_length=316)]
    """Label key."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key's value is matched against values."""
    values: Annotated[list[Annotated[str, Field(max_length=63)]], Field(max_length=64)] | None = None
    """Values for In and NotIn."""

    cross_field_rules = (
        Rule(
            cel="self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : !has(self.values)",
            message="operators In and NotIn need values; Exists and DoesNotExist take none",
            check=lambda r: bool(r.values) if r.operator in ("In", "NotIn") else r.values is None,
            field_path=".values",
        ),
    )


class LabelSelector(KaliperModel):
    """Which objects, by label. Both parts must match."""

    match_labels: LabelMap | None = None
    """Labels an object must have, with these values."""
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=16)] | None = None
    """Set-based requirements an object must meet."""


class CleanupSpec(KaliperModel):
    """What to remove. Every filter set here must match; deleting an object removes what it owns."""

    kinds: set_of(CleanupKind, 3)
    """Kinds to remove: ProfileRun, ModelOptimization, ModelDeployment."""
    selector: LabelSelector | None = None
    """Only objects with these labels."""
    namespaces: set_of(Name, 64) | None = None
    """Namespaces to look in. Default: the Cleanup's own namespace."""
    all_namespaces: bool | None = None
    """Look in every namespace the operator watches."""
    older_than: Duration | None = None
    """Only objects whose run finished (or, for deployments, that were created) longer ago than this."""
    phases: set_of(SelectablePhase, 7) | None = None
    """Only objects in these phases, such as Succeeded and Failed."""
    keep_last: Annotated[int, Field(ge=0, le=10000)] | None = None
    """Keep the newest N matching objects of each kind in each namespace."""
    dry_run: bool = False
    """List what would be removed, in status, without removing anything."""
    schedule: Annotated[str, Field(max_length=128, pattern=CRON_PATTERN)] | None = None
    """Run on this cron schedule (such as "0 3 * * *" or @daily). Default: once."""
    propagation_policy: Literal["Background", "Foreground", "Orphan"] = "Background"
    """How owned objects go: Background and Foreground delete them too; Orphan leaves them."""
    include_git_ops_managed: bool = False
    """Also remove objects that Argo CD or Flux manages (their tracking annotation or labels). Default false:
    they are kept and counted in status.message, since the tool would create them again."""

    cross_field_rules = (
        at_most_one_of("namespaces", "all_namespaces"),
        Rule(
            cel="has(self.selector) || has(self.olderThan) || has(self.phases) || has(self.keepLast)",
            message="a Cleanup must narrow what it removes: set selector, olderThan, phases or keepLast",
            check=lambda c: any(v is not None for v in (c.selector, c.older_than, c.phases, c.keep_last)),
        ),
    )


class RemovedObject(KaliperModel):
    """An object a Cleanup removed (or, in a dry run, would remove)."""

    kind: CleanupKind
    """Kind of the object."""
    namespace: Annotated[str, Field(max_length=63)]
    """Namespace of the object."""
    name: Annotated[str, Field(max_length=253)]
    """Name of the object."""
    phase: Annotated[str, Field(max_length=32)] | None = None
    """One word for where the object is; see conditions for details."""
    age: Annotated[str, Field(max_length=32)] | None = None
    """Age of the object when it was removed."""


class CleanupStatus(ObjectStatus):
    """What the latest pass removed, and when the next one runs."""

    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Scheduled"] | None = None
    """One word for where the object is; see conditions for details."""
    last_run_time: datetime | None = None
    """When the latest pass ran."""
    next_run_time: datetime | None = None
    """When the next scheduled pass runs."""
    matched: Annotated[int, Field(ge=0)] | None = None
    """Objects that matched in the latest pass."""
    removed_count: Annotated[int, Field(ge=0)] | None = None
    """Objects removed in the latest pass (0 in a dry run)."""
    removed: Annotated[list[RemovedObject], Field(max_length=500)] | None = None
    """The objects removed (or that would be, in a dry run); the first 500."""
    message: Annotated[str, Field(max_length=4096)] | None = None
    """What a person should know: what happened and what to do."""
