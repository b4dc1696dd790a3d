"""The demo behind `make demo`, until the local runtime lands: the Kaliper API end to end on a real
Kubernetes control plane built on this machine.

1. `kaliper validate` checks every example; 2. a real kube-apiserver (with etcd, controller manager,
scheduler and kwok nodes) starts on loopback; 3. the generated CRDs are installed and every example applied;
4. `kubectl get kaliper` lists them with their printer columns; 5. a broken manifest is refused by both
validators with the same field path; 6. everything is stopped and removed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.controlplane import ControlPlane, build_binaries  # noqa: E402

KALIPER = Path(sys.executable).with_name("kaliper")
BROKEN = REPO / "tests" / "catalogue" / "invalid" / "both-targets.yaml"


def step(title: str) -> None:
    print(f"\n\033[1m== {title}\033[0m", flush=True)


def main() -> int:
    step("kaliper validate examples/")
    subprocess.run([str(KALIPER), "validate", str(REPO / "examples")], check=True)

    step("building (or reusing) the control-plane binaries")
    bin_dir = build_binaries()
    plane = ControlPlane(bin_dir)
    step("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok on 127.0.0.1")
    plane.start()
    try:
        print(f"API server at {plane.server}")
        step("kubectl apply -f crds/  (generated from the pydantic models)")
        print(plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds")).stdout, end="")
        plane.kubectl("wait", "--for=condition=Established", "crd", "-l", "app.kubernetes.io/part-of=kaliper")
        step("kubectl apply -f examples/")
        print(plane.kubectl("apply", "-f", str(REPO / "examples")).stdout, end="")
        step("kubectl get kaliper  (all four kinds, through the 'kaliper' category)")
        print(plane.kubectl("get", "kaliper", "-A").stdout, end="")
        step(f"a broken manifest: {BROKEN.relative_to(REPO)}")
        local = subprocess.run([str(KALIPER), "validate", str(BROKEN)], capture_output=True, text=True)
        print("kaliper validate says:\n" + local.stdout, end="")
        server = plane.kubectl("apply", "-f", str(BROKEN), check=False)
        print("the API server says:\n" + server.stderr, end="")
    finally:
        step("stopping the control plane")
        plane.stop()
    print("done: no control-plane process is left running.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
