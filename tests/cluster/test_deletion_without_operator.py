"""Deleting Kaliper's resources never waits for the operator: none of them carries a finalizer, so with the
operator stopped (uninstalled, crash-looping) a ModelDeployment, a ProfileRun and their namespace still go."""

from __future__ import annotations

import uuid

from tests.support.cluster_objects import apply, model_deployment, profile_run
from tests.support.controlplane import Kubectl
from tests.support.operator_runner import Cluster, running_operator


def test_deletes_complete_with_the_operator_stopped(crds: Kubectl) -> None:
    namespace = f"orphans-{uuid.uuid4().hex[:6]}"  # not the namespace fixture: this test deletes it
    crds("create", "namespace", namespace)
    crds.wait_for(lambda: crds("get", "serviceaccount", "default", "-n", namespace, check=False).returncode == 0)
    with running_operator(crds):
        apply(crds, namespace, model_deployment(replicas=1), profile_run("orphan", None))
        cluster = Cluster(crds, namespace, "orphan")
        cluster.wait_trial(0, "Running")  # the operator has handled both kinds, and its pacer stepped the run
        crds.wait_for(
            lambda: crds.json("get", "mdep", "iris", "-n", namespace).get("status", {}).get("phase") == "Ready",
            what="ModelDeployment iris Ready",
        )
    for kind, name in (("profilerun", "orphan"), ("modeldeployment", "iris"), ("modeldeployment", "orphan-t0")):
        assert crds.json("get", kind, name, "-n", namespace)["metadata"].get("finalizers") is None, (kind, name)
    deleted = crds("delete", "profilerun/orphan", "modeldeployment/iris", "-n", namespace, "--timeout=30s")
    assert deleted.returncode == 0
    crds("delete", "namespace", namespace, "--timeout=90s")
    assert crds("get", "namespace", namespace, check=False).returncode != 0
