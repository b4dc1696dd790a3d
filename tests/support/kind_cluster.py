"""The suite's one real cluster: a kind cluster made by the kind tutorial's own commands (docs/tutorials/kind.md:
`kind create cluster` from kind-config.yaml, the project's image built and loaded on the workers, Prometheus, the
chart), made once per run of tests/kind and shared by every test that needs real pods (tests/kind).

The tutorial's block runs command by command through `Walkthrough`, which translates the Docker-specific ones
into this machine's podman forms (tests/support/kind.py says why each is needed). Its cluster-wide steps (through
`helm install`) run when a test first asks for the cluster; the rest (the iris model, its ProfileRun and
the reports) is tests/kind/test_walkthrough.py's, which runs first in its group, before any other test changes
the chart's settings.

What the other tests read beside what a user sees: this machine routes the cluster's pod and Service ranges to
the nodes over the kind network (so a test reaches a Service's cluster IP, and a Prometheus on this machine
scrapes the pods), the API server keeps an audit log, and a folder of this machine is mounted in every node
(local PersistentVolumes). All of it goes with the cluster's network when the tier's last test has run.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from kaliper.manifests.modeldeployment import KALIPER_IMAGE
from kaliper.netutil import free_port
from tests.support.builds import waiting_for_build
from tests.support.controlplane import REPO, Kubectl, build_binaries, wait_for
from tests.support.docs_site import bash_blocks
from tests.support.kind import HOST_IP, KindError, KindHost, kind_host, wait_for_line

TUTORIAL = REPO / "docs" / "tutorials" / "kind.md"
IMAGE_SCRIPT = REPO / "hack" / "image" / "build.sh"
# The walkthrough's manifests whose images no registry serves here -> the script that builds each from source.
MANIFEST_IMAGES = {
    "examples/kind/prometheus.yaml": REPO / "hack" / "kind" / "prometheus-image.sh",
    "examples/kind/metrics-server.yaml": REPO / "hack" / "kind" / "metrics-server-image.sh",
}
# An image build on a cold machine: the image's base from debootstrap, llama.cpp compiled (or waited for behind
# its lock) and every dependency's wheel, beside the Go builds on the same two cores. A clean-clone cold run
# here passed 15 minutes in it and was cut off; a warm one takes under a minute.
IMAGE_BUILD_TIMEOUT_S = 3600.0
IMAGE = KALIPER_IMAGE
SERVICE_CIDR = "10.96.0.0/16"  # kind's default serviceSubnet, which kind-config.yaml keeps


def walkthrough_commands() -> list[str]:
    """The commands of the kind tutorial's first block."""
    return bash_blocks(TUTORIAL.read_text())[0]


def cluster_steps() -> tuple[list[str], list[str]]:
    """The tutorial's commands split after `helm install`: the cluster-wide steps, then the walkthrough's own."""
    commands = walkthrough_commands()
    installed = next(i for i, c in enumerate(commands) if c.startswith("helm install")) + 1
    return commands[:installed], commands[installed:]


