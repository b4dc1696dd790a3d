"""The Helm chart lints and installs on the real API server."""

from __future__ import annotations

import subprocess

from tests.conftest import REPO, Kubectl
from tests.support.controlplane import build_binaries


def helm(kubectl: Kubectl, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(build_binaries() / "helm"), f"--kubeconfig={kubectl.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_chart_lints_and_installs(crds: Kubectl, namespace: str) -> None:
    lint = helm(crds, "lint", str(REPO / "charts/kaliper"))
    assert lint.returncode == 0, lint.stdout + lint.stderr

    rendered = helm(crds, "template", "kaliper", str(REPO / "charts/kaliper"), "--include-crds")
    assert rendered.stdout.count("kind: CustomResourceDefinition") == 4

    install = helm(crds, "install", "kaliper", str(REPO / "charts/kaliper"), "-n", namespace, "--wait")
    assert install.returncode == 0, install.stderr
    status = helm(crds, "status", "kaliper", "-n", namespace)
    assert "STATUS: deployed" in status.stdout
    assert helm(crds, "uninstall", "kaliper", "-n", namespace).returncode == 0
    # Helm never deletes CRDs on uninstall: the resources users created stay.
    assert crds("get", "crd", "profileruns.kaliper.dev", check=False).returncode == 0
