"""spec.recommendation.updateMode Apply: a succeeded run's recommendation patched into the ModelDeployment it
profiled, with an Event either way. A target that Argo CD or Flux manages is left alone unless the spec says
otherwise: the tool would undo the patch at its next sync; the patch belongs in Git (`kaliper recommend`)."""

from __future__ import annotations

from collections.abc import Callable

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.controllers import kube
from kaliper.lifecycle.gitops import gitops_manager
from kaliper.report.recommend import merge_patch_text, spec_patch
from kaliper.report.schema import ProfileReport

Event = Callable[[str, str, bool], None]  # reason, message, warning


def apply_recommendation(spec: ProfileRunSpec, namespace: str, report: ProfileReport, event: Event) -> None:
    reference = spec.target.deployment_ref
    recommendation = report.recommendation
    if spec.recommendation.update_mode != "Apply" or reference is None or recommendation is None:
        return
    target = kube.get("ModelDeployment", namespace, reference.name)
    if target is None:
        event("RecommendationNotApplied", f"ModelDeployment {reference.name} no longer exists", True)
        return
    manager = gitops_manager(target["metadata"])
    if manager is not None and not spec.recommendation.apply_to_git_ops_managed:
        event(
            "RecommendationNotApplied",
            f"{manager} manages ModelDeployment {reference.name} and would undo the patch at its next sync: commit "
            f"it to Git (`kaliper recommend {report.name} -n {namespace}`), or set "
            "spec.recommendation.applyToGitOpsManaged",
            True,
        )
        return
    kube.merge_patch("ModelDeployment", namespace, reference.name, spec_patch(recommendation))
    event(
        "RecommendationApplied",
        f"ModelDeployment {reference.name} patched with {merge_patch_text(recommendation)}",
        False,
    )
