"""A real kind cluster for the kind tier (tests/kind), made from the repository's own `kind-config.yaml` with
podman as kind's provider, and every setting of this machine it needs put back afterwards.

Facts measured here are in shared/kind-notes.md. What this host needs layered on top of the README's commands:
- kind's node image, built here (hack/kind/node-image.sh): no registry serves kindest/node;
- kubelet 1.35 refuses cgroup v1 unless its configuration says `failCgroupV1: false`: added to a copy of
  kind-config.yaml as a kubeadm patch when the machine runs cgroup v1, nothing else of the file changed;
- podman's default rlimits exceed what root may set here (no CAP_SYS_RESOURCE): the nodes' limits come from a
  CONTAINERS_CONF file (hack/kind/limits.sh);
- kind mounts /lib/modules, which this machine lacks: made for the run, removed after;
- the nodes live on an *internal* podman network of our own (KIND_EXPERIMENTAL_PODMAN_NETWORK): no default
  route, no NAT, so nothing of the cluster can leave through the machine's interface. Podman forwards no
  ports into an internal network, so the kubeconfig kind writes is pointed at the control-plane node's own
  address (which its serving certificate names) instead of a forwarded port on 127.0.0.1;
- podman turns ip_forward on, adds NETAVARK chains to the host's iptables and mounts /run/netns: all undone.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support.builds import run_build
from tests.support.controlplane import REPO, Kubectl, build_binaries
from tests.support.paths import CACHE

KIND_DIR = REPO / "hack" / "kind"
CONFIG = REPO / "kind-config.yaml"
NETWORK = "kaliper-kind"
SUBNET = "10.214.0.0/24"
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
LIB_MODULES = Path("/lib/modules")
NETNS = Path("/run/netns")
CGROUP_ROOT = Path("/sys/fs/cgroup")
HOST_IP = "10.214.0.1"  # this machine's end of the network (its gateway): pods reach servers of the tests here
AUDIT_DIR = "/etc/kubernetes/kaliper-audit"  # in the control-plane node, over this machine's folder


class KindError(RuntimeError):
    """kind, podman or a host setting failed; the message says which command and what it printed."""


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 600, check: bool = True) -> str:
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if check and result.returncode != 0:
        raise KindError(f"{shlex.join(args)} exited {result.returncode}:\n{(result.stdout + result.stderr)[-3000:]}")
    return result.stdout


def _is_mountpoint(path: Path) -> bool:
    return subprocess.run(["mountpoint", "-q", str(path)]).returncode == 0


def _iptables(table: str) -> tuple[set[str], list[str]]:
    """The chains a table declares and its rules, as iptables-save prints them."""
    lines = _run("iptables-save", "-t", table).splitlines()
    chains = {line[1:].split()[0] for line in lines if line.startswith(":")}
    return chains, [line for line in lines if line.startswith("-A ")]


@dataclass
class HostState:
    """What kind and podman change on this machine, as it was before."""

    ip_forward: str
    lib_modules: bool
    netns_mounted: bool
    iptables: dict[str, tuple[set[str], list[str]]]

    def save(self, path: Path) -> None:
        tables = {table: {"chains": sorted(chains), "rules": rules} for table, (chains, rules) in self.iptables.items()}
        fields = {"ipForward": self.ip_forward, "libModules": self.lib_modules, "netnsMounted": self.netns_mounted}
        path.write_text(json.dumps({**fields, "iptables": tables}))

    @classmethod
    def load(cls, path: Path) -> HostState:
        data = json.loads(path.read_text())
        tables = {table: (set(saved["chains"]), saved["rules"]) for table, saved in data["iptables"].items()}
        return cls(data["ipForward"], data["libModules"], data["netnsMounted"], tables)

    @classmethod
    def read(cls) -> HostState:
        return cls(
            ip_forward=IP_FORWARD.read_text().strip(),
            lib_modules=LIB_MODULES.exists(),
            netns_mounted=_is_mountpoint(NETNS),
            iptables={table: _iptables(table) for table in ("filter", "nat")},
        )

    def restore(self) -> list[str]:
        """Put back what changed; returns what was put back, for the log."""
        restored = []
        for table, (chains_before, rules_before) in self.iptables.items():
            chains, rules = _iptables(table)
            for rule in (r for r in rules if r not in rules_before):
                _run("iptables", "-t", table, "-D", *shlex.split(rule)[1:])
                restored.append(f"{table}: {rule}")
            for chain in chains - chains_before:
                _run("iptables", "-t", table, "-F", chain)
                _run("iptables", "-t", table, "-X", chain)
                restored.append(f"{table}: chain {chain}")
        if not self.netns_mounted and _is_mountpoint(NETNS):
            _run("umount", str(NETNS))
            restored.append(f"unmounted {NETNS}")
        if not self.lib_modules and LIB_MODULES.exists():
            LIB_MODULES.rmdir()
            restored.append(f"removed {LIB_MODULES}")
        if IP_FORWARD.read_text().strip() != self.ip_forward:
            IP_FORWARD.write_text(self.ip_forward)
            restored.append(f"net.ipv4.ip_forward={self.ip_forward}")
        return restored


def _cgroup_v1() -> bool:
    return not (CGROUP_ROOT / "cgroup.controllers").exists()


def layered_config(target: Path, shared: Path, audit: Path) -> Path:
    """kind-config.yaml as it is, plus the kubelet setting a cgroup v1 machine needs, and what the suite reads
    beside what a user sees: this machine's folder `shared` at the same path in every node (local
    PersistentVolumes over folders a test fills), and the API server's audit log (who did what) written into
    `audit` (the policy of the test control plane: every request's metadata)."""
    config = yaml.safe_load(CONFIG.read_text())
    patches = config.setdefault("kubeadmConfigPatches", [])
    if _cgroup_v1():
        patches.append("kind: KubeletConfiguration\nfailCgroupV1: false\n")
    for node in config["nodes"]:
        mounts = node.setdefault("extraMounts", [])
        mounts.append({"hostPath": str(shared), "containerPath": str(shared)})
        if node["role"] == "control-plane":
            mounts.append({"hostPath": str(audit), "containerPath": AUDIT_DIR})
    policy = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived", "ResponseStarted"]}
    (audit / "policy.yaml").write_text(json.dumps({**policy, "rules": [{"level": "Metadata"}]}))
    flags = {"audit-policy-file": f"{AUDIT_DIR}/policy.yaml", "audit-log-path": f"{AUDIT_DIR}/audit.log"}
    # The nodes have no default route here (nothing leaves the machine), so the API server, on the control
    # plane's host network, cannot dial a Service's cluster IP at all ("network is unreachable" before kube-proxy
    # could rewrite it): it reaches aggregated APIs (metrics-server's metrics.k8s.io) at their pods' addresses
    # instead, which podnet routes. On Docker's kind a node's default route makes this unnecessary.
    flags["enable-aggregator-routing"] = "true"
    volume = {"name": "kaliper-audit", "hostPath": AUDIT_DIR, "mountPath": AUDIT_DIR, "pathType": "DirectoryOrCreate"}
    # kind v0.33 writes kubeadm's v1beta3 for Kubernetes before 1.36, where extraArgs is a map (a list from v1beta4).
    audit_patch = {"kind": "ClusterConfiguration", "apiServer": {"extraArgs": flags, "extraVolumes": [volume]}}
    patches.append(yaml.safe_dump(audit_patch))
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target


@dataclass
class KindHost:
    """This machine set up for kind: the settings above applied, and undone by `close()`."""

    root: Path
    state: HostState
    bin_dir: Path
    node_image: str
    name: str = field(default_factory=lambda: yaml.safe_load(CONFIG.read_text())["name"])

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def shared(self) -> Path:
        """This machine's folder mounted at the same path in every node."""
        return self.root / "shared"

    @property
    def audit_log(self) -> Path:
        return self.root / "audit" / "audit.log"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            CONTAINERS_CONF=str(self.root / "containers.conf"),
            KIND_EXPERIMENTAL_PROVIDER="podman",
            KIND_EXPERIMENTAL_PODMAN_NETWORK=NETWORK,
            KUBECONFIG=str(self.kubeconfig),
            PATH=f"{self.bin_dir}:{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}",
        )
        return env

    @property
    def kubectl(self) -> Kubectl:
        return Kubectl(str(self.bin_dir / "kubectl"), self.kubeconfig)

    def kind(self, *args: str, timeout: float = 600) -> str:
        return _run(str(self.bin_dir / "kind"), *args, env=self.env(), timeout=timeout)

    def create_cluster(self, *args: str) -> None:
        """`kind create cluster ARGS` with this host's node image and layered configuration, then the
        kubeconfig pointed at the control-plane node (no forwarded port on an internal network)."""
        for folder in (self.shared, self.audit_log.parent):
            folder.mkdir(exist_ok=True)
        self.shared.chmod(0o755)  # pods' users reach the volumes under it
        config = layered_config(self.root / "kind-config.yaml", self.shared, self.audit_log.parent)
        rest = [a for a in args if a not in ("--config", str(CONFIG), CONFIG.name)]
        self.kind("create", "cluster", "--config", str(config), "--image", self.node_image, *rest)
        address = _run(
            "podman",
            "inspect",
            f"{self.name}-control-plane",
            "--format",
            f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}',
        ).strip()
        _run(
            str(self.bin_dir / "kubectl"),
            "config",
            "set-cluster",
            f"kind-{self.name}",
            f"--server=https://{address}:6443",
            env=self.env(),
        )

    @property
    def workers(self) -> str:
        """The worker nodes' names, as `kind load --nodes` takes them (the control plane runs no workload)."""
        return ",".join(sorted(n for n in self.nodes() if not n.endswith("-control-plane")))

    def nodes(self) -> list[str]:
        out = _run(
            "podman", "ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={self.name}", "--format", "{{.Names}}"
        )
        return out.split()

    def node_container_id(self, node: str) -> str:
        return _run("podman", "inspect", node, "--format", "{{.Id}}").strip()

    def pod_cgroup(self, pod: dict, container: str, controller: str) -> Path:
        """A pod's container's cgroup v1 folder as this machine sees it: inside the node's container, under
        the kubelet's systemd slices (kind's kubelet uses the systemd cgroup driver)."""
        uid = pod["metadata"]["uid"].replace("-", "_")
        qos = pod["status"]["qosClass"].lower()
        status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == container)
        container_id = status["containerID"].split("://", 1)[1]
        node = CGROUP_ROOT / controller / "libpod_parent" / f"libpod-{self.node_container_id(pod['spec']['nodeName'])}"
        slices = node / "kubelet.slice" / "kubelet-kubepods.slice"
        if qos == "guaranteed":
            pod_slice = slices / f"kubelet-kubepods-pod{uid}.slice"
        else:
            pod_slice = slices / f"kubelet-kubepods-{qos}.slice" / f"kubelet-kubepods-{qos}-pod{uid}.slice"
        return pod_slice / f"cri-containerd-{container_id}.scope"

    def close(self) -> list[str]:
        """Delete the cluster and the network, put back the host's settings, and say what is left (nothing,
        when all went well)."""
        with contextlib.suppress(KindError):
            self.kind("delete", "cluster", "--name", self.name, timeout=300)
        with contextlib.suppress(KindError):
            _run("podman", "network", "rm", "--force", NETWORK)
        self.state.restore()
        left = [f"container {n}" for n in self.nodes()]
        networks = _run("podman", "network", "ls", "--format", "{{.Name}}").split()
        left += [f"podman network {n}" for n in networks if n in (NETWORK, "kind")]
        volumes = _run("podman", "volume", "ls", "--filter", f"label=io.x-k8s.kind.cluster={self.name}", "-q").split()
        left += [f"podman volume {v}" for v in volumes]
        after = HostState.read()
        if after.ip_forward != self.state.ip_forward:
            left.append(f"ip_forward {after.ip_forward}, was {self.state.ip_forward}")
        if after.iptables != self.state.iptables:
            left.append("iptables rules or chains differ from before")
        if after.netns_mounted != self.state.netns_mounted or after.lib_modules != self.state.lib_modules:
            left.append(f"{NETNS} mounted or {LIB_MODULES} present, unlike before")
        return left


