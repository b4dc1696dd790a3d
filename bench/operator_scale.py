"""Operator scale: N ProfileRuns (2 trials each) created at once on the real control plane.

    .venv/bin/python bench/operator_scale.py [--runs 200]

The operator runs as its own process (`kopf run`) under a service account, so the API server's audit log
(one line per request, by user) counts exactly its requests. kwok plays the nodes; this script plays the
load generators: for each load-generator Job it writes a results document into the ConfigMap the Job would
(through the same publish code the Job runs) and ends the Job's pod, as a kubelet would. Reported: the time
from creating the runs until every one is Succeeded, the operator's peak memory (VmHWM) and CPU, and the
API requests per run, by verb and resource.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.controlplane import ControlPlane, build_binaries  # noqa: E402
from tests.support.reports import make_stage  # noqa: E402

from kaliper.report.publish import publish  # noqa: E402
from kaliper.report.schema import GeneratorInfo, LatencyFigures, LoadTestResult, PercentileFigure  # noqa: E402

NAMESPACE = "bench"
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:kaliper-bench"


def result_document(level: float) -> str:
    latency = LatencyFigures(
        count=3000,
        mean_ms=9.0,
        percentiles=[PercentileFigure(percentile=p, value_ms=v, count=3000) for p, v in ((50, 8.0), (99, 20.0))],
    )
    stage = make_stage(latency, throughput_rps=100.0, level=level, requests=3000, measured_s=30)
    stage.started_at = datetime.now(UTC) - timedelta(seconds=31)
    now = datetime.now(UTC)
    result = LoadTestResult(
        target="http://bench", started_at=stage.started_at, finished_at=now,
        generator=GeneratorInfo(processes=1, workers=0, locust_version="bench"), stages=[stage],
    )  # fmt: skip
    return result.model_dump_json(by_alias=True)


class Sampler(threading.Thread):
    """Peak RSS and CPU of a process, from /proc, once a second."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.peak_cpu_share = 0.0
        self.cpu_s = 0.0
        self.hwm_kib = 0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def run(self) -> None:
        last, last_t = self.cpu_seconds(), time.monotonic()
        while not self.stop.wait(1.0):
            try:
                cpu, now = self.cpu_seconds(), time.monotonic()
                status = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            self.peak_cpu_share = max(self.peak_cpu_share, (cpu - last) / (now - last_t))
            self.cpu_s, last, last_t = cpu, cpu, now
            self.hwm_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


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
    assert kubectl is not None
    try:
        kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        kubectl("wait", "--for=condition=Established", "crd", "-l", "app.kubernetes.io/part-of=kaliper")
        for node in ("kwok-node-0", "kwok-node-1"):  # room for every trial pod at once
            big = {"cpu": "1000", "memory": "4Ti", "pods": "2000", "nvidia.com/gpu": "4"}
            kubectl("patch", "node", node, "--subresource=status", "--type=merge",
                    "-p", json.dumps({"status": {"capacity": big, "allocatable": big}}))  # fmt: skip
        kubectl("create", "namespace", NAMESPACE)
        kubectl.wait_for(lambda: kubectl("get", "sa", "default", "-n", NAMESPACE, check=False).returncode == 0)
        kubectl("create", "serviceaccount", "kaliper-bench", "-n", NAMESPACE)
        kubectl("create", "clusterrolebinding", "kaliper-bench", "--clusterrole=cluster-admin",
                f"--serviceaccount={NAMESPACE}:kaliper-bench")  # fmt: skip
        operator_kubeconfig = kubectl.token_kubeconfig("kaliper-bench", NAMESPACE, root / "operator.kubeconfig", "2h")
        target = {
            "apiVersion": "kaliper.dev/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "iris"},
            "spec": {"model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"}},
        }  # fmt: skip
        runs = [
            {
                "apiVersion": "kaliper.dev/v1alpha1", "kind": "ProfileRun", "metadata": {"name": f"run-{i:03d}"},
                "spec": {
                    "target": {"deploymentRef": {"name": "iris"}}, "payload": {"inline": "{}"},
                    "load": {"closedLoop": {"concurrency": 4}}, "sweep": {"cpu": ["500m", "1"]},
                    "slo": {"latency": [{"percentile": 99, "max": "50ms"}]},
                },
            }
            for i in range(args.runs)
        ]  # fmt: skip
        kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(target))
        env = {
            **os.environ, "KUBECONFIG": str(operator_kubeconfig), "KALIPER_LOG_LEVEL": "warning",
            "KALIPER_LOADGEN_CPU": "10m", "KALIPER_LOADGEN_MEMORY": "64Mi",
        }  # fmt: skip
        with (root / "operator.log").open("wb") as log:
            operator = subprocess.Popen(
                [sys.executable, "-m", "kopf", "run", "--standalone", f"--namespace={NAMESPACE}", "-m",
                 "kaliper.controllers.main"], env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        sampler = Sampler(operator.pid)
        sampler.start()
        time.sleep(5)  # the operator's startup is not part of the figure
        os.environ["KUBECONFIG"] = str(plane.kubeconfig)  # the harness publishes as the admin
        started = time.monotonic()
        kubectl(
            "apply", "-n", NAMESPACE, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": runs})
        )
        played: set[str] = set()
        pool = ThreadPoolExecutor(8)
        last_result = [0.0]  # when the harness handed in the last results document (seconds from the start)

        def play(job: str) -> None:
            trial = job.removesuffix("-lg")
            files = kubectl.json("get", "configmap", f"{trial}-lg", "-n", NAMESPACE)["data"]
            template = root / f"{trial}.yaml"
            template.write_text(files["results.yaml"])
            level = float(yaml.safe_load(files["config.yaml"])["load"]["closedLoop"]["concurrency"])
            publish(result_document(level), template)
            last_result[0] = max(last_result[0], time.monotonic() - started)
            for pod in kubectl.json("get", "pods", "-n", NAMESPACE, "-l", f"job-name={job}")["items"]:
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                ended = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
                container = {"name": "loadgen", "image": "x", "imageID": "", "ready": False, "restartCount": 0}
                status = {"phase": "Succeeded", "containerStatuses": [{**container, "state": {"terminated": ended}}]}
                kubectl("patch", "pod", pod["metadata"]["name"], "-n", NAMESPACE, "--subresource=status",
                        "--type=merge", "-p", json.dumps({"status": status}), check=False)  # fmt: skip

        while True:
            phases = collections.Counter(
                (r.get("status") or {}).get("phase", "New")
                for r in kubectl.json("get", "profileruns", "-n", NAMESPACE)["items"]
            )
            if phases["Succeeded"] + phases["Failed"] == args.runs:
                break
            if time.monotonic() - started > args.timeout:
                raise SystemExit(f"timed out: {dict(phases)}")
            for job in kubectl.json("get", "jobs", "-n", NAMESPACE, "-l", "kaliper.dev/role=loadgen")["items"]:
                name = job["metadata"]["name"]
                if name not in played and (job.get("status") or {}).get("active"):
                    played.add(name)
                    pool.submit(play, name)
            print(f"{time.monotonic() - started:6.0f}s {dict(phases)}", flush=True)
            time.sleep(2)
        elapsed = time.monotonic() - started
        sampler.stop.set()
        sampler.join()
        operator.terminate()
        operator.wait(timeout=30)
        requests = operator_requests(root)
        total = sum(requests.values())
        figures = {
            "runs": args.runs,
            "trials": 2 * args.runs,
            "phases": dict(phases),
            "seconds_until_all_finished": round(elapsed, 1),
            # The floor: the operator cannot finish before the last result is handed in.
            "seconds_until_last_result_handed_in": round(last_result[0], 1),
            "finished_over_last_result": round(elapsed / last_result[0], 2),
            "operator_peak_rss_mib": round(sampler.hwm_kib / 1024, 1),
            "operator_cpu_seconds": round(sampler.cpu_s, 1),
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
