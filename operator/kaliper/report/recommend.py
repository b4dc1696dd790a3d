"""A run's recommendation as something a pipeline can commit: a patch of the target (what `kubectl patch`
takes and what the status carries), a kustomize patch file, or the target's manifest with the patch applied.
A ModelDeployment target gets a JSON merge patch of its spec; a Deployment (a workloadRef) a strategic merge
patch, which finds its serving container by name (a JSON merge patch would replace the whole containers
list). Pure: the caller reads the report and the target."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import yaml

from kaliper.report.schema import ProfileReport, RecommendationReport

FORMATS = ("patch", "merge-patch", "kustomize", "manifest")
API_VERSIONS = {"ModelDeployment": "kaliper.dev/v1alpha1", "Deployment": "apps/v1"}


class NoRecommendation(ValueError):
    """The report has nothing to turn into a patch; the message says why."""


@dataclass(frozen=True)
class Target:
    """The object a run profiled, which its recommendation patches."""

    kind: str  # ModelDeployment or Deployment
    name: str
    container: str | None = None  # a Deployment's serving container

    @property
    def patch_type(self) -> str:
        """kubectl patch's --type for this target's patch."""
        return "merge" if self.kind == "ModelDeployment" else "strategic"


def recommended_resources(recommendation: RecommendationReport) -> dict[str, dict[str, str]]:
    """The requests and limits the recommendation sets, only those it has a figure for (a URL target has none)."""
    resources: dict[str, dict[str, str]] = {}
    for field, values in (
        ("requests", {"cpu": recommendation.cpu_request, "memory": recommendation.memory_request}),
        ("limits", {"cpu": recommendation.cpu_limit, "memory": recommendation.memory_limit}),
    ):
        named = {k: v for k, v in values.items() if v is not None}
        if named:
            resources[field] = named
    return resources


def resources_text(recommendation: RecommendationReport) -> str | None:
    """`requests cpu=... memory=...; limits cpu=... memory=...` with what the recommendation sets; None if nothing."""
    parts = [
        f"{field} " + " ".join(f"{name}={value}" for name, value in values.items())
        for field, values in recommended_resources(recommendation).items()
    ]
    return "; ".join(parts) or None


def spec_patch(recommendation: RecommendationReport) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) of a ModelDeployment that deploys the recommendation."""
    resources: dict[str, Any] = dict(recommended_resources(recommendation))
    if recommendation.gpu is not None:
        resources["gpu"] = {"count": recommendation.gpu}  # the target's resourceName stays
    spec: dict[str, Any] = {}
    if resources:
        spec["resources"] = resources
    if recommendation.replicas is not None:
        spec["replicas"] = recommendation.replicas
    return {"spec": spec}


def patch_text(patch: dict[str, Any]) -> str:
    return json.dumps(patch, separators=(",", ":"), sort_keys=True)


def workload_patch(recommendation: RecommendationReport, container: str) -> dict[str, Any]:
    """The strategic merge patch of a Deployment that deploys the recommendation: its serving container's
    requests and limits (found by name; the others are left alone) and its replicas."""
    resources = spec_patch(recommendation)["spec"].get("resources", {})
    resources.pop("gpu", None)  # the recommendation keeps the GPUs the trials ran with
    spec: dict[str, Any] = {}
    if resources:
        spec["template"] = {"spec": {"containers": [{"name": container, "resources": resources}]}}
    if recommendation.replicas is not None:
        spec["replicas"] = recommendation.replicas
    return {"spec": spec}


def target_of(report: ProfileReport) -> Target:
    """The object the run profiled; raises NoRecommendation when there is nothing to patch."""
    if report.recommendation is None:
        why = report.error or "no trial met the SLO, or none had resource figures"
        raise NoRecommendation(f"ProfileRun {report.name} has no recommendation ({why})")
    kind, _, name = report.target.partition("/")
    if kind not in API_VERSIONS or not name:
        raise NoRecommendation(
            f"ProfileRun {report.name} loaded a URL ({report.target}), not a ModelDeployment or a Deployment: there "
            "is no target to patch; the recommendation is in its report"
        )
    if kind == "Deployment" and not report.target_container:
        raise NoRecommendation(f"the report of ProfileRun {report.name} does not say which container it profiled")
    return Target(kind, name, report.target_container if kind == "Deployment" else None)


def target_patch(report: ProfileReport) -> dict[str, Any]:
    """The patch of the run's target, of the type Target.patch_type names."""
    target = target_of(report)
    assert report.recommendation is not None
    if target.container is not None:
        return workload_patch(report.recommendation, target.container)
    return spec_patch(report.recommendation)


def kustomize_patch(report: ProfileReport) -> str:
    """A patch file for kustomize's `patches:` (it finds the target by kind and name; a Deployment's
    containers merge by name, as kubectl's strategic merge does)."""
    target = target_of(report)
    document = {
        "apiVersion": API_VERSIONS[target.kind],
        "kind": target.kind,
        "metadata": {"name": target.name},
        **target_patch(report),
    }
    return yaml.safe_dump(document, sort_keys=False)


def apply_merge_patch(document: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = apply_merge_patch(merged.get(key), value)
    return merged


def apply_workload_patch(manifest: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A workload_patch applied as a strategic merge applies it: the containers list merges by name."""
    spec = patch["spec"]
    patched = apply_merge_patch(manifest, {"spec": {k: v for k, v in spec.items() if k != "template"}})
    for wanted in spec.get("template", {}).get("spec", {}).get("containers", []):
        containers = ((patched.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        index = next((i for i, c in enumerate(containers) if c.get("name") == wanted["name"]), None)
        if index is None:
            raise NoRecommendation(f"the target manifest has no container {wanted['name']!r}, which the run profiled")
        containers[index] = apply_merge_patch(containers[index], wanted)
    return patched


def patched_manifest(report: ProfileReport, manifest: dict[str, Any]) -> dict[str, Any]:
    """The target's manifest (as Git holds it, or as the cluster has it) with the recommendation applied."""
    target = target_of(report)
    if manifest.get("kind") != target.kind or (manifest.get("metadata") or {}).get("name") != target.name:
        found = f"{manifest.get('kind')}/{(manifest.get('metadata') or {}).get('name')}"
        raise NoRecommendation(f"the target manifest is {found}, but ProfileRun {report.name} profiled {report.target}")
    if target.container is not None:
        return apply_workload_patch(manifest, target_patch(report))
    return apply_merge_patch(manifest, target_patch(report))
