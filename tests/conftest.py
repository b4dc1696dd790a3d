"""Shared fixtures. The cluster ones start a real control plane (see tests/support/controlplane.py) once per
session, or use an existing cluster when KALIPER_TEST_KUBECONFIG points at one (a kind cluster)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane, ControlPlaneError, build_binaries, interrupt

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CATALOGUE = REPO / "tests" / "catalogue" / "invalid"


class Kubectl:
    """kubectl against the test cluster."""

    def __init__(self, binary: str, kubeconfig: Path) -> None:
        self.binary, self.kubeconfig = binary, kubeconfig

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [self.binary, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def json(self, *args: str) -> dict:
        return json.loads(self(*args, "-o", "json").stdout)

    def wait_for(self, predicate, timeout: float = 60, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture(scope="session")
def kubectl() -> Iterator[Kubectl]:
    existing = os.environ.get("KALIPER_TEST_KUBECONFIG")
    bin_dir = build_binaries()
    if existing:
        yield Kubectl(str(bin_dir / "kubectl"), Path(existing))
        return
    plane = ControlPlane(bin_dir)
    # A CI timeout sends SIGTERM: turn it into KeyboardInterrupt so this fixture's teardown still runs.
    signal.signal(signal.SIGTERM, interrupt)
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(f"could not start the test control plane: {exc}", pytrace=False)
    try:
        assert plane.kubeconfig is not None
        yield Kubectl(str(bin_dir / "kubectl"), plane.kubeconfig)
    finally:
        plane.stop()  # raises if any control-plane process survived


@pytest.fixture(scope="session")
def crds(kubectl: Kubectl) -> Kubectl:
    """The CRDs from crds/ installed and Established."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "-l", "app.kubernetes.io/part-of=kaliper")
    return kubectl


@pytest.fixture
def namespace(crds: Kubectl, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    readable = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"t-{readable}-{uuid.uuid4().hex[:6]}"
    crds("create", "namespace", name)
    crds.wait_for(
        lambda: crds("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        what=f"the default service account in {name}",
    )
    yield name
    crds("delete", "namespace", name, "--wait=false")
