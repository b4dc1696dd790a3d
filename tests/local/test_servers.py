"""Server replicas on one machine: each in its own cgroup, all of them serving."""

from __future__ import annotations

import contextlib
import json
import os
import re
import urllib.request
from pathlib import Path

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.servers import ServerGroup
from kaliper.netutil import free_port
from kaliper.serving.examples import make_iris, make_iris_sklearn
from tests.support.kernel import cpu_quota_us, kaliper_group, kernel_cgroups, limit_controllers, listening_ports

ONNX_BODY = {"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
SKLEARN_BODY = {"inputs": [{"name": "predict", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]}


def send_on_new_connections(url: str, body: dict, count: int) -> None:
    for _ in range(count):  # urllib opens a new connection per request: each is placed on a replica anew
        request = urllib.request.Request(
            f"{url}/v2/models/iris/infer",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200


def mlserver_ports(log_dir: Path, replicas: int) -> list[int]:
    """The port each MLServer replica listens on, by replica, from the settings file it was started with."""
    return [json.loads((log_dir / f"workdir-{r}" / "settings.json").read_text())["http_port"] for r in range(replicas)]


@pytest.mark.parametrize("runtime", ["onnxruntime", "mlserver"])
def test_every_replica_serves_in_its_own_cgroup(tmp_path: Path, runtime: str) -> None:
    model = make_iris(tmp_path / "iris.onnx") if runtime == "onnxruntime" else make_iris_sklearn(tmp_path / "m.joblib")
    spec = ModelDeploymentSpec.model_validate(
        {
            "model": {"file": str(model)},
            "runtime": {"type": runtime},
            "replicas": 2,
            "resources": {"limits": {"cpu": "1"}},
        }
    )
    group = ServerGroup(spec, model, "iris", free_port(), tmp_path / "logs").start()
    try:
        group.wait_ready(120)
        # Each replica's server is in a group of its own, named after this run, the model and the replica, with
        # the replica's limit (cpu 1: 100 ms of every 100 ms period); the kernel has every process of that
        # group in it, for the CPU and the memory controller alike, and no process is in both groups.
        assert len(group.groups) == len(group.processes) == 2
        controllers = limit_controllers()
        for replica, (cgroup, server) in enumerate(zip(group.groups, group.processes, strict=True)):
            assert re.fullmatch(rf"{os.getpid()}-iris-{replica}-[0-9a-f]{{6}}", cgroup.name), cgroup.name
            assert cpu_quota_us(cgroup.name) == "100000"
            members = cgroup.pids()
            assert server.pid in members, (replica, members)
            expected = dict.fromkeys(controllers, kaliper_group(cgroup.name))
            assert {c: kernel_cgroups(server.pid)[c] for c in controllers} == expected
            for pid in members:
                with contextlib.suppress(FileNotFoundError):  # a helper process that has exited since
                    assert {c: kernel_cgroups(pid)[c] for c in controllers} == expected, pid
        assert group.groups[0].name != group.groups[1].name
        assert not set(group.groups[0].pids()) & set(group.groups[1].pids())

        body = ONNX_BODY if runtime == "onnxruntime" else SKLEARN_BODY
        before = [g.sample().cpu_usage_s for g in group.groups]
        if runtime == "mlserver":  # ports of their own behind the round-robin proxy
            assert group.proxy is not None
            ports = mlserver_ports(tmp_path / "logs", 2)
            served_by = []
            for _ in range(60):
                counts = [group.proxy.connections[p] for p in ports]
                send_on_new_connections(group.url, body, 1)
                grown = [group.proxy.connections[p] - c for p, c in zip(ports, counts, strict=True)]
                served_by.append(grown.index(1))
            # Round robin starts with the first replica: nothing reached the proxy before (readiness is probed
            # on each replica's own port). A random or hashed spread can also end 30/30; only taking turns
            # gives 0, 1, 0, 1, ...
            assert served_by == [0, 1] * 30
            assert group.proxy.connections == {ports[0]: 30, ports[1]: 30}
        else:  # one port shared with SO_REUSEPORT; the kernel spreads the connections
            # The shared port answers once the first replica listens; wait_ready returns only when both do.
            both = {group.port, group.grpc_port}  # HTTP and gRPC, each shared by both replicas
            assert [listening_ports(server.pid) for server in group.processes] == [both, both]
            send_on_new_connections(group.url, body, 60)
            assert group.proxy is None and group.ports == [group.port]
        used = [g.sample().cpu_usage_s - b for g, b in zip(group.groups, before, strict=True)]
        assert all(u > 0.005 for u in used), used  # both replicas did work, each in its own group
    finally:
        group.stop()
    assert all(not d.exists() for g in group.groups for d in g.dirs.values())
