"""A real Kubernetes control plane on loopback for the test suite: etcd, kube-apiserver (RBAC),
kube-controller-manager, kube-scheduler and kwok (fake nodes whose pods are reported Running).

The binaries come from `hack/testcluster/build.sh` (built from the Go module proxy, cached by version).
Every process is started in its own session with a parent-death signal, so nothing outlives the test run,
and `stop()` checks that none did.

By hand:  python -m tests.support.controlplane up     (prints the kubeconfig path; Ctrl-C stops it)
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import functools
import ipaddress
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from kaliper.netutil import free_port
from kaliper.processes import dies_with_this_process
from tests.support.builds import run_build

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "testcluster" / "build.sh"
ADDRESS = "127.0.0.1"  # where the API server listens
SERVICE_CIDR = "10.0.0.0/16"
FAKE_NODES = ("kwok-node-0", "kwok-node-1")
KWOK_STAGES = Path(__file__).with_name("kwok-stages.yaml")


class ControlPlaneError(RuntimeError):
    """The control plane could not be built or started; the message says which part and why."""


def wait_for(predicate, timeout: float = 60, what: str = "condition", interval: float = 0.1) -> None:  # type: ignore[no-untyped-def]
    """Poll until the predicate holds; ControlPlaneError naming `what` when the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise ControlPlaneError(f"timed out after {timeout}s waiting for {what}")


def build_binaries(which: str = "all") -> Path:
    """Run the build script for `which` ("all"; "node": what kind's node image holds; "controlplane": what a
    kwok control plane starts with; or one binary such as "helm"), a no-op when it is cached, and return the
    directory of binaries."""
    result = run_build(["bash", str(BUILD_SCRIPT), which], capture_output=True, text=True)
    if result.returncode != 0:
        raise ControlPlaneError(
            f"{BUILD_SCRIPT.relative_to(REPO)} failed (exit {result.returncode}):\n{result.stderr[-4000:]}"
        )
    return Path(result.stdout.strip().splitlines()[-1])


def killed_with_this_process() -> Callable[[], None]:
    """A preexec_fn: the kernel kills the child if the test process dies, even by SIGKILL."""
    tie_to_this_process = dies_with_this_process(signal.SIGKILL)

    def prepare() -> None:
        tie_to_this_process()
        os.setsid()

    return prepare


def spawn_logged(root: Path, name: str, argv: list[str], append: bool = False) -> subprocess.Popen:
    """A cluster component, its output in ROOT/NAME.log, killed by the kernel if the test process dies."""
    log = open(root / f"{name}.log", "ab" if append else "wb")  # noqa: SIM115 - the process holds it
    return subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=killed_with_this_process()
    )


