"""`kaliper gc` against the real API server: objects Kaliper made whose owner was deleted with
--cascade=orphan, and a finished run past its ttl while no operator runs, are listed, then removed; nothing
else is."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta

from tests.support.controlplane import Kubectl
from tests.support.operator_runner import running_operator
from tests.support.paths import KALIPER


def gc(kubectl: Kubectl, namespace: str, *flags: str) -> dict:
    done = subprocess.run(
        [str(KALIPER), "gc", "--json", "--cluster", "-n", namespace, "--reports", "/nonexistent", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": str(kubectl.kubeconfig)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def model_deployment(name: str) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {"model": {"configMap": {"name": "iris-model", "key": "model.onnx"}}},
    }


def test_gc_finds_orphans_and_expired_runs_and_removes_only_them(crds: Kubectl, namespace: str) -> None:
    apply = lambda obj: crds("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))  # noqa: E731
    with running_operator(crds):
        apply(model_deployment("orphaned"))
        apply(model_deployment("kept"))
        for name in ("orphaned", "kept"):
            crds.wait_for(
                lambda name=name: crds("get", "service", name, "-n", namespace, check=False).returncode == 0,
                what=f"the Service of {name}",
            )
    # No operator from here on: its owner deleted with --cascade=orphan, the Deployment and Service stay.
    crds("delete", "modeldeployment", "orphaned", "-n", namespace, "--cascade=orphan")
    crds.wait_for(
        lambda: not crds.json("get", "deployment", "orphaned", "-n", namespace)["metadata"].get("ownerReferences"),
        what="the garbage collector to orphan the Deployment",
    )
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "expired"},
        "spec": {
            "target": {"url": "http://127.0.0.1:9"},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            "ttl": {"afterFailure": "1h"},
        },
    }
    # The same run as Argo CD applies it stays (Argo CD would create it again, and it would run again).
    tracked = {"argocd.argoproj.io/tracking-id": "perf:kaliper.dev/ProfileRun:ml/synced"}
    synced = {**run, "metadata": {"name": "synced", "annotations": tracked}}
    apply(run)
    apply(synced)
    finished = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"status": {"phase": "Failed", "completionTime": finished}}
    for name in ("expired", "synced"):
        crds("patch", "profilerun", name, "-n", namespace, "--subresource=status", "--type=merge",
             "-p", json.dumps(status))  # fmt: skip

    listed = gc(crds, namespace)
    assert [(i["kind"], i["name"], i["why"]) for i in listed["cluster"]] == [
        ("Deployment", "orphaned", "no Kaliper owner (its owner was deleted with --cascade=orphan)"),
        ("ProfileRun", "expired", f"Failed at {finished}; its ttl (1h) has passed"),
        ("Service", "orphaned", "no Kaliper owner (its owner was deleted with --cascade=orphan)"),
    ]
    assert listed["removed"] is False
    assert crds("get", "deployment", "orphaned", "-n", namespace, check=False).returncode == 0

    removed = gc(crds, namespace, "--delete")
    assert removed["failures"] == [] and len(removed["cluster"]) == 3
    crds.wait_for(
        lambda: all(
            crds("get", kind, name, "-n", namespace, check=False).returncode != 0
            for kind, name in (("deployment", "orphaned"), ("service", "orphaned"), ("profilerun", "expired"))
        ),
        what="the leftovers to go",
    )
    for kind in ("modeldeployment", "deployment", "service"):
        assert crds("get", kind, "kept", "-n", namespace, check=False).returncode == 0, kind
    assert crds("get", "profilerun", "synced", "-n", namespace, check=False).returncode == 0
    assert gc(crds, namespace)["cluster"] == []
