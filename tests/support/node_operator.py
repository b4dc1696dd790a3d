"""The operator as the real node tier runs it (a pod the chart installed), and what its tests share."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

import pytest

from tests.support.controlplane import ControlPlaneError, wait_for
from tests.support.node import Node

OPERATOR_NAMESPACE = "kaliper-system"
OPERATOR_ACCOUNT = f"system:serviceaccount:{OPERATOR_NAMESPACE}:kaliper-kaliper"


@dataclass
class Operator:
    pod: dict

    @property
    def name(self) -> str:
        return self.pod["metadata"]["name"]


def operator_pod(node: Node) -> dict:
    pods = node.kubectl.json("get", "pods", "-n", OPERATOR_NAMESPACE, "-l", "app.kubernetes.io/name=kaliper")
    running = [
        p for p in pods["items"] if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]
    assert len(running) == 1, json.dumps([p["metadata"]["name"] for p in pods["items"]])
    return running[0]


def wait_for_phase(node: Node, namespace: str, run: str, phase: str, timeout: float) -> dict:
    """The run's status once it reaches `phase`; the test fails with the status and the events once it has
    failed instead, or the time is up."""
    status: dict = {}

    def settled() -> bool:
        nonlocal status
        status = node.kubectl.json("get", "profilerun", run, "-n", namespace).get("status") or {}
        return status.get("phase") in (phase, "Failed")

    with contextlib.suppress(ControlPlaneError):
        wait_for(settled, timeout, what=f"ProfileRun {run} to be {phase}", interval=2)
    if status.get("phase") == phase:
        return status
    events = node.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False).stdout
    pytest.fail(f"ProfileRun {run} is not {phase}: {json.dumps(status, indent=1)[-3000:]}\n{events[-3000:]}")


def apply_with_model(node: Node, namespace: str, iris_model, *objects: dict) -> None:  # type: ignore[no-untyped-def]
    kubectl = node.kubectl
    kubectl("create", "configmap", "iris-model", f"--from-file=model.onnx={iris_model}", "-n", namespace)
    kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps({"kind": "List", "apiVersion": "v1", "items": list(objects)}),
    )