def stop_process(process: subprocess.Popen, grace_s: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not exited `grace_s` later; waits for it either way."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


def log_tail(root: Path, name: str, lines: int = 30) -> str:
    path = root / f"{name}.log"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


OPERATOR_AGENTS = ("OpenAPI-Generator/", "kopf/")
SUITE_AGENT = "kaliper-test-suite"  # the suite's own reads and the load-generator stand-in's (api_client)


# The resources the suite reads with `Kubectl.json("get", ...)`, by the names kubectl takes for them: their API
# path and whether they live in a namespace. Polling them with a kubectl process each time (about 2,000 calls of
# 56 ms of CPU in a run) was two CPU-minutes of a two-core machine; in this process a read costs a few ms.
_KALIPER_API = "/apis/kaliper.dev/v1alpha1"
RESOURCE_PATHS: dict[str, tuple[str, bool]] = {
    name: (f"{prefix}/{plural}", namespaced)
    for names, prefix, plural, namespaced in (
        (("pod", "pods", "po"), "/api/v1", "pods", True),
        (("configmap", "configmaps", "cm"), "/api/v1", "configmaps", True),
        (("service", "services", "svc"), "/api/v1", "services", True),
        (("event", "events", "ev"), "/api/v1", "events", True),
        (("pvc", "persistentvolumeclaim", "persistentvolumeclaims"), "/api/v1", "persistentvolumeclaims", True),
        (("node", "nodes", "no"), "/api/v1", "nodes", False),
        (("namespace", "namespaces", "ns"), "/api/v1", "namespaces", False),
        (("serviceaccount", "serviceaccounts", "sa"), "/api/v1", "serviceaccounts", True),
        (("deployment", "deployments", "deploy"), "/apis/apps/v1", "deployments", True),
        (("job", "jobs"), "/apis/batch/v1", "jobs", True),
        (("profilerun", "profileruns", "prun"), _KALIPER_API, "profileruns", True),
        (("modeldeployment", "modeldeployments", "mdep"), _KALIPER_API, "modeldeployments", True),
        (("modeloptimization", "modeloptimizations", "mopt"), _KALIPER_API, "modeloptimizations", True),
        (("cleanup", "cleanups", "kclean"), _KALIPER_API, "cleanups", True),
    )
    for name in names
}


@dataclass(frozen=True)
class GetRequest:
    """A plain `kubectl get RESOURCE [NAME] [-n NAMESPACE | -A] [-l SELECTOR]`."""

    resource: str
    name: str | None
    namespace: str | None  # None: the kubeconfig's (kubectl's default)
    all_namespaces: bool
    selector: str | None


def get_request(args: tuple[str, ...]) -> GetRequest | None:
    """`args` as a GetRequest when they are a plain get of a resource in RESOURCE_PATHS; None for anything
    else (other verbs, flags or resources: those run kubectl)."""
    if not args or args[0] != "get":
        return None
    positional: list[str] = []
    options: dict[str, str] = {}
    rest = list(args[1:])
    while rest:
        word = rest.pop(0)
        if word in ("-A", "--all-namespaces"):
            options["all"] = "yes"
        elif word in ("-n", "--namespace", "-l", "--selector") and rest:
            options["namespace" if word in ("-n", "--namespace") else "selector"] = rest.pop(0)
        elif word.startswith(("--namespace=", "--selector=")):
            key, value = word[2:].split("=", 1)
            options[key] = value
        elif word.startswith("-"):
            return None
        else:
            positional.append(word)
    if not 1 <= len(positional) <= 2 or positional[0] not in RESOURCE_PATHS:
        return None
    name = positional[1] if len(positional) == 2 else None
    if name is not None and ("all" in options or "selector" in options):
        return None
    return GetRequest(positional[0], name, options.get("namespace"), "all" in options, options.get("selector"))


def api_client(kubeconfig: Path) -> Any:
    """The Python kubernetes client for the kubeconfig's cluster, as the suite's own (SUITE_AGENT: the audit log
    tells its requests from the operator's), each request tried once (a caller that polls tries again itself;
    urllib3's own retries would only log a warning each)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.retries = False
    api = client.ApiClient(configuration)
    api.user_agent = SUITE_AGENT
    return api


@functools.cache
def _cached_client(kubeconfig: str, _modified_ns: int) -> tuple[Any, str]:
    """api_client, and the kubeconfig's context's namespace (kubectl's default one); made again when the file
    changes."""
    loaded = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in loaded["contexts"] if c["name"] == loaded.get("current-context"))["context"]
    return api_client(Path(kubeconfig)), context.get("namespace", "default")


def in_process_request(
    kubeconfig: Path, args: tuple[str, ...], method: str, path: str, query: list | None = None, body: dict | None = None
) -> dict:
    """One request to the API server from this process, its JSON answer; ControlPlaneError, worded as kubectl
    ARGS would fail, when it is refused or the API server answers with an error."""
    api, _ = _cached_client(str(kubeconfig), kubeconfig.stat().st_mtime_ns)
    try:
        method, url, headers, serialized, _ = api.param_serialize(
            method,
            path,
            query_params=query or [],
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(method, url, headers, serialized, _request_timeout=(10, 60))
        response.read()
    except Exception as exc:  # refused, reset, timed out: kubectl would fail too
        raise ControlPlaneError(f"kubectl {' '.join(args)} failed:\n{exc}") from None
    data = json.loads(response.data)
    if not 200 <= response.status < 300:  # the API server's Status, in kubectl's words
        said = f"Error from server ({data.get('reason', response.status)}): {data.get('message', '')}"
        raise ControlPlaneError(f"kubectl {' '.join(args)} failed:\n{said}")
    return data


def in_process_get(kubeconfig: Path, args: tuple[str, ...], request: GetRequest) -> dict:
    """The request read through the API in this process, as `kubectl get -o json` prints it: the object, or a
    List whose items carry their apiVersion and kind; ControlPlaneError with the API server's reason otherwise."""
    _, default_namespace = _cached_client(str(kubeconfig), kubeconfig.stat().st_mtime_ns)
    path, namespaced = RESOURCE_PATHS[request.resource]
    if namespaced and not request.all_namespaces:
        prefix, plural = path.rsplit("/", 1)
        path = f"{prefix}/namespaces/{request.namespace or default_namespace}/{plural}"
    if request.name is not None:
        path += f"/{request.name}"
    query = [("labelSelector", request.selector)] if request.selector else []
    data = in_process_request(kubeconfig, args, "GET", path, query)
    if request.name is None:  # kubectl prints a List, each item with its apiVersion and kind
        api_version, kind = data.get("apiVersion", "v1"), data.get("kind", "List").removesuffix("List")
        items = [{"apiVersion": api_version, "kind": kind, **item} for item in data.get("items") or []]
        for item in items:
            item.get("metadata", {}).pop("managedFields", None)  # kubectl leaves them out unless asked
        return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
    data.get("metadata", {}).pop("managedFields", None)
    return data


class Kubectl:
    """kubectl against one cluster (ours, or an existing one)."""

    def __init__(self, binary: str, kubeconfig: Path) -> None:
        self.binary, self.kubeconfig = binary, kubeconfig
        self.audit_log: Path | None = None  # the API server's audit log, where the test control plane keeps one

    def requests_in(self, namespace: str) -> collections.Counter[str]:
        """Requests to objects in a namespace made with the Python kubernetes client or kopf (the operator's
        two clients; the load-generator stand-in uses the first too, but only to create its results), by
        "verb resource[/subresource]", from the audit log."""
        if self.audit_log is None:
            raise ControlPlaneError("this cluster keeps no audit log (only the test control plane does)")
        counts: collections.Counter[str] = collections.Counter()
        for line in self.audit_log.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != namespace or not event.get("userAgent", "").startswith(OPERATOR_AGENTS):
                continue
            resource = ref.get("resource", "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            counts[f"{event['verb']} {resource}"] += 1
        return counts

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [self.binary, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def json(self, *args: str) -> dict:
        """What `kubectl ARGS -o json` prints. A plain `get` of a resource the suite polls is read through the API
        in this process (`in_process_get`): the same object or List, and the same ControlPlaneError."""
        request = get_request(args)
        if request is not None:
            return in_process_get(self.kubeconfig, args, request)
        return json.loads(self(*args, "-o", "json").stdout)

    def create_namespace(self, name: str) -> None:
        """`kubectl create namespace NAME`, in this process."""
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        in_process_request(self.kubeconfig, ("create", "namespace", name), "POST", "/api/v1/namespaces", body=body)

    def delete_namespace(self, name: str) -> None:
        """`kubectl delete namespace NAME --wait=false`, in this process: its objects go in the background."""
        args = ("delete", "namespace", name, "--wait=false")
        in_process_request(self.kubeconfig, args, "DELETE", f"/api/v1/namespaces/{name}")

    def token_kubeconfig(self, service_account: str, namespace: str, path: Path, duration: str = "10m") -> Path:
        """A kubeconfig that authenticates as the service account (a bound token), as its pod would."""
        token = self("create", "token", service_account, "-n", namespace, f"--duration={duration}").stdout.strip()
        cluster = json.loads(self("config", "view", "--raw", "-o", "json").stdout)["clusters"][0]["cluster"]
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "sa",
                    "clusters": [{"name": "c", "cluster": cluster}],
                    "users": [{"name": "sa", "user": {"token": token}}],
                    "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
                }
            )
        )
        return path

    def wait_for(self, predicate, timeout: float = 60, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
        wait_for(predicate, timeout, what, interval=0.5)

    def phase_of(self, kind: str, name: str, namespace: str) -> str | None:
        """An object's status.phase, None before the operator has written one."""
        return (self.json("get", kind, name, "-n", namespace).get("status") or {}).get("phase")

    def wait_for_phase(self, kind: str, name: str, namespace: str, phase: str, timeout: float = 60) -> None:
        what = f"{kind} {name} to be {phase}"
        self.wait_for(lambda: self.phase_of(kind, name, namespace) == phase, timeout, what)


# --- certificates ------------------------------------------------------------------------------------


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _certificate(
    subject: x509.Name,
    key: rsa.RSAPrivateKey,
    issuer: tuple[x509.Name, rsa.RSAPrivateKey] | None = None,
    *,
    ca: bool = False,
    server_names: tuple[str, ...] = (),
    server_ips: tuple[str, ...] = (),
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server_names or server_ips:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class _Pki:
    ca: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    admin_cert: Path
    admin_key: Path


def _make_pki(directory: Path, address: str, service_ip: str) -> _Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("kaliper-test-ca")
    ca_cert = _certificate(ca_name, ca_key, ca=True)
    serving_key = _key()
    serving = _certificate(
        _name("kube-apiserver"),
        serving_key,
        (ca_name, ca_key),
        server_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        server_ips=tuple(dict.fromkeys(("127.0.0.1", address, service_ip))),
    )
    # The admin identity is in system:masters, which RBAC's bootstrap policy binds to cluster-admin.
    admin_key = _key()
    admin = _certificate(_name("kaliper-test-admin", "system:masters"), admin_key, (ca_name, ca_key))
    sa_key = _key()
    pki = _Pki(
        ca=directory / "ca.crt",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
    )
    pki.ca.write_bytes(_pem(ca_cert))
    pki.serving_cert.write_bytes(_pem(serving))
    _write_key(pki.serving_key, serving_key)
    pki.admin_cert.write_bytes(_pem(admin))
    _write_key(pki.admin_key, admin_key)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki


def _kubeconfig(server: str, pki: _Pki) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kaliper-test", "cluster": {"server": server, "certificate-authority": str(pki.ca)}}],
        "users": [
            {"name": "admin", "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)}}
        ],
        "contexts": [{"name": "kaliper-test", "context": {"cluster": "kaliper-test", "user": "admin"}}],
        "current-context": "kaliper-test",
    }


# --- the control plane -------------------------------------------------------------------------------


@dataclass
class ControlPlane:
    """Starts the control plane in a throw-away directory; `stop()` removes every trace of it."""

    bin_dir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kaliper-cp-")))
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)  # each component's command line, to restart it
    kubeconfig: Path | None = None
    kubectl: Kubectl | None = None
    server: str = ""
    audit_log: Path | None = None  # log every request's metadata here (the operator benchmark counts them)
    # How long the node controller waits for a node's heartbeat before marking its pods NotReady. A kubelet
    # reports its pods ready again once it can; kwok does not, so a control plane whose API server is stopped
    # for longer than the default 50 s (the outage tests) sets this beyond the outage.
    node_monitor_grace_period: str = "50s"

    def start(self, timeout: float = 120.0) -> ControlPlane:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        service_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))
        pki = _make_pki(self.root / "pki", ADDRESS, service_ip)
        etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
        self.server = f"https://{ADDRESS}:{api_port}"
        self.kubeconfig = self.root / "kubeconfig"
        self.kubeconfig.write_text(json.dumps(_kubeconfig(self.server, pki), indent=2))
        self.kubectl = Kubectl(str(self.bin_dir / "kubectl"), self.kubeconfig)

        self._spawn(
            "etcd",
            "--name=kaliper-test",
            f"--data-dir={self.root / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=kaliper-test=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync",  # a throw-away store: durability costs seconds per test run
            "--log-level=warn",
        )
        self._wait_http("etcd", f"http://127.0.0.1:{etcd_port}/health", timeout)

        self._spawn(
            "kube-apiserver",
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--bind-address={ADDRESS}",
            f"--advertise-address={ADDRESS}",
            f"--secure-port={api_port}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca}",
            "--authorization-mode=RBAC",
            # On by default in OpenShift: setting blockOwnerDeletion needs update on the owner's finalizers.
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            f"--cert-dir={self.root / 'apiserver-certs'}",
            *self._audit_flags(),
        )
        self._wait_http("kube-apiserver", f"{self.server}/readyz", timeout, pki)

        component_kubeconfig = str(self.kubeconfig)
        self._spawn(
            "kube-controller-manager",
            f"--kubeconfig={component_kubeconfig}",
            f"--authentication-kubeconfig={component_kubeconfig}",
            f"--authorization-kubeconfig={component_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca}",
            "--use-service-account-credentials=false",
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller",
            f"--node-monitor-grace-period={self.node_monitor_grace_period}",
        )
        self._spawn(
            "kube-scheduler",
            f"--kubeconfig={component_kubeconfig}",
            f"--authentication-kubeconfig={component_kubeconfig}",
            f"--authorization-kubeconfig={component_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--leader-elect=false",
        )
        self._start_kwok(component_kubeconfig, timeout)
        self._wait_until(self._default_service_account, timeout, "the controller manager to create service accounts")

    def _start_kwok(self, component_kubeconfig: str, timeout: float) -> None:
        kwok_config = self.root / "kwok.yaml"
        kwok_config.write_text(KWOK_STAGES.read_text())
        self._spawn(
            "kwok",
            f"--kubeconfig={component_kubeconfig}",
            f"--config={kwok_config}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            # Renew node Leases, the heartbeat the node lifecycle controller watches: without them it finds
            # the nodes silent after its grace period and marks every pod on them NotReady.
            "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.1/24",
            "--node-ip=10.244.0.1",
        )
        self._create_fake_nodes()
        self._wait_until(self._nodes_ready, timeout, "kwok to report the fake nodes Ready")

    def _audit_flags(self) -> list[str]:
        if self.audit_log is None:
            return []
        policy = self.root / "audit-policy.yaml"
        policy.write_text(
            json.dumps(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived", "ResponseStarted"],
                    "rules": [{"level": "Metadata"}],
                }
            )
        )
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-maxsize=0"]

    # --- processes -----------------------------------------------------------------------------------

    def _spawn(self, name: str, *args: str) -> None:
        self.commands[name] = [str(self.bin_dir / name), *args]
        self.processes[name] = spawn_logged(self.root, name, self.commands[name])

    # --- outages -------------------------------------------------------------------------------------

    OUTAGE_COMPONENTS = ("kube-apiserver", "etcd")

    def take_down(self) -> None:
        """The API server and etcd stopped (SIGTERM, as an upgrade or a node loss does): connections refused."""
        for name in self.OUTAGE_COMPONENTS:
            stop_process(self.processes[name])

    def bring_back(self, timeout: float = 60) -> None:
        """etcd and the API server started again with their command lines and data: ready when this returns."""
        for name in reversed(self.OUTAGE_COMPONENTS):
            with (self.root / f"{name}.log").open("ab") as log:
                log.write(b"--- started again after an outage ---\n")
            self.processes[name] = spawn_logged(self.root, name, self.commands[name], append=True)
        self._wait_until(self._ready, timeout, "the API server to be ready again")

    def freeze(self, frozen: bool) -> None:
        """The API server and etcd stopped (SIGSTOP) or let go (SIGCONT): the kernel still accepts connections
        into the listen backlog, nothing answers them; clients time out instead of being refused."""
        for name in self.OUTAGE_COMPONENTS:
            os.kill(self.processes[name].pid, signal.SIGSTOP if frozen else signal.SIGCONT)

    def _ready(self) -> bool:
        return self.kubectl is not None and self.kubectl("get", "--raw=/readyz", check=False).returncode == 0

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise ControlPlaneError(f"{name} exited with code {process.returncode}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        return log_tail(self.root, name, lines)

    def _wait_until(self, predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(Exception):
                if predicate():
                    return
            time.sleep(0.25)
        raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what}")

    def _wait_http(self, name: str, url: str, timeout: float, pki: _Pki | None = None) -> None:
        context = None
        if pki is not None:
            context = ssl.create_default_context(cafile=str(pki.ca))
            context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))

        def healthy() -> bool:
            with urllib.request.urlopen(url, timeout=2, context=context) as response:
                return response.status == 200

        self._wait_until(healthy, timeout, f"{name} to answer {url}")

    # --- cluster objects -----------------------------------------------------------------------------

    def _create_fake_nodes(self) -> None:
        for node in FAKE_NODES:
            manifest = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": node, "kubernetes.io/os": "linux"},
                },
                "status": {
                    "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"},
                    "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "4"},
                },
            }
            self.kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def _nodes_ready(self) -> bool:
        nodes = json.loads(self.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        ready = [
            n
            for n in nodes
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
        ]
        return len(ready) == len(FAKE_NODES)

    def _default_service_account(self) -> bool:
        return self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0

    # --- teardown ------------------------------------------------------------------------------------

    def stop(self, grace_s: float = 15) -> None:
        """Stop every process (kwok first, etcd last), each killed if it has not exited `grace_s` after
        SIGTERM, check none survived, and delete the directory."""
        for name in reversed(list(self.processes)):
            stop_process(self.processes[name], grace_s)
        survivors = [pid for pid in _pids_mentioning(str(self.root))]
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.processes.clear()
        shutil.rmtree(self.root, ignore_errors=True)
        if survivors:
            raise ControlPlaneError(f"control-plane processes survived stop() and were killed: {survivors}")

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes.values()]


def _pids_mentioning(text: str) -> list[int]:
    """Processes whose command line mentions `text` (our data directory is in every component's flags)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
    return found


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops the control plane as cleanly as Ctrl-C does."""
    raise KeyboardInterrupt


def main() -> None:
    if sys.argv[1:] != ["up"]:
        sys.exit("usage: python -m tests.support.controlplane up")
    plane = ControlPlane(build_binaries("controlplane")).start()
    print(f"export KUBECONFIG={plane.kubeconfig}", flush=True)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        plane.stop()


def fresh_namespace(kubectl: Kubectl, request: pytest.FixtureRequest, prefix: str) -> Iterator[str]:
    """A namespace named after the test, ready for pods (its default service account exists), deleted after."""
    readable = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"{prefix}-{readable}-{uuid.uuid4().hex[:6]}"
    kubectl.create_namespace(name)

    def has_service_account() -> bool:
        try:
            return bool(kubectl.json("get", "serviceaccount", "default", "-n", name))
        except ControlPlaneError:
            return False

    kubectl.wait_for(has_service_account, what=f"the default service account in {name}")
    yield name
    kubectl.delete_namespace(name)


if __name__ == "__main__":
    main()
