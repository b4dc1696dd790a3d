"""Cleanups driven by the operator on the real API server. The runs they remove are real ProfileRuns that
the operator failed (their target never appears within readyTimeout); beside them stand objects a broad
selector also matches, which must survive."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from kaliper.controllers import metrics
from tests.support.cluster_objects import profile_run
from tests.support.controlplane import Kubectl
from tests.support.gitops import argocd_health, kstatus, kubectl_wait_recipes, run_recipe
from tests.support.operator_runner import Cluster, running_operator

OPERATOR_NAMESPACE = "kaliper-system"  # KALIPER_NAMESPACE in tests/conftest.py


@pytest.fixture(scope="module")
def operator(crds: Kubectl) -> Iterator[None]:
    with running_operator(crds):
        yield


def apply(kubectl: Kubectl, namespace: str, *objects: dict) -> None:
    kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )


def failed_run(
    kubectl: Kubectl, namespace: str, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> None:
    """A ProfileRun the operator fails: its target does not exist, and readyTimeout is 1 s."""
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {
            "target": {"deploymentRef": {"name": "missing"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            "readyTimeout": "1s",
        },
    }
    apply(kubectl, namespace, run)
    kubectl.wait_for(lambda: phase(kubectl, namespace, "profilerun", name) == "Failed", what=f"{name} to fail")


def phase(kubectl: Kubectl, namespace: str, kind: str, name: str) -> str | None:
    found = kubectl("get", kind, name, "-n", namespace, "-o", "jsonpath={.status.phase}", check=False)
    return found.stdout or None if found.returncode == 0 else "Gone"


def cleanup(name: str, **spec: object) -> dict:
    return {"apiVersion": "kaliper.dev/v1alpha1", "kind": "Cleanup", "metadata": {"name": name}, "spec": spec}


def status_of(kubectl: Kubectl, namespace: str, name: str) -> dict:
    return kubectl.json("get", "cleanup", name, "-n", namespace).get("status") or {}


def exists(kubectl: Kubectl, namespace: str, kind: str, name: str) -> bool:
    return kubectl("get", kind, name, "-n", namespace, check=False).returncode == 0


def test_a_broad_selector_removes_only_the_runs_it_names_and_a_dry_run_removes_nothing(
    operator, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    team = {"team": "ml"}
    for name in ("run-a", "run-b", "run-c"):
        failed_run(crds, namespace, name, team)
    # Objects the same selector matches, of kinds the Cleanup does not name (or names, but does not own).
    apply(
        crds,
        namespace,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "labels": team}, "data": {"a": "b"}},
        {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": team},
            "spec": {
                "replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "web", "image": "web:1"}]}},
            },
        },
        {
            "apiVersion": "kaliper.dev/v1alpha1", "kind": "ModelDeployment",
            "metadata": {"name": "iris", "labels": team},
            "spec": {"model": {"configMap": {"name": "iris-model", "key": "model.onnx"}}, "replicas": 0},
        },
    )  # fmt: skip

    passes_before = metrics.FINISHED.labels("Cleanup", "Succeeded")._value.get()
    apply(crds, namespace, cleanup("look", kinds=["ProfileRun"], selector={"matchLabels": team}, dryRun=True))
    crds.wait_for(lambda: status_of(crds, namespace, "look").get("phase") == "Succeeded", what="the dry run")
    status = status_of(crds, namespace, "look")
    assert status["matched"] == 3 and status["removedCount"] == 0
    assert [r["name"] for r in status["removed"]] == ["run-a", "run-b", "run-c"]
    assert status["message"] == "would remove 3 of 3 matching objects"
    # The operator's own metrics (this process's registry, which it serves): a pass done, its steps timed.
    assert metrics.FINISHED.labels("Cleanup", "Succeeded")._value.get() == passes_before + 1
    assert metrics.RECONCILE_SECONDS.labels("Cleanup")._sum.get() > 0
    assert kstatus(crds, namespace, "cleanup", "look") == ("Current", "Resource is Ready")
    (done,) = kubectl_wait_recipes()["cleanup"]
    assert run_recipe(crds, done, "look", namespace) == 0
    assert argocd_health(crds, namespace, "cleanup", "look") == ("Healthy", "would remove 3 of 3 matching objects")
    assert all(exists(crds, namespace, "profilerun", n) for n in ("run-a", "run-b", "run-c"))

    apply(crds, namespace, cleanup("sweep", kinds=["ProfileRun"], selector={"matchLabels": team}, keepLast=1))
    crds.wait_for(lambda: status_of(crds, namespace, "sweep").get("phase") == "Succeeded", what="the cleanup")
    status = status_of(crds, namespace, "sweep")
    # The three runs were created in the same second or not; the newest (by time, then name) is run-c.
    assert status["matched"] == 3 and status["removedCount"] == 2
    assert [(r["kind"], r["name"], r["phase"]) for r in status["removed"]] == [
        ("ProfileRun", "run-a", "Failed"),
        ("ProfileRun", "run-b", "Failed"),
    ]
    assert status["message"] == "removed 2 of 3 matching objects (1 kept by keepLast)"
    crds.wait_for(
        lambda: (
            not exists(crds, namespace, "profilerun", "run-a") and not exists(crds, namespace, "profilerun", "run-b")
        ),
        what="the removed runs to go",
    )
    assert exists(crds, namespace, "profilerun", "run-c")
    assert exists(crds, namespace, "configmap", "settings") and exists(crds, namespace, "deployment", "web")
    assert exists(crds, namespace, "modeldeployment", "iris")
    reasons = [e["reason"] for e in crds.json("get", "events", "-n", namespace, "--field-selector",
                                               "involvedObject.name=sweep")["items"]]  # fmt: skip
    assert reasons == ["Removed"]


def test_a_cleanup_reaches_other_namespaces_only_from_the_operators_namespace(
    operator, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    failed_run(crds, namespace, "old", {})
    apply(crds, namespace, cleanup("elsewhere", kinds=["ProfileRun"], phases=["Failed"], allNamespaces=True))
    crds.wait_for(lambda: status_of(crds, namespace, "elsewhere").get("phase") == "Failed", what="the refusal")
    assert status_of(crds, namespace, "elsewhere")["message"] == (
        f"a Cleanup in namespace {namespace} may only remove objects there, not in every namespace: create it in "
        f"the operator's namespace ({OPERATOR_NAMESPACE}), or drop spec.namespaces / spec.allNamespaces"
    )
    assert exists(crds, namespace, "profilerun", "old")
    gitops, message = kstatus(crds, namespace, "cleanup", "elsewhere")
    assert gitops == "Failed" and message.startswith(f"a Cleanup in namespace {namespace} may only remove objects")
    assert argocd_health(crds, namespace, "cleanup", "elsewhere") == ("Degraded", message)

    if not exists(crds, "default", "namespace", OPERATOR_NAMESPACE):
        crds("create", "namespace", OPERATOR_NAMESPACE, check=False)
    name = f"for-{namespace}"[:63]
    apply(crds, OPERATOR_NAMESPACE, cleanup(name, kinds=["ProfileRun"], phases=["Failed"], namespaces=[namespace]))
    try:
        crds.wait_for(lambda: status_of(crds, OPERATOR_NAMESPACE, name).get("phase") == "Succeeded", what="cleanup")
        status = status_of(crds, OPERATOR_NAMESPACE, name)
        assert [(r["namespace"], r["name"]) for r in status["removed"]] == [(namespace, "old")]
        crds.wait_for(lambda: not exists(crds, namespace, "profilerun", "old"), what="the run to go")
    finally:
        crds("delete", "cleanup", name, "-n", OPERATOR_NAMESPACE, check=False)


def test_a_scheduled_cleanup_says_when_it_runs_next_and_runs_then(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    failed_run(crds, namespace, "stale", {})
    apply(crds, namespace, cleanup("minutely", kinds=["ProfileRun"], phases=["Failed"], schedule="* * * * *"))
    crds.wait_for(lambda: status_of(crds, namespace, "minutely").get("nextRunTime"), what="the next run time")
    status = status_of(crds, namespace, "minutely")
    first = datetime.fromisoformat(status["nextRunTime"].replace("Z", "+00:00"))
    assert status["phase"] == "Scheduled" and first.second == 0 and "lastRunTime" not in status
    # Waiting for its next pass is what a scheduled Cleanup is for: Ready, with when.
    assert kstatus(crds, namespace, "cleanup", "minutely") == ("Current", "Resource is Ready")
    next_pass = f"next pass at {status['nextRunTime']}"
    assert argocd_health(crds, namespace, "cleanup", "minutely") == ("Healthy", next_pass)
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True",
        "Scheduled",
        f"next pass at {status['nextRunTime']}",
    )
    assert exists(crds, namespace, "profilerun", "stale")  # nothing runs before the schedule says
    crds.wait_for(lambda: status_of(crds, namespace, "minutely").get("lastRunTime"), timeout=90, what="the pass")
    status = status_of(crds, namespace, "minutely")
    assert datetime.fromisoformat(status["lastRunTime"].replace("Z", "+00:00")) >= first
    assert datetime.fromisoformat(status["nextRunTime"].replace("Z", "+00:00")) == first + timedelta(minutes=1)
    assert status["phase"] == "Scheduled" and status["removedCount"] == 1
    crds.wait_for(lambda: not exists(crds, namespace, "profilerun", "stale"), what="the run to go")


ARGO_CD = {"argocd.argoproj.io/tracking-id": "perf:kaliper.dev/ProfileRun:ml/gated"}  # annotation tracking
FLUX = {"kustomize.toolkit.fluxcd.io/name": "perf-gate", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}


def test_a_cleanup_leaves_what_argo_cd_or_flux_manages_unless_told(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    # Argo CD (auto-sync) or Flux would create them again, and a ProfileRun created again runs again.
    failed_run(crds, namespace, "by-hand", {"team": "ops"})
    failed_run(crds, namespace, "from-argo", {"team": "ops"}, ARGO_CD)
    failed_run(crds, namespace, "from-flux", {"team": "ops", **FLUX})
    apply(crds, namespace, cleanup("tidy", kinds=["ProfileRun"], selector={"matchLabels": {"team": "ops"}}))
    crds.wait_for(lambda: status_of(crds, namespace, "tidy").get("phase") == "Succeeded", what="the cleanup")
    status = status_of(crds, namespace, "tidy")
    assert [r["name"] for r in status["removed"]] == ["by-hand"]
    assert status["message"] == (
        "removed 1 of 3 matching objects (2 managed by Argo CD or Flux (spec.includeGitOpsManaged))"
    )
    crds.wait_for(lambda: not exists(crds, namespace, "profilerun", "by-hand"), what="by-hand to go")
    assert exists(crds, namespace, "profilerun", "from-argo") and exists(crds, namespace, "profilerun", "from-flux")

    apply(crds, namespace, cleanup("all-of-it", kinds=["ProfileRun"], phases=["Failed"], includeGitOpsManaged=True))
    crds.wait_for(lambda: status_of(crds, namespace, "all-of-it").get("phase") == "Succeeded", what="the cleanup")
    assert [r["name"] for r in status_of(crds, namespace, "all-of-it")["removed"]] == ["from-argo", "from-flux"]


def test_finished_runs_go_when_their_ttl_has_passed(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "short-lived"},
        "spec": {
            "target": {"deploymentRef": {"name": "missing"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            "readyTimeout": "1s",
            "ttl": {"afterFailure": "2s"},
        },
    }
    optimization = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": "done"},
        "spec": {
            "model": {"source": {"configMap": {"name": "m", "key": "model.onnx"}}, "framework": "onnx"},
            "passes": {"graphOptimization": {"level": "all"}},
            "ttl": {"afterFailure": "1s"},
        },
    }
    failed_before = metrics.FINISHED.labels("ModelOptimization", "Failed")._value.get()
    # Without output.pvc the operator fails the optimization at once (InvalidSpec): a finished run with a ttl.
    # The same run applied by Flux stays: Flux would apply it again, and the load test would run again.
    gated = {**run, "metadata": {"name": "flux-gate", "labels": FLUX}}
    apply(crds, namespace, run, optimization, gated)
    kept = "keeper"
    apply(crds, namespace, {**optimization, "metadata": {"name": kept}, "spec": {**optimization["spec"], "ttl": None}})
    # The operator checks finished runs' ttls every 30 s (every 2 s here: KALIPER_EXPIRY_INTERVAL).
    crds.wait_for(
        lambda: (
            phase(crds, namespace, "profilerun", "short-lived") == "Gone"
            and phase(crds, namespace, "modeloptimization", "done") == "Gone"
        ),
        timeout=75,
        what="the runs to expire",
    )
    assert phase(crds, namespace, "modeloptimization", kept) == "Failed"
    assert metrics.FINISHED.labels("ModelOptimization", "Failed")._value.get() == failed_before + 2
    assert metrics.RECONCILES.labels("ModelOptimization")._value.get() >= 2

    def retained() -> dict | None:
        conditions = crds.json("get", "profilerun", "flux-gate", "-n", namespace)["status"]["conditions"]
        return next((c for c in conditions if c["type"] == "Retained"), None)

    crds.wait_for(lambda: retained() is not None, timeout=45, what="flux-gate's Retained condition")
    condition = retained()
    assert condition is not None and (condition["status"], condition["reason"]) == ("True", "ManagedByGitOps")
    assert condition["message"].endswith(
        "its ttl (2s) has passed, but Flux Kustomization flux-system/perf-gate manages it and would create it "
        "again (and run it again): kept; set spec.ttl.deleteGitOpsManaged to delete it anyway"
    )
    assert phase(crds, namespace, "profilerun", "flux-gate") == "Failed"


def test_runs_failed_at_each_stage_leave_nothing_behind_after_a_cleanup(
    operator, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    target = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "iris"},
        "spec": {"model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"}},
    }
    unready = profile_run("unready", None, sweep={"cpu": ["5000"]}, readyTimeout="3s")  # no node has 5000 cores
    apply(crds, namespace, target, unready, profile_run("jobfail", None), profile_run("deleted", None))
    for name in ("jobfail", "deleted"):
        Cluster(crds, namespace, name).wait_pods(0, "loadgen")
    failing = Cluster(crds, namespace, "jobfail")
    failing.end_pods(0, "loadgen", exit_code=2, message="cannot reach the target")
    crds("delete", "profilerun", "deleted", "-n", namespace, "--wait=false")  # mid-trial
    assert Cluster(crds, namespace, "unready").wait_phase("Failed")["trials"][0]["failedIn"] == "Deploying"
    assert failing.wait_phase("Failed")["trials"][0]["failedIn"] == "Running"
    run_objects = "modeldeployments,deployments,services,jobs,pods,configmaps,serviceaccounts,roles,rolebindings"
    assert crds.json("get", run_objects, "-n", namespace, "-l", "kaliper.dev/profilerun")["items"] != []

    apply(crds, namespace, cleanup("failed-runs", kinds=["ProfileRun"], phases=["Failed"]))
    crds.wait_for(lambda: status_of(crds, namespace, "failed-runs").get("phase") == "Succeeded", what="the cleanup")
    assert [r["name"] for r in status_of(crds, namespace, "failed-runs")["removed"]] == ["jobfail", "unready"]

    def left() -> list[str]:
        found = crds.json("get", run_objects, "-n", namespace, "-l", "app.kubernetes.io/managed-by=kaliper")["items"]
        found += crds.json("get", run_objects, "-n", namespace, "-l", "kaliper.dev/profilerun")["items"]
        # The target's own Deployment and Service belong to it, not to a run.
        return sorted({f"{o['kind']}/{o['metadata']['name']}" for o in found} - {"Deployment/iris", "Service/iris"})

    crds.wait_for(lambda: left() == [], timeout=90, what="every object of the runs to go")
    assert crds.json("get", "profileruns", "-n", namespace)["items"] == []
