"""What GitOps tools read from the statuses the operator writes on the real API server: kstatus (the library of
Flux's health checks, built from sigs.k8s.io/cli-utils) and the GitOps guide's `kubectl wait` recipes, for the phases
the other operator tests do not reach. Those tests check the rest where their objects already are (a run at work
and succeeded, a failed trial, a ModelDeployment Ready or refused, Cleanups scheduled, done and refused)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.report.schema import ProfileReport, RecommendationReport
from tests.support.cluster_objects import apply, model_deployment, profile_run
from tests.support.controlplane import Kubectl
from tests.support.gitops import ARGOCD_CHECKS, argocd_health, kstatus, kubectl_wait_recipes, run_recipe
from tests.support.operator_runner import running_operator

RECIPES = kubectl_wait_recipes()
FINISHED, SUCCEEDED = RECIPES["profilerun"]
(DEPLOYED,) = RECIPES["modeldeployment"]


@pytest.fixture(scope="module")
def operator(crds: Kubectl) -> Iterator[None]:
    with running_operator(crds):
        yield


@pytest.fixture
def in_process_client(crds: Kubectl, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's API client in this process, on the test control plane."""
    from kaliper.controllers import kube

    monkeypatch.setenv("KUBECONFIG", str(crds.kubeconfig))
    kube.api_client.cache_clear()


def applying_run(
    name: str, target: dict, profiled: str, recommendation: RecommendationReport, container: str | None = None
) -> tuple[ProfileRunSpec, ProfileReport]:
    """A ProfileRun spec with updateMode Apply, and the report of its run of `profiled` that recommends
    `recommendation`."""
    spec = ProfileRunSpec.model_validate(
        {**profile_run(name, None)["spec"], "target": target} | {"recommendation": {"updateMode": "Apply"}}
    )
    report = ProfileReport(
        name=name,
        started_at=datetime(2026, 11, 24, tzinfo=UTC),
        target=profiled,
        target_container=container,
        strategy="grid",
        recommendation=recommendation,
    )
    return spec, report


