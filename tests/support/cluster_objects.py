"""The objects the API-server tier's operator tests apply: an iris ModelDeployment and a short ProfileRun."""

from __future__ import annotations

import json

from tests.support.controlplane import Kubectl


def apply(kubectl: Kubectl, namespace: str, *objects: dict) -> None:
    kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )


def model_deployment(name: str = "iris", replicas: int = 2) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {
            "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"},
            "replicas": replicas,
        },
    }


def profile_run(name: str, prometheus_url: str | None, **spec: object) -> dict:
    body: dict = {
        "target": {"deploymentRef": {"name": "iris"}},
        "payload": {"inline": '{"inputs": []}'},
        "load": {"closedLoop": {"concurrency": 2}, "warmup": "0s", "minDuration": "3s", "maxDuration": "3s"},
        "slo": {"latency": [{"percentile": 99, "max": "1s"}], "targetThroughput": 100},
        "cost": {"perCoreHour": 0.04, "perGibHour": 0.005},
        "readyTimeout": "60s",
        **spec,
    }
    if prometheus_url is not None:
        body["metrics"] = {"prometheus": {"url": prometheus_url, "scrapeInterval": "1s", "timeout": "5s"}}
    return {"apiVersion": "kaliper.dev/v1alpha1", "kind": "ProfileRun", "metadata": {"name": name}, "spec": body}
