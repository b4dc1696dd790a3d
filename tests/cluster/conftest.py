"""The cluster tier's control plane (tests/support/controlplane.py), started once for this package's tests
(one worker runs them all, tests/support/tiers.py) and stopped after its last, so that it does not idle beside
the modules that worker runs next; or an existing cluster when KALIPER_TEST_KUBECONFIG points at one."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.controlplane import (
    ControlPlane,
    ControlPlaneError,
    Kubectl,
    build_binaries,
    fresh_namespace,
    interrupt,
)
from tests.support.paths import REPO


@pytest.fixture(scope="package")
def kubectl() -> Iterator[Kubectl]:
    existing = os.environ.get("KALIPER_TEST_KUBECONFIG")
    # What a control plane starts with, not every binary: on a cold machine this tier's tests, which mostly wait
    # for the operator, run while the rest (helm, kind, Argo CD's health checker, ...) compiles for the tests that
    # ask for them.
    bin_dir = build_binaries("controlplane")
    if existing:
        yield Kubectl(str(bin_dir / "kubectl"), Path(existing))
        return
    plane = ControlPlane(bin_dir)
    plane.audit_log = plane.root / "audit.log"  # the operator's requests, counted by tests/cluster
    # A CI timeout sends SIGTERM: turn it into KeyboardInterrupt so this fixture's teardown still runs.
    signal.signal(signal.SIGTERM, interrupt)
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(f"could not start the test control plane: {exc}", pytrace=False)
    try:
        assert plane.kubectl is not None
        plane.kubectl.audit_log = plane.audit_log
        yield plane.kubectl
    finally:
        plane.stop()  # raises if any control-plane process survived


@pytest.fixture(scope="package")
def crds(kubectl: Kubectl) -> Kubectl:
    """The CRDs from crds/ installed and Established."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "-l", "app.kubernetes.io/part-of=kaliper")
    return kubectl


@pytest.fixture
def namespace(crds: Kubectl, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test on the kwok control plane."""
    yield from fresh_namespace(crds, request, "t")
