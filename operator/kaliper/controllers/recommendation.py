"""spec.recommendation.updateMode Apply: a succeeded run's recommendation patched into the ModelDeployment or
Deployment it profiled (report.recommend says how), with an Event either way. A target that Argo CD or Flux
manages is left alone unless the spec says otherwise: the tool would undo the patch at its next sync; the
patch belongs in Git (`kaliper recommend`)."""

from __future__ import annotations

from collections.abc import Callable

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.controllers import kube
from kaliper.lifecycle.gitops import gitops_manager
from kaliper.report.recommend import NoRecommendation, patch_text, target_of, target_patch
from kaliper.report.schema import ProfileReport

Event = Callable[[str, str, bool], None]  # reason, message, warning


def apply_recommendation(spec: ProfileRunSpec, namespace: str, report: ProfileReport, event: Event) -> None:
    if spec.recommendation.update_mode != "Apply" or report.recommendation is None:
        return
    try:
        target = target_of(report)
    except NoRecommendation:  # a URL target: nothing to patch
        return
    found = kube.get(target.kind, namespace, target.name)
    if found is None:
        event("RecommendationNotApplied", f"{target.kind} {target.name} no longer exists", True)
        return
    manager = gitops_manager(found["metadata"])
    if manager is not None and not spec.recommendation.apply_to_git_ops_managed:
        event(
            "RecommendationNotApplied",
            f"{manager} manages {target.kind} {target.name} and would undo the patch at its next sync: commit "
            f"it to Git (`kaliper recommend {report.name} -n {namespace}`), or set "
            "spec.recommendation.applyToGitOpsManaged",
            True,
        )
        return
    patch = target_patch(report)
    if target.patch_type == "strategic":
        kube.strategic_merge_patch(target.kind, namespace, target.name, patch)
    else:
        kube.merge_patch(target.kind, namespace, target.name, patch)
    event("RecommendationApplied", f"{target.kind} {target.name} patched with {patch_text(patch)}", False)
