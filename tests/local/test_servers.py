"""Server replicas on one machine: each in its own cgroup, all of them serving."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.local.servers import ServerGroup
from kaliper.netutil import free_port
from kaliper.serving.examples import make_iris, make_iris_sklearn

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
        assert len(group.groups) == 2 and len({tuple(g.pids()) for g in group.groups}) == 2
        before = [g.sample().cpu_usage_s for g in group.groups]
        send_on_new_connections(group.url, ONNX_BODY if runtime == "onnxruntime" else SKLEARN_BODY, 60)
        used = [g.sample().cpu_usage_s - b for g, b in zip(group.groups, before, strict=True)]
        assert all(u > 0.005 for u in used), used  # both replicas did work
        if runtime == "mlserver":  # ports of their own behind the round-robin proxy
            assert group.proxy is not None and sorted(group.proxy.connections.values()) == [30, 30]
        else:  # one port shared with SO_REUSEPORT
            assert group.proxy is None and group.ports == [group.port]
    finally:
        group.stop()
    assert all(not d.exists() for g in group.groups for d in g.dirs.values())
