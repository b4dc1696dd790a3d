"""What kstatus, the library Flux's health checks and `flux` waits use, computes for an object as the API
server holds it: hack/testcluster/kstatus (built from sigs.k8s.io/cli-utils by hack/testcluster/build.sh)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from tests.support.controlplane import Kubectl
from tests.support.paths import REPO

RECIPES_MARKER = "<!-- kubectl-wait recipes:"


def kstatus(kubectl: Kubectl, namespace: str, kind: str, name: str) -> tuple[str, str]:
    """(status, message): InProgress, Current, Failed, Terminating or NotFound, and kstatus's message."""
    listed = kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout
    program = Path(kubectl.binary).parent / "kstatus"
    answer = subprocess.run(
        [str(program)],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [json.loads(listed)]}),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    computed = json.loads(answer.stdout)
    return computed["status"], computed["message"]


def kubectl_wait_recipes() -> list[list[str]]:
    """The README's `kubectl wait` lines (after its marker), each as the arguments after `kubectl`, with NAME
    still to fill in."""
    readme = (REPO / "README.md").read_text()
    block = readme.split(RECIPES_MARKER, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("kubectl wait ")]


def run_recipe(kubectl: Kubectl, recipe: list[str], name: str, namespace: str) -> int:
    """The exit code of one README recipe line for object NAME in the namespace."""
    return kubectl(*[a.replace("NAME", name) for a in recipe], "-n", namespace, check=False).returncode
