"""Many ProfileRuns on the real test control plane, with the operator as a process of its own and this module
playing what pods would do: kwok plays the nodes; for each load-generator Job a results document is handed in
through the very publish code the Job runs (`kaliper.report.publish`), and the Job's pod is ended through the
status API as a kubelet would. Shared by bench/operator_scale.py, bench/operator_outage.py and the outage tests
(tests/outage/test_api_server_outage.py).

The operator runs under a service account of its own, so the API server's audit log attributes its requests;
its CPU and peak memory are read from /proc.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from kaliper.report.publish import publish
from kaliper.report.schema import GeneratorInfo, LatencyFigures, LoadTestResult, PercentileFigure
from tests.support.controlplane import REPO, Kubectl, api_client, killed_with_this_process, stop_process
from tests.support.reports import make_stage

OPERATOR_ACCOUNT = "kaliper-under-test"
# (connect, read) seconds for the player's requests: a frozen API server fails them, as kubectl's handshake
# timeout would, instead of holding the harness's loop.
REQUEST_TIMEOUT = (5.0, 15.0)
TARGET = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {"name": "iris"},
    "spec": {"model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"}},
}


def profile_run(name: str, cpus: list[str]) -> dict:
    """A ProfileRun of the iris target with one trial per CPU limit."""
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": name},
        "spec": {
            "target": {"deploymentRef": {"name": "iris"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 4}},
            "sweep": {"cpu": cpus},
            "slo": {"latency": [{"percentile": 99, "max": "50ms"}]},
        },
    }


def result_document(level: float) -> str:
    """A load generator's results: 3,000 requests in 30 s, p50 8 ms, p99 20 ms (inside the runs' 50 ms)."""
    latency = LatencyFigures(
        count=3000,
        mean_ms=9.0,
        percentiles=[PercentileFigure(percentile=p, value_ms=v, count=3000) for p, v in ((50, 8.0), (99, 20.0))],
    )
    stage = make_stage(latency, throughput_rps=100.0, level=level, requests=3000, measured_s=30)
    stage.started_at = datetime.now(UTC) - timedelta(seconds=31)
    result = LoadTestResult(
        target="http://iris",
        started_at=stage.started_at,
        finished_at=datetime.now(UTC),
        generator=GeneratorInfo(processes=1, workers=0, locust_version="played"),
        stages=[stage],
    )
    return result.model_dump_json(by_alias=True)


def prepare_namespace(kubectl: Kubectl, namespace: str, root: Path) -> Path:
    """The runs' namespace with the target, nodes with room for every trial pod at once, and a service account
    for the operator (cluster-admin, as the chart's ClusterRole is for these kinds); returns its kubeconfig."""
    for node in ("kwok-node-0", "kwok-node-1"):
        big = {"cpu": "1000", "memory": "4Ti", "pods": "2000", "nvidia.com/gpu": "4"}
        kubectl("patch", "node", node, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"capacity": big, "allocatable": big}}))  # fmt: skip
    if kubectl("get", "namespace", namespace, check=False).returncode != 0:
        kubectl("create", "namespace", namespace)
    # The controller manager makes the namespace's default account, but after an outage test its informers may
    # still be backing off (client-go's reflector waits up to a minute between lists): a suite run waited more
    # than 60 s for it. The runs' pods only need the account to exist, so make it when it is not there yet.
    if kubectl("get", "sa", "default", "-n", namespace, check=False).returncode != 0:
        kubectl("create", "serviceaccount", "default", "-n", namespace, check=False)  # or it was just made
    kubectl("get", "sa", "default", "-n", namespace)
    kubectl("create", "serviceaccount", OPERATOR_ACCOUNT, "-n", namespace)
    kubectl("create", "clusterrolebinding", f"{OPERATOR_ACCOUNT}-{namespace}", "--clusterrole=cluster-admin",
            f"--serviceaccount={namespace}:{OPERATOR_ACCOUNT}")  # fmt: skip
    kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(TARGET))
    return kubectl.token_kubeconfig(OPERATOR_ACCOUNT, namespace, root / "operator.kubeconfig", "3h")


def apply_runs(kubectl: Kubectl, namespace: str, runs: list[dict], batch: int = 50) -> None:
    """Create the runs, `batch` per request: one `kubectl apply` of a thousand objects outlasts its timeout on
    a busy two-core machine."""
    for start in range(0, len(runs), batch):
        items = runs[start : start + batch]
        kubectl(
            "apply", "-n", namespace, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        )


