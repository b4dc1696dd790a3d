"""The demo behind `make demo-cluster`: the API and the load generator, end to end, on this machine.

Part 1, the API on a real Kubernetes control plane built here: `kaliper validate` checks every example; a
real kube-apiserver (with etcd, controller manager, scheduler and kwok nodes) starts on loopback; the
generated CRDs are installed and every example applied; `kubectl get kaliper` lists them; a broken manifest
is refused by both validators with the same field path; everything is stopped and removed.

Part 2, the load generator against a server whose latency is known (bench/groundtruth: lognormal, median
50 ms): two closed-loop levels, then an open-loop schedule, with Kaliper's percentiles beside the server's
own records.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.controlplane import ControlPlane, build_binaries  # noqa: E402
from tests.support.groundtruth import groundtruth, records  # noqa: E402

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
    print("no control-plane process is left running.")
    load_generator_demo()
    return 0


def load_generator_demo() -> None:
    import tempfile

    import yaml

    step("the load generator against a server with known latency (lognormal, median 50 ms)")
    with groundtruth("-median", "50ms", "-sigma", "0.3") as base, tempfile.TemporaryDirectory() as tmp:
        payload = {"inline": '{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'}
        common = {"url": base, "request": {"protocol": "oip-v2", "modelName": "demo"}, "payload": payload}
        short = {"warmup": "2s", "minDuration": "8s", "maxDuration": "8s", "stopping": {"window": "2s"}}
        for name, load, levels in (
            ("closed loop, 4 then 16 users", {"closedLoop": {"concurrency": 4}, **short}, [4, 16]),
            ("open loop, 100 req/s Poisson", {"openLoop": {"rate": 100, "arrival": "poisson"}, **short}, None),
        ):
            config = Path(tmp) / "config.yaml"
            config.write_text(yaml.safe_dump({**common, "load": load, **({"levels": levels} if levels else {})}))
            print(f"-- {name}: python -m kaliper.loadgen run config.yaml", flush=True)
            subprocess.run(
                [sys.executable, "-m", "kaliper.loadgen", "run", str(config), "-o", str(Path(tmp) / "r")], check=True
            )
        served = sorted(ms for _, ms in records(base)[1])
        print(
            f"-- the server's own records of all {len(served)} requests: p50 {served[len(served) // 2]:.2f} ms, "
            f"p99 {served[int(len(served) * 0.99)]:.2f} ms"
        )
    print("done.")


if __name__ == "__main__":
    sys.exit(main())
