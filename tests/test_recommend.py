"""A run's recommendation as a change a pipeline can commit: a merge patch, a kustomize patch, the manifest."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kaliper.report.profile_answer import answer_rows
from kaliper.report.profile_text import summary_lines
from kaliper.report.recommend import (
    NoRecommendation,
    apply_merge_patch,
    kustomize_patch,
    patch_text,
    patched_manifest,
    spec_patch,
    target_of,
    target_patch,
)
from kaliper.report.schema import ProfileReport, RecommendationReport

RECOMMENDED = RecommendationReport(
    cpu_request="288m", memory_request="173Mi", cpu_limit="500m", memory_limit="207Mi", replicas=2, gpu=1,
    based_on_trial=0, rationale="p90 CPU + 15%",
)  # fmt: skip


def report(
    target: str = "ModelDeployment/iris",
    recommendation: RecommendationReport | None = RECOMMENDED,
    container: str | None = None,
) -> ProfileReport:
    return ProfileReport(
        name="sweep",
        namespace="ml",
        started_at=datetime(2026, 11, 24, tzinfo=UTC),
        target=target,
        target_container=container,
        strategy="grid",
        recommendation=recommendation,
        verdict="Met",
    )


def test_the_merge_patch_sets_requests_limits_gpus_and_replicas() -> None:
    assert patch_text(spec_patch(RECOMMENDED)) == (
        '{"spec":{"replicas":2,"resources":{"gpu":{"count":1},"limits":{"cpu":"500m","memory":"207Mi"},'
        '"requests":{"cpu":"288m","memory":"173Mi"}}}}'
    )
    only_cpu = RecommendationReport(cpu_request="1", rationale="cpu only")
    assert patch_text(spec_patch(only_cpu)) == '{"spec":{"resources":{"requests":{"cpu":"1"}}}}'


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
        target_of(report(target="http://scorer:8080/"))
    with pytest.raises(NoRecommendation, match="has no recommendation"):
        target_of(report(recommendation=None))
    with pytest.raises(NoRecommendation, match="does not say which container it profiled"):
        target_of(report(target="Deployment/scorer"))


# A workloadRef target: a Deployment whose serving container is "model", beside a sidecar.
SCORER = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "scorer", "labels": {"app": "scorer"}},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "scorer"}},
        "template": {
            "metadata": {"labels": {"app": "scorer"}},
            "spec": {
                "containers": [
                    {"name": "proxy", "image": "envoy", "resources": {"limits": {"cpu": "100m"}}},
                    {
                        "name": "model",
                        "image": "registry.example.com/scorer:2",
                        "resources": {
                            "requests": {"cpu": "2", "ephemeral-storage": "1Gi"},
                            "limits": {"nvidia.com/gpu": "1"},
                        },
                    },
                ]
            },
        },
    },
}


def test_a_deployment_gets_a_strategic_merge_patch_of_its_serving_container() -> None:
    scorer = report("Deployment/scorer", container="model")
    assert target_of(scorer).patch_type == "strategic"
    assert patch_text(target_patch(scorer)) == (
        '{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"model","resources":{"limits":'
        '{"cpu":"500m","memory":"207Mi"},"requests":{"cpu":"288m","memory":"173Mi"}}}]}}}}'
    )
    assert kustomize_patch(scorer).startswith("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: scorer\n")


def test_a_patched_deployment_keeps_its_other_containers_and_resources() -> None:
    patched = patched_manifest(report("Deployment/scorer", container="model"), SCORER)
    proxy, model = patched["spec"]["template"]["spec"]["containers"]
    assert patched["spec"]["replicas"] == 2
    assert proxy == {"name": "proxy", "image": "envoy", "resources": {"limits": {"cpu": "100m"}}}
    assert model["resources"] == {
        "requests": {"cpu": "288m", "ephemeral-storage": "1Gi", "memory": "173Mi"},
        "limits": {"nvidia.com/gpu": "1", "cpu": "500m", "memory": "207Mi"},
    }
    assert SCORER["spec"]["replicas"] == 3  # the input is left as it was
    with pytest.raises(NoRecommendation, match="the target manifest has no container 'server'"):
        patched_manifest(report("Deployment/scorer", container="server"), SCORER)


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


def test_the_status_carries_the_patch_of_the_targets_kind() -> None:
    from kaliper.report.status import status_from_report

    model = status_from_report(report(), None).recommendation
    assert model is not None and model.strategic_merge_patch is None
    assert model.merge_patch == (
        '{"spec":{"replicas":2,"resources":{"gpu":{"count":1},"limits":{"cpu":"500m","memory":"207Mi"},'
        '"requests":{"cpu":"288m","memory":"173Mi"}}}}'
    )
    workload = status_from_report(report("Deployment/scorer", container="model"), None).recommendation
    assert workload is not None and workload.merge_patch is None
    assert workload.strategic_merge_patch == (
        '{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"model","resources":{"limits":'
        '{"cpu":"500m","memory":"207Mi"},"requests":{"cpu":"288m","memory":"173Mi"}}}]}}}}'
    )
    url = status_from_report(report("http://scorer:8080/"), None).recommendation
    assert url is not None and (url.merge_patch, url.strategic_merge_patch) == (None, None)


def test_the_summary_names_only_the_resources_the_recommendation_sets() -> None:
    """A URL target has no CPU or memory figures: its recommendation is replicas alone, never `cpu=None`."""
    replicas_only = RecommendationReport(replicas=1, rationale="no resource figures were available")
    assert [line for line in summary_lines(report(recommendation=replicas_only)) if "recommendation" in line] == [
        "recommendation: replicas=1"
    ]
    assert "resources per replica" not in dict(answer_rows(report(recommendation=replicas_only)))
    assert [line for line in summary_lines(report()) if "recommendation" in line] == [
        "recommendation: requests cpu=288m memory=173Mi; limits cpu=500m memory=207Mi; replicas=2"
    ]
    assert dict(answer_rows(report()))["resources per replica"] == (
        "requests cpu=288m memory=173Mi; limits cpu=500m memory=207Mi"
    )
