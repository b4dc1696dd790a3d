"""What GitOps tools make of an object as the API server holds it: kstatus, the library Flux's health checks
and `flux` waits use (hack/testcluster/kstatus, built from sigs.k8s.io/cli-utils), and Argo CD's health
checks of the chart's charts/kaliper/argocd (hack/testcluster/argocd-health, Argo CD's own Lua runtime); both
built by hack/testcluster/build.sh. And the GitOps guide's `kubectl wait` recipes (docs/how-to/gitops.md)."""

from __future__ import annotations

import json
import shlex
import subprocess

from tests.support.controlplane import Kubectl, build_binaries
from tests.support.paths import REPO

RECIPES_MARKER = "<!-- kubectl-wait recipes:"
ARGOCD_CHECKS = REPO / "charts" / "kaliper" / "argocd" / "resource_customizations"


def assess(obj: dict, *program: str) -> tuple[str, str]:
    """(status, message) that a GitOps program (kstatus, or argocd-health with its arguments) computes for
    the object as given."""
    answer = subprocess.run(
        [str(build_binaries(program[0]) / program[0]), *program[1:]],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [obj]}),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert answer.returncode == 0, answer.stderr
    computed = json.loads(answer.stdout)
    return computed["status"], computed["message"]


KSTATUS = ("kstatus",)
ARGOCD_HEALTH = ("argocd-health", "live", str(ARGOCD_CHECKS))


def kstatus(kubectl: Kubectl, namespace: str, kind: str, name: str) -> tuple[str, str]:
    """(status, message): InProgress, Current, Failed, Terminating or NotFound, and kstatus's message."""
    return assess(kubectl.json("get", kind, name, "-n", namespace), *KSTATUS)


def argocd_health(kubectl: Kubectl, namespace: str, kind: str, name: str) -> tuple[str, str]:
    """(status, message) as Argo CD computes them with the chart's health checks: Healthy, Progressing,
    Degraded (or Suspended, Missing, Unknown)."""
    return assess(kubectl.json("get", kind, name, "-n", namespace), *ARGOCD_HEALTH)


def kubectl_wait_recipes() -> dict[str, list[list[str]]]:
    """The GitOps guide's `kubectl wait` lines (after its marker), by the resource they wait on (profilerun,
    modeldeployment, ...), each as the arguments after `kubectl`, with NAME still to fill in."""
    guide = (REPO / "docs" / "how-to" / "gitops.md").read_text()
    block = guide.split(RECIPES_MARKER, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    recipes: dict[str, list[list[str]]] = {}
    for line in block.splitlines():
        if line.startswith("kubectl wait "):
            arguments = shlex.split(line)[1:]
            recipes.setdefault(arguments[1].split("/", 1)[0], []).append(arguments)
    return recipes


def run_recipe(kubectl: Kubectl, recipe: list[str], name: str, namespace: str) -> int:
    """The exit code of one recipe line for object NAME in the namespace."""
    return kubectl(*[a.replace("NAME", name) for a in recipe], "-n", namespace, check=False).returncode
