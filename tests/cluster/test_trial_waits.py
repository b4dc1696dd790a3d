"""A trial whose load generator cannot start says why while it waits: here the chart's loadGenerator.nodeSelector
names a pool no node is in, so the scheduler leaves the pod Pending, and the trial's entry in the run's status
carries the scheduler's words. Its own operator (the setting is read at start-up)."""

from __future__ import annotations

import json

from tests.support.cluster_objects import apply, model_deployment, profile_run
from tests.support.controlplane import Kubectl
from tests.support.operator_runner import LOOPBACK_ALLOWED, Cluster, running_operator

NOWHERE = {**LOOPBACK_ALLOWED, "KALIPER_LOADGEN_NODE_SELECTOR": json.dumps({"kaliper.dev/pool": "nowhere"})}


def test_a_load_generator_no_node_will_take_is_said_while_the_trial_waits(crds: Kubectl, namespace: str) -> None:
    with running_operator(crds, NOWHERE):
        apply(crds, namespace, model_deployment(replicas=1), profile_run("waits", None))
        cluster = Cluster(crds, namespace, "waits")
        cluster.wait_trial(0, "Running")

        def said() -> str:
            return next((t.get("message") or "" for t in cluster.status().get("trials") or [] if t["index"] == 0), "")

        crds.wait_for(lambda: said().startswith("waiting for the load generator: Unschedulable: pod waits-t0-lg-"),
                      what="the trial to say why it waits")  # fmt: skip
        assert "node(s) didn't match Pod's node affinity/selector" in said(), said()
        assert cluster.status()["phase"] == "Running" and cluster.trial_phase(0) == "Running"
