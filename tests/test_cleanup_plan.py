"""What a Cleanup removes, decided without a cluster (kaliper.lifecycle.cleanup)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kaliper.api.cleanup import CleanupSpec, LabelSelector
from kaliper.lifecycle.cleanup import Found, describe_age, next_run, plan_cleanup, selector_matches
from kaliper.lifecycle.gc import orphans

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def run(name: str, phase: str | None, created: str, finished: str | None = None, **meta: object) -> Found:
    body: dict = {
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}", "creationTimestamp": created, **meta},
        "status": {"phase": phase, **({"completionTime": finished} if finished else {})},
    }
    return Found.from_object("ProfileRun", body)


def names(found: list[Found]) -> list[str]:
    return [f.name for f in found]


def spec(**fields: object) -> CleanupSpec:
    return CleanupSpec.model_validate({"kinds": ["ProfileRun"], **fields})


RUNS = [
    run("a", "Succeeded", "2026-11-01T00:00:00Z", "2026-11-01T01:00:00Z"),
    run("b", "Failed", "2026-11-10T00:00:00Z", "2026-11-10T00:30:00Z"),
    run("c", "Succeeded", "2026-11-20T00:00:00Z", "2026-11-22T11:00:00Z"),
    run("d", "Running", "2026-11-02T00:00:00Z"),
]


def test_phases_and_age_since_finishing_select_runs() -> None:
    plan = plan_cleanup(spec(phases=["Succeeded", "Failed"], olderThan="168h"), RUNS, NOW)
    assert names(plan.remove) == ["a", "b"] and plan.matched == 2
    # A run still going has no age since finishing, however old it is.
    assert names(plan_cleanup(spec(olderThan="2h"), RUNS, NOW).remove) == ["a", "b"]


def test_keep_last_keeps_the_newest_of_each_namespace() -> None:
    plan = plan_cleanup(spec(phases=["Succeeded", "Failed"], keepLast=2), RUNS, NOW)
    assert names(plan.remove) == ["a"]
    assert [(f.name, why) for f, why in plan.kept] == [
        ("c", "one of the newest 2 (keepLast)"),
        ("b", "one of the newest 2 (keepLast)"),
    ]


def test_an_object_another_kaliper_object_owns_is_left_with_its_owner() -> None:
    owner = {"apiVersion": "kaliper.dev/v1alpha1", "kind": "ModelOptimization", "name": "opt", "uid": "u"}
    owned = run("follow-up", "Succeeded", "2026-11-01T00:00:00Z", "2026-11-01T00:10:00Z", ownerReferences=[owner])
    plan = plan_cleanup(spec(phases=["Succeeded"]), [*RUNS, owned], NOW)
    assert names(plan.remove) == ["a", "c"]
    assert [(f.name, why) for f, why in plan.kept] == [
        ("follow-up", "owned by ModelOptimization/opt; it goes with its owner")
    ]


def test_what_argo_cd_or_flux_manages_is_kept_unless_the_spec_includes_it() -> None:
    found = [
        run("by-hand", "Failed", "2026-11-01T00:00:00Z", "2026-11-01T00:01:00Z"),
        run("argo", "Failed", "2026-11-01T00:00:00Z", "2026-11-01T00:01:00Z",
            annotations={"argocd.argoproj.io/tracking-id": "perf:kaliper.dev/ProfileRun:ml/argo"}),
        run("argo-label", "Failed", "2026-11-01T00:00:00Z", "2026-11-01T00:01:00Z",
            labels={"argocd.argoproj.io/instance": "perf-legacy"}),
        run("helm", "Failed", "2026-11-01T00:00:00Z", "2026-11-01T00:01:00Z",
            labels={"helm.toolkit.fluxcd.io/name": "gate", "helm.toolkit.fluxcd.io/namespace": "flux-system"}),
    ]  # fmt: skip
    plan = plan_cleanup(spec(phases=["Failed"]), found, NOW)
    assert names(plan.remove) == ["by-hand"]
    assert [(f.name, why) for f, why in plan.kept] == [
        ("helm", "managed by Flux HelmRelease flux-system/gate, which would create it again"),
        ("argo-label", "managed by Argo CD application perf-legacy, which would create it again"),
        ("argo", "managed by Argo CD application perf, which would create it again"),
    ]
    assert names(plan_cleanup(spec(phases=["Failed"], includeGitOpsManaged=True), found, NOW).remove) == [
        "argo", "argo-label", "by-hand", "helm",
    ]  # fmt: skip


def test_kinds_not_named_are_never_removed() -> None:
    deployment = Found.from_object(
        "ModelDeployment",
        {"metadata": {"namespace": "ml", "name": "iris", "creationTimestamp": "2026-01-01T00:00:00Z"}},
    )
    assert names(plan_cleanup(spec(olderThan="2h"), [*RUNS, deployment], NOW).remove) == ["a", "b"]


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"matchLabels": {"team": "ml"}}, {"team": "ml", "x": "y"}, True),
        ({"matchLabels": {"team": "ml"}}, {"team": "web"}, False),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["ci", "dev"]}]}, {"env": "ci"}, True),
        ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["ci"]}]}, {}, False),
        ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {}, True),
        ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {"env": "prod"}, False),
        ({"matchExpressions": [{"key": "keep", "operator": "DoesNotExist"}]}, {"keep": "yes"}, False),
        ({"matchExpressions": [{"key": "keep", "operator": "Exists"}]}, {"keep": ""}, True),
    ],
)
def test_label_selectors_follow_kubernetes_semantics(selector: dict, labels: dict, expected: bool) -> None:
    assert selector_matches(LabelSelector.model_validate(selector), labels) is expected


def test_the_schedule_fires_after_the_given_time_in_utc() -> None:
    assert next_run("0 3 * * *", NOW) == datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
    assert next_run("*/15 * * * *", NOW) == datetime(2026, 11, 22, 12, 15, tzinfo=UTC)
    assert next_run("@hourly", NOW) == datetime(2026, 11, 22, 13, 0, tzinfo=UTC)


def test_ages_read_as_kubectl_shows_them() -> None:
    assert [describe_age(s) for s in (45, 450, 3 * 3600 + 125, 2 * 86400 + 7200, None)] == [
        "45s",
        "7m30s",
        "3h2m",
        "2d2h",
        None,
    ]


def test_a_report_kept_apart_from_its_run_is_a_leftover_only_once_its_time_has_passed() -> None:
    def configmap(name: str, **meta: object) -> tuple[str, dict]:
        return "ConfigMap", {"metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}", **meta}}

    made = [
        configmap("kept-report", annotations={"kaliper.dev/keep-until": "2026-12-22T12:00:00Z"}),
        configmap("old-report", annotations={"kaliper.dev/keep-until": "2026-11-22T11:59:59Z"}),
        configmap("orphaned-result"),
    ]
    assert [(f.name, f.why) for f in orphans(made, set(), NOW)] == [
        (
            "old-report",
            "a run's report kept until 2026-11-22T11:59:59Z (spec.report.keepFor), which has passed",
        ),
        ("orphaned-result", "no Kaliper owner (its owner was deleted with --cascade=orphan)"),
    ]
