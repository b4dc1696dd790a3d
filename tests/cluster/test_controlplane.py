"""The test control plane itself: it stops without leaving a process behind, also when its owner is killed; and
the suite's kubectl, whose plain reads run in the test's process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, ControlPlaneError, GetRequest, Kubectl, build_binaries, get_request

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) counts as gone.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_stop_leaves_no_process_and_no_files() -> None:
    plane = ControlPlane(build_binaries("controlplane")).start()
    pids, root = plane.pids(), plane.root
    assert len(pids) == 5 and all(alive(p) for p in pids)
    plane.stop()
    assert not any(alive(p) for p in pids)
    assert not root.exists()


def test_killing_the_owner_takes_the_control_plane_down() -> None:
    """SIGKILL gives no chance to clean up: the children's parent-death signal does it."""
    owner = subprocess.Popen(
        [sys.executable, "-m", "tests.support.controlplane", "up"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    try:
        line = owner.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("export KUBECONFIG="), line
        root = Path(line.strip().split("=", 1)[1]).parent
        children = [int(p) for p in Path(f"/proc/{owner.pid}/task/{owner.pid}/children").read_text().split()]
        assert len(children) == 5
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 20
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in children)
    subprocess.run(["rm", "-rf", str(root)], check=False)  # the killed owner could not remove its directory


def test_a_plain_get_is_read_in_this_process_as_kubectl_prints_it(kubectl: Kubectl, namespace: str) -> None:
    """Kubectl.json's in-process read against kubectl's own `-o json`, on the suite's control plane: an object, a
    List by label, a cluster-scoped List, and an object that is not there."""
    for name, team in (("a", "x"), ("b", "x"), ("c", "y")):
        kubectl("create", "configmap", name, "-n", namespace, f"--from-literal=team={team}")
        kubectl("label", "configmap", name, "-n", namespace, f"team={team}")
    for args in (("get", "configmap", "a", "-n", namespace), ("get", "cm", "-n", namespace, "-l", "team=x")):
        assert get_request(args) is not None, args
        printed = json.loads(kubectl(*args, "-o", "json").stdout)
        assert kubectl.json(*args) == printed
    # kwok's nodes change as they beat: their names and kinds, cluster-wide.
    nodes = kubectl.json("get", "nodes")
    assert [(n["kind"], n["metadata"]["name"]) for n in nodes["items"]] == [
        ("Node", "kwok-node-0"),
        ("Node", "kwok-node-1"),
    ]
    listed = kubectl.json("get", "cm", "-n", namespace, "-l", "team=x")
    assert [(i["kind"], i["metadata"]["name"], i["data"]) for i in listed["items"]] == [
        ("ConfigMap", "a", {"team": "x"}),
        ("ConfigMap", "b", {"team": "x"}),
    ]
    with pytest.raises(ControlPlaneError) as failed:
        kubectl.json("get", "configmap", "nope", "-n", namespace)
    assert str(failed.value).endswith('Error from server (NotFound): configmaps "nope" not found')


def test_a_namespace_is_made_and_deleted_in_this_process_as_kubectl_would(kubectl: Kubectl) -> None:
    name = f"inproc-{os.getpid()}"
    kubectl.create_namespace(name)
    shown = json.loads(kubectl("get", "namespace", name, "-o", "json").stdout)
    assert (shown["metadata"]["name"], shown["status"]["phase"]) == (name, "Active")
    with pytest.raises(ControlPlaneError) as failed:
        kubectl.create_namespace(name)
    assert str(failed.value) == (
        f"kubectl create namespace {name} failed:\n"
        f'Error from server (AlreadyExists): namespaces "{name}" already exists'
    )
    kubectl.delete_namespace(name)
    kubectl.wait_for(
        lambda: kubectl("get", "namespace", name, check=False).returncode != 0, what=f"namespace {name} to go"
    )


def test_only_a_plain_get_of_a_known_resource_is_read_in_this_process() -> None:
    assert get_request(("get", "prun", "r", "--namespace=n")) == GetRequest("prun", "r", "n", False, None)
    assert get_request(("get", "pods", "-A", "--selector=a=b")) == GetRequest("pods", None, None, True, "a=b")
    assert get_request(("get", "deployments,services", "-n", "n")) is None  # two resources: kubectl
    assert get_request(("get", "kaliper", "-n", "n")) is None  # a category: kubectl
    assert get_request(("get", "events", "--sort-by=.lastTimestamp")) is None  # a flag it does not know
    assert get_request(("describe", "pods")) is None
    assert get_request(("get", "pod", "p", "-l", "a=b")) is None  # kubectl refuses a name with a selector
