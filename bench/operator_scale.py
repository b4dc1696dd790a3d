"""Operator scale: N ProfileRuns (2 trials each) created at once on the real control plane.

    .venv/bin/python bench/operator_scale.py [--runs 200]

The operator runs as its own process (`kopf run`) under a service account, so the API server's audit log
(one line per request, by user) counts exactly its requests. kwok plays the nodes; the harness
(tests/support/many_runs.py) plays the load generators: for each load-generator Job it writes a results
document into the ConfigMap the Job would (through the same publish code the Job runs) and ends the Job's
pod, as a kubelet would. Reported: the time from creating the runs until every one is Succeeded, the
operator's peak memory (VmHWM) against the chart's limit, its CPU, and the API requests per run, by verb and
resource. Every process the script starts (the control plane, the operator) is stopped on any exit.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.controlplane import ControlPlane, build_binaries  # noqa: E402
from tests.support.many_runs import (  # noqa: E402
    OPERATOR_ACCOUNT,
    LoadGeneratorPlayer,
    ProcessSampler,
    apply_runs,
    operator_process,
    prepare_namespace,
    profile_run,
)

from kaliper.api.units import parse_quantity  # noqa: E402

NAMESPACE = "bench"
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:{OPERATOR_ACCOUNT}"


def chart_memory_limit_mib() -> float:
    limit = yaml.safe_load((REPO / "charts" / "kaliper" / "values.yaml").read_text())["resources"]["limits"]["memory"]
    return float(parse_quantity(limit)) / 2**20


def operator_requests(root: Path) -> collections.Counter[str]:
    """The operator's requests by "verb resource[/subresource]", from every audit log file (the API server
    starts a new file every 100 MB)."""
    requests: collections.Counter[str] = collections.Counter()
    for path in sorted(root.glob("audit*.log")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["user"]["username"] == OPERATOR_USER:
                ref = event.get("objectRef") or {}
                resource = ref.get("resource", event["requestURI"])
                if ref.get("subresource"):
                    resource += "/" + ref["subresource"]
                requests[f"{event['verb']} {resource}"] += 1
    return requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=1500)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="kaliper-bench-"))
    plane = ControlPlane(build_binaries(), audit_log=root / "audit.log").start()
    kubectl = plane.kubectl
    assert kubectl is not None and plane.kubeconfig is not None
    try:
        kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        kubectl("wait", "--for=condition=Established", "crd", "-l", "app.kubernetes.io/part-of=kaliper")
        operator_kubeconfig = prepare_namespace(kubectl, NAMESPACE, root)
        runs = [profile_run(f"run-{i:03d}", ["500m", "1"]) for i in range(args.runs)]
        env = {"KALIPER_LOG_LEVEL": "warning", "KALIPER_LOADGEN_CPU": "10m", "KALIPER_LOADGEN_MEMORY": "64Mi"}
        with operator_process(operator_kubeconfig, root / "operator.log", NAMESPACE, **env) as operator:
            sampler = ProcessSampler(operator.pid)
            sampler.start()
            time.sleep(5)  # the operator's startup is not part of the figure
            player = LoadGeneratorPlayer(NAMESPACE, root, plane.kubeconfig)
            started = time.monotonic()
            apply_runs(kubectl, NAMESPACE, runs)
            while True:
                counted = player.phases() or collections.Counter()
                if counted["Succeeded"] + counted["Failed"] == args.runs:
                    break
                if time.monotonic() - started > args.timeout:
                    raise SystemExit(f"timed out: {dict(counted)}")
                player.play_new()
                print(f"{time.monotonic() - started:6.0f}s {dict(counted)}", flush=True)
                time.sleep(2)
            elapsed = time.monotonic() - started
            player.close()
            sampler.stop.set()
            sampler.join()
            cpu_s = sampler.cpu_seconds()
        requests = operator_requests(root)
        total = sum(requests.values())
        figures = {
            "runs": args.runs,
            "trials": 2 * args.runs,
            "phases": dict(counted),
            "seconds_until_all_finished": round(elapsed, 1),
            # The floor: the operator cannot finish before the last result is handed in.
            "seconds_until_last_result_handed_in": round(player.last_result_at - started, 1),
            "finished_over_last_result": round(elapsed / (player.last_result_at - started), 2),
            "operator_peak_rss_mib": round(sampler.hwm_kib / 1024, 1),
            "chart_memory_limit_mib": chart_memory_limit_mib(),
            "operator_cpu_seconds": round(cpu_s, 1),
            "operator_peak_cpu_cores": round(sampler.peak_cpu_share, 2),
            "api_requests_total": total,
            "api_requests_per_run": round(total / args.runs, 1),
            "by_request_per_run": {k: round(v / args.runs, 2) for k, v in requests.most_common(14)},
        }
        print(json.dumps(figures, indent=2))
    finally:
        plane.stop()


if __name__ == "__main__":
    main()