class ImageBuilds:
    """The image builds the cluster-wide steps load (the project's image, Prometheus's), started together before
    the cluster is made, so they run beside kind's node image and the Go builds: on a cold machine each is minutes
    of compiling (llama.cpp for the project's image), and one after another they kept the kind tier from its first
    test for 40 minutes of a 52-minute phase 1 while the other workers ran out of tests. Warm, the project's image
    is rebuilt after any change to the code (about 50 s), now while the cluster is made."""

    def __init__(self, commands: list[str], logs: Path) -> None:
        self.started: dict[str, tuple[subprocess.Popen, Path]] = {}  # build command -> its process, its output
        for command in commands:
            build = image_build(command)
            if build is not None:
                output = logs / f"build-{len(self.started)}.log"
                with output.open("w") as sink:
                    process = subprocess.Popen(
                        ["bash", "-c", build],
                        cwd=REPO,
                        stdout=sink,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # stop() ends the build's children with it
                    )
                self.started[build] = (process, output)

    def wait(self, build: str) -> str | None:
        """What a started build printed, once it has ended; None where `build` was not started."""
        if build not in self.started:
            return None
        process, output = self.started.pop(build)
        try:
            process.wait(timeout=IMAGE_BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise KindError(f"`{build}` ran past {IMAGE_BUILD_TIMEOUT_S:.0f} s") from None
        said = output.read_text(errors="replace")
        if process.returncode != 0:
            raise KindError(f"`{build}` exited {process.returncode}:\n{said[-3000:]}")
        return said

    def stop(self) -> None:
        """Ends every build not waited for (the cluster failed before it loaded that image)."""
        for process, _ in self.started.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.started.clear()


def image_build(command: str) -> str | None:
    """The build script behind a step of the walkthrough that needs an image no registry serves here."""
    words = shlex.split(command, comments=True)
    if words[:2] == ["docker", "build"]:
        return f"bash {IMAGE_SCRIPT} {words[words.index('-t') + 1]}"
    if words[:3] == ["kubectl", "apply", "-f"] and words[3] in MANIFEST_IMAGES:
        return f"bash {MANIFEST_IMAGES[words[3]]}"
    return None


class Walkthrough:
    """Runs the tutorial's commands on this machine, translating the Docker-specific ones."""

    def __init__(self, host: KindHost, builds: ImageBuilds) -> None:
        self.host = host
        self.archives: dict[str, str] = {}  # image -> the archive hack/image/build.sh wrote for it
        self.outputs: dict[str, str] = {}  # command -> what it printed
        self.builds = builds

    def shell(self, command: str, timeout: float = 900) -> str:
        result = subprocess.run(
            ["bash", "-c", command], cwd=REPO, env=self.host.env(), capture_output=True, text=True, timeout=timeout
        )
        if result.returncode != 0:
            raise KindError(f"`{command}` exited {result.returncode}:\n{(result.stdout + result.stderr)[-3000:]}")
        return result.stdout

    def built(self, build: str) -> str:
        """The last line an image build printed (the archive it wrote): the one started beside the cluster's
        creation, waited for, or run now where none was started."""
        with waiting_for_build():
            said = self.builds.wait(build)
            if said is None:
                said = self.shell(build, timeout=IMAGE_BUILD_TIMEOUT_S)
            return said.strip().splitlines()[-1]

    def run(self, command: str) -> None:
        words = shlex.split(command, comments=True)
        if words[:3] == ["kind", "create", "cluster"]:
            self.host.create_cluster(*words[3:])
            out = ""
        elif words[:2] == ["docker", "build"]:
            image = words[words.index("-t") + 1]
            out = self.built(f"bash {IMAGE_SCRIPT} {image}")
            self.archives[image] = out
        elif words[:3] == ["kind", "load", "docker-image"]:
            out = self.host.kind("load", "image-archive", self.archives[words[3]], *words[4:])
        elif words[:2] == ["kubectl", "get"] and "-w" in words:
            process = subprocess.Popen(
                words, cwd=REPO, env=self.host.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            out = wait_for_line(process, ("Succeeded", "Failed"), timeout=600)
        else:
            if (build := image_build(command)) is not None:
                # Here no registry serves the manifest's image (Prometheus's, metrics-server's): load the one built
                # from its source first.
                archive = self.built(build)
                self.host.kind("load", "image-archive", archive, "--name", self.host.name, "--nodes", self.host.workers)
            out = self.shell(command)
        self.outputs[command] = out


@dataclass
class KindCluster:
    """The kind tier's cluster, as the tests of tests/kind use it."""

    host: KindHost
    steps: Walkthrough
    _credentials: tuple[Path, Path] | None = field(default=None, repr=False)

    @property
    def kubectl(self) -> Kubectl:
        return self.host.kubectl

    @property
    def kubeconfig(self) -> Path:
        return self.host.kubeconfig

    @property
    def shared(self) -> Path:
        """A folder of this machine at the same path in every node."""
        return self.host.shared

    @property
    def workers(self) -> list[str]:
        return self.host.workers.split(",")

    def helm(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Helm (built with the control plane's binaries) against this cluster."""
        return subprocess.run(
            [str(build_binaries("helm") / "helm"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def tag_image(self, image: str, tag: str) -> None:
        """Another tag for an image the workers hold (what a registry would serve as the next release's)."""
        for worker in self.workers:
            subprocess.run(
                ["podman", "exec", worker, "ctr", "-n", "k8s.io", "images", "tag", "--force", image, tag],
                check=True,
                capture_output=True,
                timeout=60,
            )

    def pod_cgroup(self, pod: dict, container: str, controller: str) -> Path:
        return self.host.pod_cgroup(pod, container, controller)

    def audit_events(self) -> list[dict]:
        """The API server's audit log so far (request metadata: who did what to which object)."""
        path = self.host.audit_log
        return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []

    def node_addresses(self) -> dict[str, str]:
        """Each node's address on the kind network, by name."""
        nodes = self.kubectl.json("get", "nodes")["items"]
        return {
            n["metadata"]["name"]: next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP")
            for n in nodes
        }

    def kubelets(self) -> list[str]:
        """The workers' kubelets (host:port), whose cAdvisor Prometheus scrapes."""
        addresses = self.node_addresses()
        return [f"{addresses[name]}:10250" for name in self.workers]

    def admin_credentials(self) -> tuple[Path, Path]:
        """The kubeconfig's client certificate and key as files (what a Prometheus on this machine shows the
        kubelets, as kube-prometheus-stack shows them its service account's)."""
        if self._credentials is None:
            user = yaml.safe_load(self.kubeconfig.read_text())["users"][0]["user"]
            cert, key = self.host.root / "admin.crt", self.host.root / "admin.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            key.chmod(0o600)
            self._credentials = cert, key
        return self._credentials

    def route_cluster_ranges(self) -> None:
        """Routes from this machine into the cluster over the kind network: each node's pod range to that node,
        the Service range to the first worker (whose kube-proxy forwards it, masqueraded, to a pod)."""
        addresses = self.node_addresses()
        for node in self.kubectl.json("get", "nodes")["items"]:
            cidr = node["spec"]["podCIDR"]
            subprocess.run(["ip", "route", "replace", cidr, "via", addresses[node["metadata"]["name"]]], check=True)
        subprocess.run(["ip", "route", "replace", SERVICE_CIDR, "via", addresses[self.workers[0]]], check=True)

    def service_address(self, namespace: str, name: str, port: int = 80, timeout: float = 60) -> str:
        """The Service's cluster IP, once a connection to it from this machine goes through (a Ready Deployment
        is not enough: kube-proxy writes its rules on its next sync)."""
        cluster_ip = self.kubectl.json("get", "service", name, "-n", namespace)["spec"]["clusterIP"]

        def connects() -> bool:
            with contextlib.suppress(OSError), socket.create_connection((cluster_ip, port), timeout=2):
                return True
            return False

        wait_for(connects, timeout, f"a connection to Service {namespace}/{name} ({cluster_ip}:{port})", interval=0.5)
        return cluster_ip


@contextlib.contextmanager
def files_for_pods(folder: Path) -> Iterator[str]:
    """`folder` served over HTTP on this machine's address on the kind network (the only place outside the
    cluster that pods can reach): its base URL."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer((HOST_IP, free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{HOST_IP}:{server.server_address[1]}"
    finally:
        server.shutdown()


@contextlib.contextmanager
def cluster_session() -> Iterator[KindCluster]:
    """The kind cluster the tutorial's cluster-wide steps make, with this machine's routes into it; deleted, with
    every setting of this machine put back, afterwards."""
    commands = cluster_steps()[0]
    with tempfile.TemporaryDirectory(prefix="kaliper-image-builds-") as logs:
        builds = ImageBuilds(commands, Path(logs))
        try:
            with kind_host() as host:
                steps = Walkthrough(host, builds)
                for command in commands:
                    steps.run(command)
                cluster = KindCluster(host, steps)
                cluster.route_cluster_ranges()
                yield cluster
        finally:
            builds.stop()
