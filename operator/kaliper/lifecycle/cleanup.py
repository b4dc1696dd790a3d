"""What a Cleanup removes: pure decisions over the objects it found, no I/O.

A Cleanup only ever lists the Kaliper kinds it names, so a Deployment or ConfigMap that its selector happens
to match is never even considered; what those kinds own goes with them through the garbage collector. Of
the objects it lists, it leaves alone any that another Kaliper object owns (a ProfileRun's trial
ModelDeployments, a ModelOptimization's follow-ups): they go with their owner, and removing one alone
would break a run that is still going.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from croniter import croniter

from kaliper.api.cleanup import CleanupSpec, LabelSelector
from kaliper.api.common import GROUP
from kaliper.api.units import parse_duration
from kaliper.lifecycle.gitops import gitops_manager
from kaliper.lifecycle.objects import ClusterObject

# Kinds whose age for olderThan counts from when they finished; others (ModelDeployment) from creation.
FINISHING_KINDS = ("ProfileRun", "ModelOptimization")


@dataclass(frozen=True)
class Found(ClusterObject):
    """One object a Cleanup looked at."""

    labels: Mapping[str, str]
    phase: str | None
    created: datetime
    finished: datetime | None
    kaliper_owner: str | None  # "Kind/name" of a Kaliper object that owns it
    gitops_manager: str | None = None  # "Argo CD application NAME" and the like (lifecycle.gitops)

    @classmethod
    def from_object(cls, kind: str, obj: Mapping[str, Any]) -> Found:
        meta, status = obj["metadata"], obj.get("status") or {}
        owner = next(
            (r for r in meta.get("ownerReferences") or [] if str(r.get("apiVersion", "")).startswith(f"{GROUP}/")),
            None,
        )
        finished = status.get("completionTime")
        return cls(
            kind=kind,
            namespace=meta["namespace"],
            name=meta["name"],
            uid=meta.get("uid", ""),
            labels=meta.get("labels") or {},
            phase=status.get("phase"),
            created=_time(meta["creationTimestamp"]),
            finished=_time(finished) if finished else None,
            kaliper_owner=f"{owner['kind']}/{owner['name']}" if owner else None,
            gitops_manager=gitops_manager(meta),
        )

    def age_s(self, now: datetime) -> float | None:
        """Seconds since it finished (runs) or was created (deployments); None for a run still going."""
        if self.kind in FINISHING_KINDS:
            return (now - self.finished).total_seconds() if self.finished else None
        return (now - self.created).total_seconds()


@dataclass
class CleanupPlan:
    remove: list[Found] = field(default_factory=list)
    matched: int = 0
    # Objects the filters matched that stay, with the reason (newest N kept, owned by another object).
    kept: list[tuple[Found, str]] = field(default_factory=list)


def plan_cleanup(spec: CleanupSpec, found: list[Found], now: datetime) -> CleanupPlan:
    plan = CleanupPlan()
    matching = [f for f in found if f.kind in spec.kinds and _matches(spec, f, now)]
    plan.matched = len(matching)
    keep_last = spec.keep_last or 0
    for group in _by_kind_and_namespace(matching):
        newest_first = sorted(group, key=lambda f: (f.created, f.name), reverse=True)
        for position, item in enumerate(newest_first):
            if position < keep_last:
                plan.kept.append((item, f"one of the newest {keep_last} (keepLast)"))
            elif item.kaliper_owner:
                plan.kept.append((item, f"owned by {item.kaliper_owner}; it goes with its owner"))
            elif item.gitops_manager and not spec.include_git_ops_managed:
                plan.kept.append((item, f"managed by {item.gitops_manager}, which would create it again"))
            else:
                plan.remove.append(item)
    plan.remove.sort(key=lambda f: (f.kind, f.namespace, f.name))
    return plan


def kept_reason(reason: str) -> str:
    """A kept object's reason, grouped for the Cleanup's message."""
    if "keepLast" in reason:
        return "kept by keepLast"
    if reason.startswith("managed by"):
        return "managed by Argo CD or Flux (spec.includeGitOpsManaged)"
    return "left with their Kaliper owner"


def _matches(spec: CleanupSpec, item: Found, now: datetime) -> bool:
    if spec.selector is not None and not selector_matches(spec.selector, item.labels):
        return False
    if spec.phases is not None and item.phase not in spec.phases:
        return False
    if spec.older_than is not None:
        age = item.age_s(now)
        if age is None or age < parse_duration(spec.older_than):
            return False
    return True


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics: every matchLabels pair and every expression must hold."""
    if any(labels.get(k) != v for k, v in (selector.match_labels or {}).items()):
        return False
    for requirement in selector.match_expressions or []:
        present, value = requirement.key in labels, labels.get(requirement.key)
        values = requirement.values or []
        ok = {
            "In": present and value in values,
            "NotIn": not present or value not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[requirement.operator]
        if not ok:
            return False
    return True


def _by_kind_and_namespace(items: list[Found]) -> list[list[Found]]:
    groups: dict[tuple[str, str], list[Found]] = {}
    for item in items:
        groups.setdefault((item.kind, item.namespace), []).append(item)
    return [groups[k] for k in sorted(groups)]


def next_run(schedule: str, after: datetime) -> datetime:
    """The first time the cron schedule fires strictly after `after` (in UTC, as Kubernetes CronJobs)."""
    return croniter(schedule, after).get_next(datetime)


def describe_age(seconds: float | None) -> str | None:
    """As kubectl shows ages: 3d4h, 5h12m, 7m30s, 45s."""
    if seconds is None:
        return None
    s = int(seconds)
    if s >= 86400:
        return f"{s // 86400}d{s % 86400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60}m"
    if s >= 60:
        return f"{s // 60}m{s % 60}s"
    return f"{s}s"


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