def test_a_run_waiting_for_its_target_is_in_progress_then_failed_and_the_wait_recipes_say_so(
    operator, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    run = profile_run("orphan", None, target={"deploymentRef": {"name": "not-there"}}, readyTimeout="8s")
    apply(crds, namespace, run)
    crds.wait_for_phase("profilerun", "orphan", namespace, "Pending")
    waiting = "waiting for ModelDeployment not-there (spec.target.deploymentRef)"
    assert kstatus(crds, namespace, "profilerun", "orphan") == ("InProgress", waiting)
    assert argocd_health(crds, namespace, "profilerun", "orphan") == ("Progressing", waiting)
    # The first recipe waits until the run has finished, either way; the second then fails it.
    assert run_recipe(crds, FINISHED, "orphan", namespace) == 0
    assert crds.phase_of("profilerun", "orphan", namespace) == "Failed"
    assert run_recipe(crds, SUCCEEDED, "orphan", namespace) == 1
    missing = "ModelDeployment not-there does not exist; create it or fix spec.target.deploymentRef"
    assert kstatus(crds, namespace, "profilerun", "orphan") == ("Failed", missing)
    assert argocd_health(crds, namespace, "profilerun", "orphan") == ("Degraded", missing)
    status = crds.json("get", "profilerun", "orphan", "-n", namespace)["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {kind: conditions[kind]["status"] for kind in ("Ready", "Reconciling", "Stalled")} == {
        "Ready": "False",
        "Reconciling": "False",
        "Stalled": "True",
    }
    assert conditions["Stalled"]["reason"] == "RunFailed" and conditions["Stalled"]["observedGeneration"] == 1


def test_a_rollout_that_cannot_schedule_is_in_progress_and_one_that_cannot_create_pods_is_stalled(
    operator, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    # One pod in the namespace: the first deployment's pod takes it (and waits for a node with 64 cores, which
    # no kwok node has); the second's ReplicaSet is refused its pod, which its Deployment reports as a
    # ReplicaFailure.
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-pod"}}
    quota["spec"] = {"hard": {"pods": "1"}}
    waiting = model_deployment("waiting", replicas=1)
    waiting["spec"]["resources"] = {"requests": {"cpu": "64"}}
    apply(crds, namespace, quota, waiting)
    crds.wait_for(
        lambda: (
            len(crds.json("get", "pods", "-n", namespace, "-l", "kaliper.dev/modeldeployment=waiting")["items"]) == 1
        ),
        what="the waiting deployment's pod",
    )
    # The operator writes the phase on its next step after the pod appears (read in-process, the pod can be seen
    # within a millisecond of its creation: clean-clone run of 1842ea3).
    crds.wait_for_phase("modeldeployment", "waiting", namespace, "Progressing")
    # The message follows the Deployment's own status: until its controller has seen the generation, the
    # operator says so (seen in a clean-clone run, the phase written a step before the Deployment's status was).
    crds.wait_for(
        lambda: kstatus(crds, namespace, "modeldeployment", "waiting") == ("InProgress", "0/1 replicas ready"),
        what="the waiting deployment's 0/1 replicas ready",
    )
    assert argocd_health(crds, namespace, "modeldeployment", "waiting") == ("Progressing", "0/1 replicas ready")
    assert run_recipe(crds, [*DEPLOYED[:-1], "--timeout=0"], "waiting", namespace) == 1

    apply(crds, namespace, model_deployment("refused", replicas=1))
    crds.wait_for_phase("modeldeployment", "refused", namespace, "Degraded")
    status, message = kstatus(crds, namespace, "modeldeployment", "refused")
    assert status == "Failed"
    assert 'pods "refused-' in message and "exceeded quota: one-pod" in message, message
    assert argocd_health(crds, namespace, "modeldeployment", "refused") == ("Degraded", message)
    conditions = crds.json("get", "modeldeployment", "refused", "-n", namespace)["status"]["conditions"]
    assert {c["type"]: (c["status"], c["reason"]) for c in conditions} == {
        "Ready": ("False", "ReplicasNotReady"),
        "Progressing": ("False", "Settled"),
        "Degraded": ("True", "RolloutStuck"),
        "Reconciling": ("False", "Settled"),
        "Stalled": ("True", "RolloutStuck"),
    }, json.dumps(conditions)


def argocd_tests(kubectl: Kubectl, checks: Path) -> subprocess.CompletedProcess:
    program = Path(kubectl.binary).parent / "argocd-health"
    return subprocess.run([str(program), "test", str(checks)], capture_output=True, text=True, timeout=60)


def test_argo_cds_lua_runtime_passes_every_case_of_the_shipped_health_tests(crds: Kubectl, tmp_path: Path) -> None:
    ran = argocd_tests(crds, ARGOCD_CHECKS)
    assert (ran.returncode, ran.stdout.splitlines()[-1]) == (0, "18 passed, 0 failed"), ran.stdout + ran.stderr
    # The harness fails a case whose expectation the script does not meet.
    shutil.copytree(ARGOCD_CHECKS, tmp_path / "checks")
    cases = tmp_path / "checks" / "kaliper.dev" / "ProfileRun" / "health_test.yaml"
    cases.write_text(cases.read_text().replace("status: Healthy", "status: Degraded"))
    ran = argocd_tests(crds, tmp_path / "checks")
    assert ran.returncode == 1 and ran.stdout.splitlines()[-1] == "17 passed, 1 failed", ran.stdout


def test_the_argocd_cm_patch_installs_a_health_check_per_kind(crds: Kubectl, namespace: str) -> None:
    # As the GitOps guide says to apply it, to an argocd-cm as Argo CD's install makes it (here in a test namespace).
    crds("create", "configmap", "argocd-cm", "-n", namespace, "--from-literal=url=https://argocd.example.com")
    patch = ARGOCD_CHECKS.parent / "argocd-cm.yaml"
    crds("patch", "configmap", "argocd-cm", "-n", namespace, "--type", "merge", "--patch-file", str(patch))
    data = crds.json("get", "configmap", "argocd-cm", "-n", namespace)["data"]
    assert sorted(data) == [
        "resource.customizations.health.kaliper.dev_Cleanup",
        "resource.customizations.health.kaliper.dev_ModelDeployment",
        "resource.customizations.health.kaliper.dev_ModelOptimization",
        "resource.customizations.health.kaliper.dev_ProfileRun",
        "url",
    ]
    script = (ARGOCD_CHECKS / "kaliper.dev" / "ProfileRun" / "health.lua").read_text()
    assert data["resource.customizations.health.kaliper.dev_ProfileRun"] == script


def test_a_recommendation_is_not_applied_to_a_target_argo_cd_manages_unless_forced(
    in_process_client: None, crds: Kubectl, namespace: str
) -> None:
    from kaliper.controllers.recommendation import apply_recommendation

    target = model_deployment("synced", replicas=2)
    target["metadata"]["annotations"] = {"argocd.argoproj.io/tracking-id": "perf:kaliper.dev/ModelDeployment:ml/synced"}
    apply(crds, namespace, target)
    spec, report = applying_run(
        "gate",
        {"deploymentRef": {"name": "synced"}},
        "ModelDeployment/synced",
        RecommendationReport(cpu_request="250m", replicas=1, rationale="p90"),
    )
    events: list[tuple[str, str, bool]] = []
    apply_recommendation(spec, namespace, report, lambda *event: events.append(event))
    assert events == [
        (
            "RecommendationNotApplied",
            "Argo CD application perf manages ModelDeployment synced and would undo the patch at its next sync: "
            f"commit it to Git (`kaliper recommend gate -n {namespace}`), or set "
            "spec.recommendation.applyToGitOpsManaged",
            True,
        )
    ]
    assert crds.json("get", "modeldeployment", "synced", "-n", namespace)["spec"]["replicas"] == 2

    forced = spec.model_copy(deep=True)
    forced.recommendation.apply_to_git_ops_managed = True
    apply_recommendation(forced, namespace, report, lambda *event: events.append(event))
    assert events[1:] == [
        (
            "RecommendationApplied",
            'ModelDeployment synced patched with {"spec":{"replicas":1,"resources":{"requests":{"cpu":"250m"}}}}',
            False,
        )
    ]
    patched = crds.json("get", "modeldeployment", "synced", "-n", namespace)["spec"]
    assert (patched["replicas"], patched["resources"]) == (1, {"requests": {"cpu": "250m"}})


def test_a_recommendation_applied_to_a_deployment_merges_its_serving_container_by_name(
    in_process_client: None, crds: Kubectl, namespace: str
) -> None:
    from kaliper.controllers.recommendation import apply_recommendation

    containers = [
        {"name": "proxy", "image": "envoy:1", "resources": {"limits": {"cpu": "100m"}}},
        {"name": "model", "image": "scorer:2", "resources": {"requests": {"cpu": "2", "ephemeral-storage": "1Gi"}}},
    ]
    apply(
        crds,
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "scorer"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "scorer"}},
                "template": {"metadata": {"labels": {"app": "scorer"}}, "spec": {"containers": containers}},
            },
        },
    )
    spec, report = applying_run(
        "sizing",
        {"workloadRef": {"name": "scorer", "container": "model"}},
        "Deployment/scorer",
        RecommendationReport(cpu_request="250m", memory_request="300Mi", replicas=2, rationale="p90"),
        container="model",
    )
    events: list[tuple[str, str, bool]] = []
    apply_recommendation(spec, namespace, report, lambda *event: events.append(event))
    assert events == [
        (
            "RecommendationApplied",
            'Deployment scorer patched with {"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"model",'
            '"resources":{"requests":{"cpu":"250m","memory":"300Mi"}}}]}}}}',
            False,
        )
    ]
    patched = crds.json("get", "deployment", "scorer", "-n", namespace)["spec"]
    proxy, model = patched["template"]["spec"]["containers"]
    assert patched["replicas"] == 2
    assert (proxy["name"], proxy["resources"]) == ("proxy", {"limits": {"cpu": "100m"}})
    assert (model["name"], model["resources"]) == (
        "model",
        {"requests": {"cpu": "250m", "ephemeral-storage": "1Gi", "memory": "300Mi"}},
    )