def _node_image() -> str:
    result = run_build(["bash", str(KIND_DIR / "node-image.sh")], capture_output=True, text=True)
    if result.returncode != 0:
        raise KindError(f"hack/kind/node-image.sh failed:\n{result.stderr[-4000:]}")
    return result.stdout.strip().splitlines()[-1]


def sweep_leftovers(bin_dir: Path, state_file: Path) -> list[str]:
    """What a killed test run's cluster left behind, removed, and the host's settings put back as that run
    found them (it saved them in `state_file` before changing anything); returns what it found."""
    if not state_file.exists():
        return []
    name = yaml.safe_load(CONFIG.read_text())["name"]
    env = {**os.environ, "KIND_EXPERIMENTAL_PROVIDER": "podman"}
    _run(str(bin_dir / "kind"), "delete", "cluster", "--name", name, env=env, check=False)
    _run("podman", "network", "rm", "--force", NETWORK, check=False)
    found = HostState.load(state_file).restore()
    state_file.unlink()
    return ["a cluster of a killed run", *found]


@contextlib.contextmanager
def kind_host() -> Iterator[KindHost]:
    """This machine ready for `kind create cluster` (binaries and node image built or found cached), and
    every change undone on the way out; raises if anything of the cluster is left. The host's settings as found
    are kept in a file until they are put back, so a killed run's are put back by the next (`sweep_leftovers`)."""
    bin_dir = build_binaries("kind")
    for needed in ("kubeadm", "helm", "prometheus"):
        build_binaries(needed)
    image = _node_image()
    state_file = CACHE / "kind-host-state.json"
    sweep_leftovers(bin_dir, state_file)
    state = HostState.read()
    CACHE.mkdir(parents=True, exist_ok=True)
    state.save(state_file)
    with tempfile.TemporaryDirectory(prefix="kaliper-kind-") as root:
        limits = _run("bash", "-c", f"source {KIND_DIR / 'limits.sh'}; echo $KIND_NOFILE $KIND_NPROC").split()
        Path(root, "containers.conf").write_text(
            f'[containers]\ndefault_ulimits = ["nofile={limits[0]}:{limits[0]}", "nproc={limits[1]}:{limits[1]}"]\n'
        )
        host = KindHost(Path(root), state, bin_dir, image)
        try:
            LIB_MODULES.mkdir(exist_ok=True)
            _run("podman", "network", "create", "--internal", "--subnet", SUBNET, NETWORK)
            yield host
        finally:
            left = host.close()
            state_file.unlink()
        if left:
            raise KindError(f"the kind cluster left things behind: {left}")


def wait_for_line(process: subprocess.Popen, words: tuple[str, ...], timeout: float) -> str:
    """Read a command's output (such as `kubectl get -w`) until a line holds one of `words` as a word, then stop
    the command; raises with what it printed when no such line comes within `timeout` seconds."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([process.stdout], [], [], left)
            line = process.stdout.readline() if ready else ""
            if not line:
                break  # the deadline passed, or the command ended
            seen.append(line)
            if any(word in line.split() for word in words):
                return line
    finally:
        process.kill()
        process.wait()
    raise KindError(f"no line with {words} within {timeout:.0f} s; the command printed:\n{''.join(seen)[-2000:]}")