class ProcessSampler(threading.Thread):
    """A process's CPU seconds and peak memory (VmHWM), read from /proc once a second."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.peak_cpu_share = 0.0
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
            last, last_t = cpu, now
            self.hwm_kib = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


@contextmanager
def operator_process(kubeconfig: Path, log: Path, namespace: str, **env: str) -> Iterator[subprocess.Popen]:
    """`kopf run` of the operator watching one namespace, its output in `log`; stopped (SIGTERM, then SIGKILL)
    however the block ends, and killed by the kernel if the harness itself is killed: no harness leaves an
    operator behind."""
    environment = {**os.environ, "KUBECONFIG": str(kubeconfig), "KALIPER_LOG_LEVEL": "info", **env}
    command = [sys.executable, "-m", "kopf", "run", "--standalone", f"--namespace={namespace}",
               "-m", "kaliper.controllers.main"]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            preexec_fn=killed_with_this_process(),
        )
    try:
        yield process
    finally:
        stop_process(process, grace_s=30)


class LoadGeneratorPlayer:
    """Plays every load-generator Job of the namespace once it is active: its results handed in, its pod
    ended. `play_new()` is called in the harness's loop; it tolerates an API server that is away (a Job whose
    play failed is played again at the next call). It talks to the API server in this process (the Python
    client, as the Job's publish code does): a kubectl process per listing and per Job cost more CPU than the
    operator under test on a two-core machine."""

    def __init__(
        self,
        namespace: str,
        root: Path,
        admin_kubeconfig: Path,
        results: Callable[[str, dict], str] | None = None,
    ) -> None:
        """`results(trial, config)`: the results document a trial's load generator hands in, from the trial's
        name and the config the operator wrote it; by default result_document at the config's concurrency."""
        from kubernetes import client

        self.namespace, self.root = namespace, root
        self.results = results or (
            lambda trial, config: result_document(float(config["load"]["closedLoop"]["concurrency"]))
        )
        self.played: set[str] = set()  # the uids of the Jobs played
        self.uids: dict[str, set[str]] = collections.defaultdict(set)  # Job name -> the uids it had
        self._pool = ThreadPoolExecutor(8)
        self._guard = threading.Lock()
        self.last_result_at = 0.0  # monotonic time of the last results document handed in
        os.environ["KUBECONFIG"] = str(admin_kubeconfig)  # publish() reads it, as the Job reads its own
        api = api_client(admin_kubeconfig)
        self._jobs, self._core = client.BatchV1Api(api), client.CoreV1Api(api)
        self._runs = client.CustomObjectsApi(api)

    def play_new(self, at_most: int | None = None) -> None:
        """Play the Jobs not played yet (`at_most` of them: a test that wants runs still waiting on their load
        generators when it acts, whatever the machine's speed)."""
        try:
            listed = self._jobs.list_namespaced_job(
                self.namespace, label_selector="kaliper.dev/role=loadgen", _request_timeout=REQUEST_TIMEOUT
            )
        except Exception:  # the API server away, as a kubelet would meet it: listed again at the next call
            return
        for job in listed.items:
            name, uid = job.metadata.name, job.metadata.uid  # a Job made again is played again
            with self._guard:
                if uid in self.played or not (job.status and job.status.active):
                    continue
                if at_most is not None:
                    if at_most <= 0:
                        return
                    at_most -= 1
                self.played.add(uid)
                self.uids[name].add(uid)
            self._pool.submit(self._play, name, uid)

    def jobs(self) -> list[str]:
        """The names of the namespace's load-generator Jobs (none while the API server does not answer)."""
        try:
            listed = self._jobs.list_namespaced_job(
                self.namespace, label_selector="kaliper.dev/role=loadgen", _request_timeout=REQUEST_TIMEOUT
            )
        except Exception:
            return []
        return [job.metadata.name for job in listed.items]

    def phases(self) -> collections.Counter[str] | None:
        """The runs' phases, counted (None while the API server does not answer)."""
        try:
            listed = self._runs.list_namespaced_custom_object(
                "kaliper.dev", "v1alpha1", self.namespace, "profileruns", _request_timeout=REQUEST_TIMEOUT
            )
        except Exception:
            return None
        return collections.Counter((r.get("status") or {}).get("phase", "New") for r in listed["items"])

    def _play(self, job: str, uid: str) -> None:
        try:
            self._hand_in(job)
        except Exception:
            with self._guard:
                self.played.discard(uid)  # played again at the next call

    def _hand_in(self, job: str) -> None:
        trial = job.removesuffix("-lg")
        files = self._core.read_namespaced_config_map(f"{trial}-lg", self.namespace, _request_timeout=REQUEST_TIMEOUT)
        template = self.root / f"{trial}.yaml"
        template.write_text(files.data["results.yaml"])
        publish(self.results(trial, yaml.safe_load(files.data["config.yaml"])), template)
        self.last_result_at = max(self.last_result_at, time.monotonic())
        pods = self._core.list_namespaced_pod(
            self.namespace, label_selector=f"job-name={job}", _request_timeout=REQUEST_TIMEOUT
        )
        for pod in pods.items:
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            ended = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
            container = {"name": "loadgen", "image": "x", "imageID": "", "ready": False, "restartCount": 0}
            status = {"phase": "Succeeded", "containerStatuses": [{**container, "state": {"terminated": ended}}]}
            self._core.patch_namespaced_pod_status(
                pod.metadata.name,
                self.namespace,
                {"status": status},
                _content_type="application/merge-patch+json",
                _request_timeout=REQUEST_TIMEOUT,
            )

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def log_lines(path: Path) -> int:
    with path.open("rb") as log:
        return sum(1 for _ in log)
