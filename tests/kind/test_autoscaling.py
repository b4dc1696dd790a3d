"""A ModelDeployment with spec.autoscaling on the real cluster: the operator makes its HorizontalPodAutoscaler,
the controller manager's own HPA controller reads the pods' CPU from metrics-server (built here from its module,
installed by the walkthrough: examples/kind/metrics-server.yaml) and scales the Deployment the operator applied
without replicas; the ModelDeployment follows. The load is a pod of Kaliper's image sending requests for a
bounded time from four threads (a ProfileRun of an autoscaled target is refused until it rehearses one)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.kind_cluster import IMAGE, KindCluster
from tests.support.kind_operator import Operator, apply_with_model

IRIS = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {"name": "iris"},
    "spec": {
        "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        "threads": {"intraOp": 1},
        "autoscaling": {
            "minReplicas": 1,
            "maxReplicas": 3,
            "cpuUtilization": 50,
            "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}},
        },
    },
}
# Four threads asking iris as fast as it answers for at most 150 s: its one replica uses its 500m limit, five times
# the 100m it requests, ten times the 50% the autoscaler aims at.
LOAD = """
import json, threading, time, urllib.request
url = "http://iris/v2/models/iris/infer"
body = json.dumps({"inputs": [{"name": "float_input", "shape": [1, 4], "datatype": "FP32",
                               "data": [5.1, 3.5, 1.4, 0.2]}]}).encode()
end = time.monotonic() + 150
request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
def ask():
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(request, timeout=5).read()
        except Exception:
            time.sleep(0.1)
threads = [threading.Thread(target=ask) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
"""
LOAD_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "burst"},
    "spec": {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": 200,
        "containers": [{"name": "load", "image": IMAGE, "command": ["python", "-c", LOAD]}],
    },
}


def test_the_clusters_autoscaler_scales_a_model_deployment_under_load(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model: Path
) -> None:
    kubectl, namespace = cluster.kubectl, cluster_namespace
    apply_with_model(cluster, namespace, iris_model, IRIS)
    kubectl.wait_for_phase("modeldeployment", "iris", namespace, "Ready", timeout=120)
    hpa = kubectl.json("get", "hpa", "iris", "-n", namespace)
    assert hpa["spec"]["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
    ]
    kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(LOAD_POD))

    def scaled() -> bool:
        status = kubectl.json("get", "hpa", "iris", "-n", namespace).get("status") or {}
        return (status.get("desiredReplicas") or 0) >= 2

    kubectl.wait_for(scaled, timeout=180, what="the autoscaler to ask for more replicas under the load")
    status = kubectl.json("get", "hpa", "iris", "-n", namespace)["status"]
    (cpu,) = status["currentMetrics"]
    assert cpu["resource"]["name"] == "cpu" and cpu["resource"]["current"]["averageUtilization"] > 50, status
    kubectl.wait_for(
        lambda: (
            (kubectl.json("get", "modeldeployment", "iris", "-n", namespace).get("status") or {}).get(
                "readyReplicas", 0
            )
            >= 2
        ),
        timeout=120,
        what="the ModelDeployment's new replicas ready",
    )
    model = kubectl.json("get", "modeldeployment", "iris", "-n", namespace)["status"]
    assert model["autoscalerName"] == "iris" and model["replicas"] >= 2
    kubectl("delete", "pod", "burst", "-n", namespace, "--wait=false")
