"""A run's recommendation as something a pipeline can commit: a JSON merge patch of the target
ModelDeployment (what `kubectl patch --type merge` takes and what the status carries), a kustomize patch file,
or the target's manifest with the patch applied. Pure: the caller reads the report and the target."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from kaliper.report.schema import ProfileReport, RecommendationReport

FORMATS = ("merge-patch", "kustomize", "manifest")


class NoRecommendation(ValueError):
    """The report has nothing to turn into a patch; the message says why."""


def spec_patch(recommendation: RecommendationReport) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) of a ModelDeployment that deploys the recommendation."""
    resources: dict[str, Any] = {}
    for field, values in (
        ("requests", {"cpu": recommendation.cpu_request, "memory": recommendation.memory_request}),
        ("limits", {"cpu": recommendation.cpu_limit, "memory": recommendation.memory_limit}),
    ):
        named = {k: v for k, v in values.items() if v is not None}
        if named:
            resources[field] = named
    if recommendation.gpu is not None:
        resources["gpu"] = {"count": recommendation.gpu}  # the target's resourceName stays
    spec: dict[str, Any] = {}
    if resources:
        spec["resources"] = resources
    if recommendation.replicas is not None:
        spec["replicas"] = recommendation.replicas
    return {"spec": spec}


def merge_patch_text(recommendation: RecommendationReport) -> str:
    return json.dumps(spec_patch(recommendation), separators=(",", ":"), sort_keys=True)


def target_name(report: ProfileReport) -> str:
    """The ModelDeployment the run profiled; raises NoRecommendation when there is nothing to patch."""
    if report.recommendation is None:
        why = report.error or "no trial met the SLO, or none had resource figures"
        raise NoRecommendation(f"ProfileRun {report.name} has no recommendation ({why})")
    kind, _, name = report.target.partition("/")
    if kind != "ModelDeployment" or not name:
        raise NoRecommendation(
            f"ProfileRun {report.name} loaded a URL ({report.target}), not a ModelDeployment: there is no target "
            "to patch; the recommendation is in its report"
        )
    return name


def kustomize_patch(report: ProfileReport) -> str:
    """A patch file for kustomize's `patches:` (it finds the target by kind and name)."""
    assert report.recommendation is not None
    document = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": target_name(report)},
        **spec_patch(report.recommendation),
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


def patched_manifest(report: ProfileReport, manifest: dict[str, Any]) -> dict[str, Any]:
    """The target's manifest (as Git holds it, or as the cluster has it) with the recommendation applied."""
    name = target_name(report)
    if manifest.get("kind") != "ModelDeployment" or (manifest.get("metadata") or {}).get("name") != name:
        found = f"{manifest.get('kind')}/{(manifest.get('metadata') or {}).get('name')}"
        raise NoRecommendation(f"the target manifest is {found}, but ProfileRun {report.name} profiled {report.target}")
    assert report.recommendation is not None
    return apply_merge_patch(manifest, spec_patch(report.recommendation))
