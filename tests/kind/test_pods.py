"""Pods on the kind cluster: limits become real cgroup settings, and the cluster's traffic stays inside its own
network on this machine."""

from __future__ import annotations

import json
import subprocess

from tests.support.kind_cluster import IMAGE, KindCluster

PROBE = """
import socket
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "reached"
    except OSError as exc:
        return type(exc).__name__ + ":" + str(exc.errno)
print(socket.gethostbyname("kubernetes.default.svc.cluster.local"))
print(reach("kubernetes.default.svc", 443))
print(reach("{outside}", 443))
print(reach("192.0.2.1", 80))
"""


def pod(name: str, command: list[str], limits: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": IMAGE, "command": command, "resources": {"limits": limits}}],
        },
    }


def python_output(cluster: KindCluster, namespace: str, name: str, program: str) -> str:
    """Run a Python program in a pod of the project's image in the cluster; its output once it has finished."""
    kubectl = cluster.kubectl
    probe = pod(name, ["python", "-c", program], {"cpu": "250m", "memory": "128Mi"})
    kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(probe))
    kubectl.wait_for(
        lambda: kubectl.json("get", "pod", name, "-n", namespace)["status"].get("phase") == "Succeeded",
        timeout=60,
        what=f"pod {name} to finish",
    )
    return kubectl("logs", name, "-n", namespace).stdout


def host_address() -> str:
    """This machine's own address on its default interface: outside the cluster, never to be reached."""
    route = subprocess.run(["ip", "-j", "route", "get", "1.1.1.1"], capture_output=True, text=True, check=True)
    return json.loads(route.stdout)[0]["prefsrc"]


def test_limits_are_real_cfs_quotas_and_memory_limits(cluster: KindCluster, cluster_namespace: str) -> None:
    kubectl = cluster.kubectl
    sleeper = pod("limited", ["sleep", "300"], {"cpu": "500m", "memory": "128Mi"})
    kubectl("apply", "-n", cluster_namespace, "-f", "-", input=json.dumps(sleeper))
    kubectl("wait", "-n", cluster_namespace, "--for=condition=Ready", "pod/limited", "--timeout=60s")
    running = kubectl.json("get", "pod", "limited", "-n", cluster_namespace)
    assert running["status"]["qosClass"] == "Guaranteed"
    cpu = cluster.pod_cgroup(running, "main", "cpu")
    assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "50000"
    assert (cpu / "cpu.cfs_period_us").read_text().strip() == "100000"
    memory = cluster.pod_cgroup(running, "main", "memory")
    assert (memory / "memory.limit_in_bytes").read_text().strip() == str(128 * 2**20)


def test_pods_reach_services_by_name_and_nothing_outside(cluster: KindCluster, cluster_namespace: str) -> None:
    lines = python_output(cluster, cluster_namespace, "probe", PROBE.format(outside=host_address())).split()
    assert lines[0] == "10.96.0.1"  # CoreDNS answers with the kubernetes Service's cluster IP
    assert lines[1] == "reached"  # kube-proxy forwards the Service to the API server
    assert lines[2:] == ["OSError:101", "OSError:101"]  # ENETUNREACH: the kind network has no route out


IMAGE_PROBE = """
import importlib.metadata, platform, shutil
wheel = importlib.metadata.distribution("hdrhistogram").read_text("WHEEL")
print(next(line for line in wheel.splitlines() if line.startswith("Tag:")))
print(platform.machine(), shutil.which("gcc"))
"""


def test_the_image_compiles_what_has_no_wheel_and_ships_no_compiler(
    cluster: KindCluster, cluster_namespace: str
) -> None:
    lines = python_output(cluster, cluster_namespace, "image", IMAGE_PROBE).splitlines()
    # Built from source in the image's build stage (a PyPI wheel would say manylinux), as it must be on arm64.
    assert lines[0] == "Tag: cp311-cp311-linux_x86_64"
    assert lines[1] == "x86_64 None"  # the compiler stayed in the build stage
