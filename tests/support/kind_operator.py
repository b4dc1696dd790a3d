"""The operator as the kind tier runs it (a pod the chart installed), and what its tests share."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.controlplane import ControlPlaneError, wait_for
from tests.support.kind_cluster import KindCluster

OPERATOR_NAMESPACE = "kaliper-system"
OPERATOR_ACCOUNT = f"system:serviceaccount:{OPERATOR_NAMESPACE}:kaliper-kaliper"


@dataclass
class Operator:
    pod: dict

    @property
    def name(self) -> str:
        return self.pod["metadata"]["name"]


def operator_pod(cluster: KindCluster) -> dict:
    pods = cluster.kubectl.json("get", "pods", "-n", OPERATOR_NAMESPACE, "-l", "app.kubernetes.io/name=kaliper")
    running = [
        p for p in pods["items"] if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]
    assert len(running) == 1, json.dumps([p["metadata"]["name"] for p in pods["items"]])
    return running[0]


def pods_of(cluster: KindCluster, namespace: str, name: str) -> list[dict]:
    """The pods of a ModelDeployment (or of a Deployment Kaliper made), by their instance label."""
    return cluster.kubectl.json("get", "pods", "-n", namespace, "-l", f"app.kubernetes.io/instance={name}")["items"]


def server_pod(cluster: KindCluster, namespace: str, name: str) -> dict:
    """Its one pod (the test fails naming them when there are several)."""
    pods = pods_of(cluster, namespace, name)
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def wait_for_optimization(cluster: KindCluster, namespace: str, name: str, timeout: float = 600) -> dict[str, Any]:
    """The object once it has finished (Succeeded or Failed); the test fails with its status and events
    when the time is up."""
    body: dict[str, Any] = {}

    def finished() -> bool:
        nonlocal body
        body = cluster.kubectl.json("get", "modeloptimization", name, "-n", namespace)
        return (body.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    with contextlib.suppress(ControlPlaneError):
        wait_for(finished, timeout, what=f"ModelOptimization {name} to finish", interval=2)
    if (body.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
        events = cluster.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False).stdout
        pytest.fail(
            f"ModelOptimization {name} did not finish: {json.dumps(body.get('status'))[-3000:]}\n{events[-3000:]}"
        )
    return body


def wait_for_phase(cluster: KindCluster, namespace: str, run: str, phase: str, timeout: float) -> dict:
    """The run's status once it reaches `phase`; the test fails with the status and the events once it has
    failed instead, or the time is up."""
    status: dict = {}

    def settled() -> bool:
        nonlocal status
        status = cluster.kubectl.json("get", "profilerun", run, "-n", namespace).get("status") or {}
        return status.get("phase") in (phase, "Failed")

    with contextlib.suppress(ControlPlaneError):
        wait_for(settled, timeout, what=f"ProfileRun {run} to be {phase}", interval=2)
    if status.get("phase") == phase:
        return status
    events = cluster.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False).stdout
    pytest.fail(f"ProfileRun {run} is not {phase}: {json.dumps(status, indent=1)[-3000:]}\n{events[-3000:]}")


def poll_until_phase(
    cluster: KindCluster, namespace: str, run: str, phase: str, each: Callable[[], None], timeout: float
) -> dict:
    """wait_for_phase, calling `each` before every look at the run."""

    def settled() -> bool:
        each()
        status = cluster.kubectl.json("get", "profilerun", run, "-n", namespace).get("status") or {}
        return status.get("phase") in (phase, "Failed")

    with contextlib.suppress(ControlPlaneError):
        wait_for(settled, timeout, what=f"ProfileRun {run} to be {phase}", interval=1)
    return wait_for_phase(cluster, namespace, run, phase, timeout=1)


def run_report(cluster: KindCluster, namespace: str, run: str) -> dict:
    """The run's whole report, as the operator keeps it in the ConfigMap `<run>-report`."""
    configmap = cluster.kubectl.json("get", "configmap", f"{run}-report", "-n", namespace)
    return json.loads(configmap["data"]["report.json"])


def apply_objects(cluster: KindCluster, namespace: str, *objects: dict) -> None:
    """`kubectl apply` of `objects` in `namespace`, as one List."""
    list_of = {"kind": "List", "apiVersion": "v1", "items": list(objects)}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(list_of))


def apply_with_model(cluster: KindCluster, namespace: str, iris_model, *objects: dict) -> None:  # type: ignore[no-untyped-def]
    cluster.kubectl("create", "configmap", "iris-model", f"--from-file=model.onnx={iris_model}", "-n", namespace)
    apply_objects(cluster, namespace, *objects)


@contextlib.contextmanager
def local_claim(cluster: KindCluster, namespace: str, folder: Path, name: str = "models") -> Iterator[Path]:
    """The PVC `name` in `namespace`, bound to a local PersistentVolume over `folder` (a folder under
    `cluster.shared`, which every worker mounts at the same path, so the volume is on each of them; made writable
    for uid 10001, the image's user); both go, and the folder with them, afterwards."""
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    on_the_workers = {"key": "kubernetes.io/hostname", "operator": "In", "values": cluster.workers}
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{name}-{namespace}"[:63]},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "kaliper-local",
            "local": {"path": str(folder)},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [on_the_workers]}]}},
        },
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "kaliper-local",
            "volumeName": volume["metadata"]["name"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [volume, claim]})
    )
    cluster.kubectl.wait_for(
        lambda: cluster.kubectl.json("get", "pvc", name, "-n", namespace)["status"].get("phase") == "Bound",
        timeout=60,
        what=f"the {name} claim to be bound",
    )
    yield folder
    # Both go once the namespace's pods are gone (the claim and volume protection finalizers wait for them).
    cluster.kubectl("delete", "pvc", name, "-n", namespace, "--wait=false", check=False)
    cluster.kubectl("delete", "pv", volume["metadata"]["name"], "--wait=false", check=False)
    shutil.rmtree(folder, ignore_errors=True)
