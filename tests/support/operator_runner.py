"""The operator in the test process (kopf's KopfRunner) and a stand-in for what containers would do in a
cluster: the test control plane has no kubelet, so kwok reports pods Running and the tests play the rest
through the real API. A load-generator "pod" is played by running the very command its Job names (the real
`python -m kaliper.loadgen`, with the config the operator wrote) here, against a server on loopback, and then
moving the pod to Succeeded or Failed through its status, as a kubelet would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import yaml
from kopf.testing import KopfRunner

from kaliper.manifests.profilerun import CONFIG_DIR, LABEL_ROLE, LABEL_RUN, LABEL_TRIAL, trial_name
from tests.support.controlplane import ControlPlaneError, Kubectl

# The tests' servers and Prometheus listen on loopback, where a cluster's tenancy policy refuses to send load
# or queries by default (kaliper.profiling.tenancy): the test operators are allowed them, as an admin's values
# would (tenancy.targets.cidrs, tenancy.prometheusUrls). tests/cluster/test_tenancy.py runs one without.
LOOPBACK_ALLOWED = {"KALIPER_ALLOW_TARGET_CIDRS": "127.0.0.0/8", "KALIPER_ALLOW_PROMETHEUS_URLS": "*"}


@contextmanager
def running_operator(kubectl: Kubectl, allowed: dict[str, str] | None = None) -> Iterator[KopfRunner]:
    """The operator, as `kopf run -A --standalone -m kaliper.controllers.main` runs it, until the block ends;
    `allowed`: its tenancy settings (default: loopback targets and any Prometheus)."""
    allowed = LOOPBACK_ALLOWED if allowed is None else allowed
    saved = {name: os.environ.get(name) for name in {*LOOPBACK_ALLOWED, *allowed}}
    os.environ["KUBECONFIG"] = str(kubectl.kubeconfig)
    for name in LOOPBACK_ALLOWED:
        os.environ.pop(name, None)
    os.environ.update(allowed)
    from kaliper.controllers import kube

    kube.api_client.cache_clear()
    args = ["run", "--all-namespaces", "--standalone", "-m", "kaliper.controllers.main"]
    try:
        with KopfRunner(args, timeout=60) as runner:
            yield runner
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
    assert runner.exception is None, runner.output


def _relocate(path: str, root: str) -> str:
    """A path of the load-generator container, in a local directory instead."""
    for prefix in (CONFIG_DIR, "/tmp"):
        if path.startswith(prefix + "/"):
            return root + path[len(prefix) :]
    return path


@contextmanager
def operator_process(kubectl: Kubectl, log: Path) -> Iterator[subprocess.Popen]:
    """The operator as a process of its own (`kopf run`), so a test can SIGKILL it mid-step."""
    env = {**os.environ, **LOOPBACK_ALLOWED, "KUBECONFIG": str(kubectl.kubeconfig), "KALIPER_LOG_LEVEL": "debug"}
    command = [
        sys.executable,
        "-m",
        "kopf",
        "run",
        "--all-namespaces",
        "--standalone",
        "-m",
        "kaliper.controllers.main",
    ]
    with log.open("ab") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


class Cluster:
    """Reads and plays trial objects of one ProfileRun."""

    def __init__(self, kubectl: Kubectl, namespace: str, run: str) -> None:
        self.kubectl, self.namespace, self.run = kubectl, namespace, run

    def get(self, *args: str) -> dict:
        return self.kubectl.json("get", *args, "-n", self.namespace)

    def status(self) -> dict:
        return self.get("profilerun", self.run).get("status") or {}

    def trial_phase(self, index: int) -> str | None:
        trials = self.status().get("trials") or []
        return next((t.get("phase") for t in trials if t["index"] == index), None)

    def wait_phase(self, phase: str, timeout: float = 90) -> dict:
        try:
            self.kubectl.wait_for(
                lambda: self.status().get("phase") == phase, timeout=timeout, what=f"{self.run} {phase}"
            )
        except ControlPlaneError as exc:
            raise ControlPlaneError(f"{exc}; status: {json.dumps(self.status(), indent=1)}") from None
        return self.status()

    def wait_trial(self, index: int, *phases: str, timeout: float = 60) -> None:
        try:
            self.kubectl.wait_for(
                lambda: self.trial_phase(index) in phases, timeout=timeout, what=f"trial {index} of {self.run} {phases}"
            )
        except ControlPlaneError as exc:
            raise ControlPlaneError(f"{exc}; status: {json.dumps(self.status(), indent=1)}") from None

    def pods(self, index: int, role: str) -> list[dict]:
        selector = f"{LABEL_RUN}={self.run},{LABEL_TRIAL}={index}"
        return [p for p in self.get("pods", "-l", selector)["items"] if p["metadata"]["labels"].get(LABEL_ROLE) == role]

    def wait_pods(self, index: int, role: str, count: int = 1, timeout: float = 60) -> list[dict]:
        def running() -> bool:
            return sum((p.get("status") or {}).get("phase") == "Running" for p in self.pods(index, role)) >= count

        self.kubectl.wait_for(running, timeout=timeout, what=f"{count} running {role} pods of trial {index}")
        return self.pods(index, role)

    def owned(self) -> list[str]:
        """Trial objects of the run still present: deployments, jobs, pods (terminating ones included)."""
        selector = f"{LABEL_RUN}={self.run}"
        found = self.get("modeldeployments,jobs,pods,services", "-l", selector)["items"]
        return [f"{o['kind']}/{o['metadata']['name']}" for o in found]

    def play_load(self, index: int, url: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess:
        """Run the trial's load generator here, exactly as its Job would (only the target URL differs: the
        cluster's Service is not reachable from this machine), then end its pod as a kubelet would."""
        name = trial_name(self.run, index)
        job = self.get("job", f"{name}-lg")
        pod = job["spec"]["template"]["spec"]
        command = pod["containers"][0]["command"]
        files = self.get("configmap", f"{name}-lg")["data"]
        with tempfile.TemporaryDirectory(prefix="kaliper-lg-") as root:
            text = files["config.yaml"]
            # The user's ConfigMaps the Job mounts (prompts datasets, tokenizers), as a kubelet would mount them.
            mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0].get("volumeMounts", [])}
            for volume in pod.get("volumes", []):
                if "configMap" not in volume or volume["name"] == "config":
                    continue
                local = Path(root, volume["name"])
                local.mkdir()
                for key, value in self.get("configmap", volume["configMap"]["name"])["data"].items():
                    (local / key).write_text(value)
                text = text.replace(mounts[volume["name"]] + "/", f"{local}/")
            config = yaml.safe_load(text)
            config["url"] = url
            Path(root, "config.yaml").write_text(yaml.safe_dump(config))
            Path(root, "results.yaml").write_text(files["results.yaml"])
            local = [_relocate(arg, root) for arg in command]
            assert local[:3] == ["python", "-m", "kaliper.loadgen"], command
            env = {**os.environ, "KUBECONFIG": str(kubeconfig or self.kubectl.kubeconfig)}
            done = subprocess.run([sys.executable, *local[1:]], capture_output=True, text=True, env=env, timeout=120)
        self.end_pods(index, "loadgen", 0 if done.returncode == 0 else done.returncode)
        return done

    def end_pods(self, index: int, role: str, exit_code: int = 0, message: str = "") -> None:
        """Move the trial's pods of this role to Succeeded (exit code 0) or Failed, through the status API."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for pod in self.pods(index, role):
            container = pod["spec"]["containers"][0]
            terminated = {
                "exitCode": exit_code,
                "reason": "Completed" if exit_code == 0 else "Error",
                "message": message,
                "startedAt": now,
                "finishedAt": now,
            }
            status = {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
                "containerStatuses": [
                    {
                        "name": container["name"],
                        "image": container["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"terminated": terminated},
                    }
                ],
            }
            patched = self.patch_pod_status(pod, status)
            # The operator may already have torn the trial down once the results were in: nothing to end.
            assert patched.returncode == 0 or "NotFound" in patched.stderr, patched.stderr

    def patch_pod_status(self, pod: dict, status: dict) -> subprocess.CompletedProcess:
        """Write a pod's status as its kubelet would (the status subresource)."""
        return self.kubectl(
            "patch", "pod", pod["metadata"]["name"], "-n", self.namespace, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}), check=False,
        )  # fmt: skip
