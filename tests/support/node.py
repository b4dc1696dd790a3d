"""A real Kubernetes node for the test suite: containerd, runc, the CNI bridge, a kubelet, kube-proxy and
CoreDNS, beside a control plane of its own (tests/support/controlplane.py). Pods get real CFS quotas and
memory limits; the kubelet's cAdvisor serves `/metrics/cadvisor`.

Isolation (shared/real-node-notes.md): the node's processes live in a network namespace and a mount
namespace of their own, held open by one `sleep` process. The network namespace has no route out: its only
link is one veth pair to this machine (HOST_IP here, NODE_IP there), so pods and Services can reach the node,
each other and the control plane on HOST_IP, and nothing else. Its iptables chains (kube-proxy, the CNI
bridge's masquerade) are the namespace's own; the host's stay untouched. The host gets routes for the pod
and Service ranges into the veth, so nothing on this machine sends cluster traffic out of its own interface.
In the mount namespace, /run and /var/log are fresh tmpfs and every other path the node writes lies under one
throw-away directory, so when the namespaces die their mounts die with them.

What the node does change on the host, and teardown restores: the kubelet's kernel tunables (vm.* and
kernel.* sysctls) and the cgroups it creates under `kubepods`. `stop()` checks that no process, mount,
cgroup, link or sysctl of the node is left, and `sweep_leftovers()` clears what a killed test run left.

By hand:  python tests/support/node.py up     (prints the kubeconfig; Ctrl-C stops it)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":  # run as a script: make the `tests` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kaliper.manifests.modeldeployment import KALIPER_IMAGE
from tests.support.controlplane import (
    BUILD_SCRIPT,
    REPO,
    ControlPlane,
    ControlPlaneError,
    _pids_mentioning,
    build_binaries,
    die_with_this_process,
    interrupt,
    log_tail,
    spawn_logged,
    stop_process,
)
from tests.support.paths import CACHE

HOST_IP = "10.213.0.1"  # this machine's end of the veth: the control plane and Prometheus listen here
NODE_IP = "10.213.0.2"  # the node's end: the kubelet, CoreDNS and NodePorts
LINK_PREFIX = 30
POD_CIDR = "10.213.64.0/24"
SERVICE_CIDR = "10.213.96.0/20"
NODE_NAME = "kaliper-node"
HOST_LINK, NODE_LINK, BRIDGE = "kaliper-h0", "kaliper-n0", "kaliper-cni0"
# The chart's default image, as the README's kind walkthrough builds it: the kind tier finds it built and archived.
IMAGE = KALIPER_IMAGE
IMAGE_SCRIPT = REPO / "hack" / "image" / "build.sh"
PAUSE_SCRIPT = REPO / "hack" / "image" / "pause.sh"

# What the kubelet sets on the host (its "kernel tunables"); teardown puts back what was there.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    # Not the kubelet's: the node turns forwarding on in its own network namespace only, and the host's must
    # be as it was whatever ran beside it (CI and the next session inherit it).
    "net/ipv4/ip_forward",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The host's settings as the node found them, kept here until it puts them back: a run killed before its
# teardown (SIGKILL, or a CI timeout) leaves the file, and the next node's start puts them back from it.
SYSCTLS_FOUND = CACHE / "node-host-sysctls.json"


class NodeError(ControlPlaneError):
    """The node could not be built, started or cleaned up; the message says which part and why."""


def _run(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise NodeError(f"{' '.join(args)} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return result


def build_images() -> tuple[Path, Path, str]:
    """The project's image from its Dockerfile and the sandbox image: (image archive, pause archive, pause
    name). Both scripts reuse what is cached; the first build takes minutes."""
    image = _run("bash", str(IMAGE_SCRIPT), IMAGE, timeout=1800).stdout.split()[-1]
    pause_archive, pause_name = _run("bash", str(PAUSE_SCRIPT)).stdout.split()[-2:]
    return Path(image), Path(pause_archive), pause_name


def _read_sysctls() -> dict[str, str]:
    return {name: (Path("/proc/sys") / name).read_text().strip() for name in KUBELET_SYSCTLS}


def _restore_sysctls(found: dict[str, str]) -> list[str]:
    """Put back each setting that differs from what was found; returns what was put back."""
    restored = []
    for name, value in found.items():
        if (Path("/proc/sys") / name).read_text().strip() != value:
            (Path("/proc/sys") / name).write_text(value)
            restored.append(f"{name}={value}")
    return restored


def _kubepods_cgroups() -> list[Path]:
    """Every cgroup under `kubepods` in every v1 hierarchy, deepest first (the order rmdir needs)."""
    found = []
    for hierarchy in CGROUP_ROOT.iterdir():
        top = hierarchy / "kubepods"
        if top.is_dir():
            found += [Path(d) for d, _, _ in os.walk(top)]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _kill_cgroup_members(cgroups: list[Path]) -> int:
    killed = 0
    for cgroup in cgroups:
        with contextlib.suppress(OSError):
            for pid in (cgroup / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
                    killed += 1
    return killed


def _kill_all(pids: list[int]) -> int:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def _pids_in_namespace(ns_link: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if os.readlink(entry / "ns" / "mnt") == ns_link:
                    found.append(int(entry.name))
    return found


def sweep_leftovers() -> list[str]:
    """Remove what a node of an earlier, killed test run left behind, and put back the host's settings as that
    run found them; returns what it found."""
    found = []
    if SYSCTLS_FOUND.exists():
        found += _restore_sysctls(json.loads(SYSCTLS_FOUND.read_text()))
        SYSCTLS_FOUND.unlink()
    cgroups = _kubepods_cgroups()
    if cgroups:
        found.append(f"{len(cgroups)} kubepods cgroups")
        for _ in range(50):
            if _kill_cgroup_members(cgroups) == 0:
                break
            time.sleep(0.1)
        for cgroup in cgroups:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
    if _run("ip", "link", "show", HOST_LINK, check=False).returncode == 0:
        found.append(f"link {HOST_LINK}")
        _run("ip", "link", "delete", HOST_LINK, check=False)
    return found


@dataclass
class Node:
    """A control plane on HOST_IP with one real node behind a veth; `stop()` removes every trace of both."""

    bin_dir: Path
    image_archive: Path
    pause_archive: Path
    pause_image: str
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kaliper-node-", dir="/var/tmp")))
    plane: ControlPlane | None = None
    holder: subprocess.Popen | None = None
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    sysctls: dict[str, str] = field(default_factory=dict)
    builder: subprocess.Popen | None = None  # the background build of the binaries the node did not start with

    @property
    def kubectl(self):  # type: ignore[no-untyped-def]
        assert self.plane is not None and self.plane.kubectl is not None
        return self.plane.kubectl

    @property
    def kubeconfig(self) -> Path:
        assert self.plane is not None and self.plane.kubeconfig is not None
        return self.plane.kubeconfig

    def start(self, timeout: float = 120.0) -> Node:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        leftovers = sweep_leftovers()
        if leftovers:
            print(f"node: removed leftovers of an earlier run: {', '.join(leftovers)}", file=sys.stderr)
        self.sysctls = _read_sysctls()
        SYSCTLS_FOUND.parent.mkdir(parents=True, exist_ok=True)
        SYSCTLS_FOUND.write_text(json.dumps(self.sysctls))
        self._make_namespaces()
        self.plane = ControlPlane(
            self.bin_dir,
            address=HOST_IP,
            service_cidr=SERVICE_CIDR,
            fake_nodes=False,
            audit_log=self.root / "audit.log",  # tests read who created what
        ).start(timeout)
        self._write_configs()
        self._spawn("containerd", "containerd", f"--config={self.root / 'containerd.toml'}")
        self._wait_until(lambda: self._in_node("ctr", "version").returncode == 0, timeout, "containerd")
        for archive in (self.pause_archive, self.image_archive):
            self._in_node_checked("ctr", "-n", "k8s.io", "images", "import", "--no-unpack=false", str(archive))
        self._spawn("coredns", str(self.bin_dir / "coredns"), "-conf", str(self.root / "Corefile"))
        self._spawn(
            "kubelet",
            str(self.bin_dir / "kubelet"),
            f"--config={self.root / 'kubelet.yaml'}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.root / 'kubelet'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_IP}",
            "--v=1",
        )
        self._spawn("kube-proxy", str(self.bin_dir / "kube-proxy"), f"--config={self.root / 'kube-proxy.yaml'}")
        self._wait_until(self._node_ready, timeout, f"node {NODE_NAME} to become Ready")

    # --- namespaces and network ----------------------------------------------------------------------

    def _make_namespaces(self) -> None:
        self.holder = subprocess.Popen(
            ["unshare", "--net", "--mount", "--propagation", "private", "sleep", "infinity"],
            preexec_fn=die_with_this_process,
            stdin=subprocess.DEVNULL,
        )
        self._wait_until(
            lambda: (
                os.readlink(f"/proc/{self.holder.pid}/ns/net") != os.readlink("/proc/self/ns/net")
                and os.readlink(f"/proc/{self.holder.pid}/exe").endswith("sleep")
            ),
            10,
            "the node's namespaces",
        )
        pid = str(self.holder.pid)
        _run("ip", "link", "add", HOST_LINK, "type", "veth", "peer", "name", NODE_LINK, "netns", pid)
        _run("ip", "addr", "add", f"{HOST_IP}/{LINK_PREFIX}", "dev", HOST_LINK)
        _run("ip", "link", "set", HOST_LINK, "up")
        # Cluster addresses from this machine go into the veth, never out of its own interface.
        for cidr in (POD_CIDR, SERVICE_CIDR):
            _run("ip", "route", "add", cidr, "via", NODE_IP, "dev", HOST_LINK)
        self._in_node_checked(
            "sh",
            "-ec",
            f"""
            mount -t tmpfs -o mode=755 kaliper-run /run
            mount -t tmpfs -o mode=755 kaliper-log /var/log
            ip link set lo up
            ip addr add {NODE_IP}/{LINK_PREFIX} dev {NODE_LINK}
            ip link set {NODE_LINK} up
            sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
            """,
        )

    def _nsenter(self) -> list[str]:
        assert self.holder is not None
        return ["nsenter", f"--target={self.holder.pid}", "--net", "--mount", "--"]

    def _in_node(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run a command on the node (its network and mount namespaces)."""
        return subprocess.run([*self._nsenter(), *args], capture_output=True, text=True, timeout=timeout)

    def _in_node_checked(self, *args: str) -> str:
        result = self._in_node(*args)
        if result.returncode != 0:
            raise NodeError(f"on the node, {' '.join(args[:4])} failed:\n{result.stderr[-3000:]}")
        return result.stdout

    # --- configuration -------------------------------------------------------------------------------

    def _write_configs(self) -> None:
        assert self.plane is not None
        pki = self.plane.root / "pki"
        cni = self.root / "cni"
        cni.mkdir()
        (cni / "10-kaliper.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": "kaliper",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": True,  # pods reach HOST_IP as NODE_IP, the only address it can answer
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": POD_CIDR}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(self.root / "cni-ipam"),
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                }
            )
        )
        (self.root / "containerd.toml").write_text(
            f"""version = 2
root = "{self.root / "containerd"}"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{self.pause_image}"
  # root here may not set oom_score_adj below its own (no CAP_SYS_RESOURCE); runc fails without this.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
"""
        )
        (self.root / "resolv.conf").write_text("")
        kubelet = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # kubelet 1.35 refuses cgroup v1 otherwise; this machine mounts v1
            "cgroupDriver": "cgroupfs",
            "failSwapOn": False,
            "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
            "address": NODE_IP,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [NODE_IP],
            "clusterDomain": "cluster.local",
            "resolvConf": str(self.root / "resolv.conf"),
            # Images are imported, never pulled: keep garbage collection away from them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "volumePluginDir": str(self.root / "volume-plugins"),
            "serializeImagePulls": False,
            "syncFrequency": "10s",
        }
        (self.root / "kubelet.yaml").write_text(json.dumps(kubelet))
        proxy = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "hostnameOverride": NODE_NAME,
            "bindAddress": NODE_IP,
            "clusterCIDR": POD_CIDR,
            "metricsBindAddress": "127.0.0.1:10249",
            "healthzBindAddress": "127.0.0.1:10256",
            # Zero leaves the kernel's conntrack settings alone (some of them are host-wide).
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False},
            "nodePortAddresses": [f"{NODE_IP}/32"],
        }
        (self.root / "kube-proxy.yaml").write_text(json.dumps(proxy))
        # Cluster DNS: Service names only; nothing is forwarded, because nothing outside may be asked.
        (self.root / "Corefile").write_text(
            f""".:53 {{
    bind {NODE_IP}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {self.kubeconfig}
        pods insecure
    }}
    cache 5
}}
"""
        )

    # --- processes -----------------------------------------------------------------------------------

    def _spawn(self, name: str, *args: str) -> None:
        self.processes[name] = spawn_logged(self.root, name, [*self._nsenter(), *args])

    def log_tail(self, name: str, lines: int = 30) -> str:
        return log_tail(self.root, name, lines)

    def _wait_until(self, predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise NodeError(f"{name} exited with code {process.returncode}:\n{self.log_tail(name)}")
            with contextlib.suppress(Exception):
                if predicate():
                    return
            time.sleep(0.25)
        raise NodeError(f"timed out after {timeout:.0f}s waiting for {what}")

    def _node_ready(self) -> bool:
        node = self.kubectl.json("get", "node", NODE_NAME)
        return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])

    # --- what tests read -----------------------------------------------------------------------------

    def audit_events(self) -> list[dict]:
        """The API server's audit log so far (request metadata: who did what to which object)."""
        path = self.root / "audit.log"
        return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []

    def service_address(self, namespace: str, name: str, timeout: float = 60) -> str:
        """The Service's cluster IP, once kube-proxy has written its rules with an endpoint behind them.

        A Ready Deployment is not enough: until kube-proxy's next sync the cluster IP matches no rule, and
        the node, which has no route out, answers "network unreachable"."""
        cluster_ip = self.kubectl.json("get", "service", name, "-n", namespace)["spec"]["clusterIP"]
        service = f'"{namespace}/{name}'

        def programmed() -> bool:
            rules = self._in_node_checked("iptables-save", "-t", "nat").splitlines()
            return any(service in rule and " -> " in rule for rule in rules)

        self._wait_until(programmed, timeout, f"kube-proxy's rules for Service {namespace}/{name}")
        return cluster_ip

    def pod_cgroup(self, pod: dict, container: str, controller: str) -> Path:
        """The cgroup v1 folder of one container of a pod on this node, in one controller's hierarchy."""
        uid = pod["metadata"]["uid"]
        qos = pod["status"]["qosClass"]
        status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == container)
        container_id = status["containerID"].split("://", 1)[1]
        parent = CGROUP_ROOT / controller / "kubepods"
        if qos != "Guaranteed":
            parent /= qos.lower()
        return parent / f"pod{uid}" / container_id

    # --- teardown ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the node and its control plane, put back what they changed, and check nothing is left."""
        problems: list[str] = []
        if self.builder is not None and self.builder.poll() is None:  # its own session: go build's children too
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.builder.pid, signal.SIGKILL)
            self.builder.wait(timeout=15)
        mount_ns = None
        if self.holder is not None and self.holder.poll() is None:
            mount_ns = os.readlink(f"/proc/{self.holder.pid}/ns/mnt")
        for name in ("kube-proxy", "kubelet"):
            self._terminate(name)
        # The containers' processes hang off containerd's shims, not off us: kill them by cgroup.
        self._wait_quietly(lambda: _kill_cgroup_members(_kubepods_cgroups()) == 0, 20)
        for name in ("coredns", "containerd"):
            self._terminate(name)
        if mount_ns is not None:  # containerd's shims, and anything else still in the node's namespaces
            self._wait_quietly(lambda: _kill_all(_pids_in_namespace(mount_ns)) == 0, 20)
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait(timeout=15)
        if self.plane is not None:
            try:
                # Behind a node, kube-apiserver's graceful shutdown outlasts any wait worth making (measured:
                # not gone 40 s after SIGTERM; 1.2 s without a node), and nothing of this plane is kept.
                self.plane.stop(grace_s=2)
            except ControlPlaneError as exc:
                problems.append(str(exc))
        for cgroup in _kubepods_cgroups():
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        _run("ip", "link", "delete", HOST_LINK, check=False)
        _restore_sysctls(self.sysctls)
        if self.sysctls:
            SYSCTLS_FOUND.unlink(missing_ok=True)
        problems += self.leftovers(mount_ns)
        shutil.rmtree(self.root, ignore_errors=True)
        self.processes.clear()
        if problems:
            raise NodeError("the node left traces behind: " + "; ".join(problems))

    def leftovers(self, mount_ns: str | None) -> list[str]:
        """What of the node is still on this machine: processes, mounts, cgroups, links, sysctls, iptables."""
        found = []
        pids = _pids_mentioning(str(self.root)) + (_pids_in_namespace(mount_ns) if mount_ns else [])
        if pids:
            found.append(f"processes {sorted(set(pids))}")
        mounts = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(self.root) in line]
        if mounts:
            found.append(f"mounts {mounts[:3]}")
        if _kubepods_cgroups():
            found.append(f"cgroups {[str(c) for c in _kubepods_cgroups()[:3]]}")
        for link in (HOST_LINK, BRIDGE):
            if _run("ip", "link", "show", link, check=False).returncode == 0:
                found.append(f"network link {link}")
        if "KUBE-" in _run("iptables-save", check=False).stdout:
            found.append("KUBE- chains in the host's iptables")
        changed = {k: v for k, v in _read_sysctls().items() if self.sysctls and v != self.sysctls[k]}
        if changed:
            found.append(f"sysctls {changed}")
        return found

    def _terminate(self, name: str) -> None:
        if (process := self.processes.get(name)) is not None:
            stop_process(process)

    @staticmethod
    def _wait_quietly(predicate, timeout: float) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not predicate():
            time.sleep(0.2)


def start_node() -> Node:
    """Build (or reuse) the binaries and images the node starts with, start the node tier, then build the rest
    (helm, kstatus, argocd-health, ...) in the background: on a cold machine they compile while the first
    tests wait for scrapes, and a test that needs them waits for the build's lock (build_binaries)."""
    bin_dir = build_binaries("node")
    image, pause_archive, pause_name = build_images()
    node = Node(bin_dir, image, pause_archive, pause_name).start()
    with open(node.root / "build-rest.log", "wb") as log:
        node.builder = subprocess.Popen(
            ["bash", str(BUILD_SCRIPT)], stdout=subprocess.DEVNULL, stderr=log, preexec_fn=die_with_this_process
        )
    return node


def main() -> None:
    if sys.argv[1:] != ["up"]:
        sys.exit("usage: python tests/support/node.py up")
    node = start_node()
    print(f"export KUBECONFIG={node.kubeconfig}", flush=True)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        node.stop()


if __name__ == "__main__":
    main()
