"""A run's recommendation as a change a pipeline can commit: a merge patch, a kustomize patch, the manifest."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kaliper.report.recommend import (
    NoRecommendation,
    apply_merge_patch,
    kustomize_patch,
    merge_patch_text,
    patched_manifest,
    target_name,
)
from kaliper.report.schema import ProfileReport, RecommendationReport

RECOMMENDED = RecommendationReport(
    cpu_request="288m", memory_request="173Mi", cpu_limit="500m", memory_limit="207Mi", replicas=2, gpu=1,
    based_on_trial=0, rationale="p90 CPU + 15%",
)  # fmt: skip


def report(target: str = "ModelDeployment/iris", recommendation: RecommendationReport | None = RECOMMENDED):
    return ProfileReport(
        name="sweep",
        namespace="ml",
        started_at=datetime(2026, 11, 24, tzinfo=UTC),
        target=target,
        strategy="grid",
        recommendation=recommendation,
        verdict="Met",
    )


def test_the_merge_patch_sets_requests_limits_gpus_and_replicas() -> None:
    assert merge_patch_text(RECOMMENDED) == (
        '{"spec":{"replicas":2,"resources":{"gpu":{"count":1},"limits":{"cpu":"500m","memory":"207Mi"},'
        '"requests":{"cpu":"288m","memory":"173Mi"}}}}'
    )
    only_cpu = RecommendationReport(cpu_request="1", rationale="cpu only")
    assert merge_patch_text(only_cpu) == '{"spec":{"resources":{"requests":{"cpu":"1"}}}}'


def test_a_kustomize_patch_names_its_target() -> None:
    assert kustomize_patch(report()) == (
        "apiVersion: kaliper.dev/v1alpha1\n"
        "kind: ModelDeployment\n"
        "metadata:\n"
        "  name: iris\n"
        "spec:\n"
        "  resources:\n"
        "    requests:\n"
        "      cpu: 288m\n"
        "      memory: 173Mi\n"
        "    limits:\n"
        "      cpu: 500m\n"
        "      memory: 207Mi\n"
        "    gpu:\n"
        "      count: 1\n"
        "  replicas: 2\n"
    )


def test_the_manifest_keeps_what_the_recommendation_does_not_set() -> None:
    manifest = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "iris", "labels": {"team": "ml"}},
        "spec": {
            "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}},
            "replicas": 4,
            "resources": {"requests": {"cpu": "2"}, "gpu": {"count": 2, "resourceName": "nvidia.com/mig-1g.5gb"}},
        },
    }
    assert patched_manifest(report(), manifest)["spec"] == {
        "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}},
        "replicas": 2,
        "resources": {
            "requests": {"cpu": "288m", "memory": "173Mi"},
            "gpu": {"count": 1, "resourceName": "nvidia.com/mig-1g.5gb"},
            "limits": {"cpu": "500m", "memory": "207Mi"},
        },
    }
    assert manifest["spec"]["replicas"] == 4  # the input is left as it was
    with pytest.raises(NoRecommendation, match="the target manifest is ModelDeployment/other, but ProfileRun sweep"):
        patched_manifest(report(), {**manifest, "metadata": {"name": "other"}})


def test_nothing_to_patch_is_said_plainly() -> None:
    with pytest.raises(NoRecommendation, match=r"loaded a URL \(http://scorer:8080/\), not a ModelDeployment"):
        target_name(report(target="http://scorer:8080/"))
    with pytest.raises(NoRecommendation, match="has no recommendation"):
        target_name(report(recommendation=None))


def test_merge_patches_follow_rfc_7386() -> None:
    # The RFC's own example (appendix A): null removes, objects merge, arrays and scalars replace.
    original = {"title": "Goodbye!", "author": {"givenName": "John", "familyName": "Doe"}, "tags": ["example"]}
    patch = {"title": "Hello!", "phoneNumber": "+01-123-456-7890", "author": {"familyName": None}, "tags": []}
    assert apply_merge_patch(original, patch) == {
        "title": "Hello!",
        "author": {"givenName": "John"},
        "tags": [],
        "phoneNumber": "+01-123-456-7890",
    }
