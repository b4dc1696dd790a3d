"""Leftovers in a cluster, decided without I/O: what `kaliper gc` lists and the operator's TTL expiry uses.

Kubernetes' garbage collector removes what Kaliper creates once its owner is gone, unless the owner was
deleted with `--cascade=orphan` (or the collector is down); and the operator deletes finished runs when
their ttl passes, unless it is not running. `kaliper gc` finds both, so nothing outlives its purpose.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kaliper.api.common import GROUP
from kaliper.api.units import parse_duration
from kaliper.lifecycle.gitops import gitops_manager
from kaliper.lifecycle.objects import ClusterObject

FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ClusterLeftover(ClusterObject):
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "why": self.why}


def ttl_expired(run: Mapping[str, Any], now: datetime) -> str | None:
    """Why a finished run (ProfileRun, ModelOptimization) is due for deletion by its spec.ttl, or None."""
    ttl = (run.get("spec") or {}).get("ttl") or {}
    status = run.get("status") or {}
    if status.get("phase") not in FINISHED or not status.get("completionTime"):
        return None
    after = ttl.get("afterSuccess" if status["phase"] == "Succeeded" else "afterFailure")
    if after is None:
        return None
    finished = datetime.fromisoformat(status["completionTime"].replace("Z", "+00:00"))
    if finished + timedelta(seconds=parse_duration(after)) > now:
        return None
    return f"{status['phase']} at {status['completionTime']}; its ttl ({after}) has passed"


def ttl_held_by_gitops(run: Mapping[str, Any]) -> str | None:
    """Why a run past its ttl stays: a GitOps tool manages it (and would create it again, its load test with
    it) and its spec.ttl does not say deleteGitOpsManaged. None: the ttl may delete it."""
    manager = gitops_manager(run["metadata"])
    if manager is None or ((run.get("spec") or {}).get("ttl") or {}).get("deleteGitOpsManaged"):
        return None
    return (
        f"{manager} manages it and would create it again (and run it again): kept; "
        "set spec.ttl.deleteGitOpsManaged to delete it anyway"
    )


def expires_at(ttl: Mapping[str, Any] | None, failed: bool, finished: datetime) -> datetime | None:
    """When a run that finished at `finished` may be removed under its spec.ttl (camelCase keys)."""
    after = (ttl or {}).get("afterFailure" if failed else "afterSuccess")
    return None if after is None else finished + timedelta(seconds=parse_duration(after))


def orphans(
    objects: list[tuple[str, Mapping[str, Any]]], existing_uids: set[str], now: datetime
) -> list[ClusterLeftover]:
    """Kaliper-made objects ((kind, object) pairs) without a living Kaliper owner, given the uids of every
    Kaliper object that exists now. Everything Kaliper makes has an owner, so one without any was orphaned
    on purpose (its owner deleted with --cascade=orphan, which strips the references); except a report kept
    apart from its run (spec.report.keepFor), which is a leftover once its keep-until time has passed."""
    found = []
    for kind, obj in objects:
        meta = obj["metadata"]
        owners = [r for r in meta.get("ownerReferences") or [] if str(r.get("apiVersion", "")).startswith(GROUP)]
        keep_until = (meta.get("annotations") or {}).get(KEEP_UNTIL)
        if keep_until is not None:
            if datetime.fromisoformat(keep_until.replace("Z", "+00:00")) > now:
                continue
            why = f"a run's report kept until {keep_until} (spec.report.keepFor), which has passed"
        elif not owners:
            why = "no Kaliper owner (its owner was deleted with --cascade=orphan)"
        elif not any(r.get("uid") in existing_uids for r in owners):
            why = "its owner " + ", ".join(f"{r['kind']}/{r['name']}" for r in owners) + " is gone"
        else:
            continue
        found.append(ClusterLeftover(kind, meta["namespace"], meta["name"], meta.get("uid", ""), why))
    return sorted(found, key=lambda f: (f.namespace, f.kind, f.name))


# On a run's report ConfigMap kept apart from its run (spec.report.keepFor): until when (RFC 3339, UTC).
KEEP_UNTIL = "kaliper.dev/keep-until"

# Kinds Kaliper creates for its resources (labelled app.kubernetes.io/managed-by=kaliper), owned by them.
MADE_KINDS = (
    "ModelDeployment",
    "Deployment",
    "Service",
    "Job",
    "ConfigMap",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "NetworkPolicy",
)
MANAGED = "app.kubernetes.io/managed-by=kaliper"
OWNER_KINDS = ("ProfileRun", "ModelDeployment", "ModelOptimization")
RUN_KINDS = ("ProfileRun", "ModelOptimization")


def cluster_leftovers(
    owners: Mapping[str, list[Mapping[str, Any]]], made: list[tuple[str, Mapping[str, Any]]], now: datetime
) -> list[ClusterLeftover]:
    """Everything `kaliper gc` lists in a cluster: Kaliper-made objects (`made`, (kind, object) pairs) whose
    owner is gone, and finished runs past their ttl, given Kaliper's own objects by kind (`owners`)."""
    uids = {o["metadata"]["uid"] for items in owners.values() for o in items}
    found = orphans(made, uids, now)
    for kind in RUN_KINDS:
        for run in owners.get(kind, []):
            why = ttl_expired(run, now)
            if why is not None and ttl_held_by_gitops(run) is None:
                meta = run["metadata"]
                found.append(ClusterLeftover(kind, meta["namespace"], meta["name"], meta["uid"], why))
    return sorted(found, key=lambda f: (f.namespace, f.kind, f.name))
