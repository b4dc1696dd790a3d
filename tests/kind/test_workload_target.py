"""A ProfileRun whose target is a Deployment that already runs, on the kind cluster: each trial runs a copy of
its pod template with the swept CPU, measured from cAdvisor through Prometheus, while the original keeps
serving behind its own Service, untouched; the recommendation is a patch of the original."""

from __future__ import annotations

import json
import os
import subprocess

import yaml

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.manifests.modeldeployment import build_deployment
from tests.support.kind_cluster import IMAGE, KindCluster
from tests.support.kind_operator import Operator, apply_with_model, poll_until_phase
from tests.support.paths import KALIPER

APP = {"app": "scorer"}


def scorer() -> tuple[dict, dict]:
    """A team's own Deployment of the iris model (Kaliper's server in Kaliper's image, not made by Kaliper)
    and its Service."""
    spec = ModelDeploymentSpec.model_validate(
        {
            "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"},
            "resources": {"requests": {"cpu": "300m", "memory": "256Mi"}, "limits": {"cpu": "300m", "memory": "256Mi"}},
            "threads": {"intraOp": 1},
        }
    )
    deployment = build_deployment("scorer", "", "", spec, IMAGE)
    deployment["metadata"] = {"name": "scorer", "labels": APP}
    deployment["spec"]["selector"] = {"matchLabels": APP}
    deployment["spec"]["template"]["metadata"]["labels"] = APP
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "scorer"},
        "spec": {"selector": APP, "ports": [{"port": 80, "targetPort": "http"}]},
    }
    return deployment, service


SIZING = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ProfileRun",
    "metadata": {"name": "sizing"},
    "spec": {
        "target": {"workloadRef": {"name": "scorer"}},
        "request": {"modelName": "iris"},
        "payload": {"tensors": {"inputs": [{"name": "float_input", "shape": [-1, 4], "datatype": "FP32"}]}},
        # CPU and memory figures need two samples of each pod in the window: the tier's Prometheus
        # scrapes every 5 s (prometheus_source), and each sample carries cAdvisor's own timestamp, up to 15 s
        # older: 2 x (5 + 15) = 40 s at least (at kube-prometheus-stack's 30 s it is 90 s, as
        # examples/kind/profilerun.yaml says).
        "load": {"closedLoop": {"concurrency": 2}, "warmup": "1s", "minDuration": "45s", "maxDuration": "45s"},
        "sweep": {"cpu": ["200m", "400m"]},
        "search": {"parallelism": 2},
        "slo": {"latency": [{"percentile": 99, "max": "500ms"}]},
        "cost": {"perCoreHour": 0.04},
        "readyTimeout": "3m",
    },
}


def test_trials_run_copies_of_a_deployment_and_leave_it_alone(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model, prometheus_source: dict[str, str]
) -> None:  # type: ignore[no-untyped-def]
    kubectl, ns = cluster.kubectl, cluster_namespace
    deployment, service = scorer()
    apply_with_model(cluster, ns, iris_model, deployment, service)
    kubectl("rollout", "status", "deployment/scorer", "-n", ns, "--timeout=180s")
    before = kubectl.json("get", "deployment", "scorer", "-n", ns)
    original_pods = {p["status"]["podIP"] for p in kubectl.json("get", "pods", "-n", ns, "-l", "app=scorer")["items"]}

    sizing = {**SIZING, "spec": {**SIZING["spec"], "metrics": {"prometheus": prometheus_source}}}
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(sizing))
    behind_original: set[str] = set()  # every address the original Service's EndpointSlices listed
    copies: dict[str, tuple[str, str]] = {}  # trial pod IP -> (its trial, its CPU limit)

    def look() -> None:
        slices = kubectl.json("get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=scorer")
        for each in slices["items"]:
            for endpoint in each.get("endpoints") or []:
                behind_original.update(endpoint["addresses"])
        selector = "kaliper.dev/profilerun=sizing,kaliper.dev/role=server"
        trial_pods = kubectl.json("get", "pods", "-n", ns, "-l", selector)
        for pod in trial_pods["items"]:
            if pod["status"].get("podIP"):
                limits = pod["spec"]["containers"][0]["resources"]["limits"]
                copies[pod["status"]["podIP"]] = (pod["metadata"]["labels"]["kaliper.dev/trial"], limits["cpu"])

    status = poll_until_phase(cluster, ns, "sizing", "Succeeded", look, timeout=360)

    # Each trial ran its own copy with the swept CPU (and the original's memory), and only the original's pod
    # ever stood behind the original's Service.
    assert sorted(set(copies.values())) == [("0", "200m"), ("1", "400m")], copies
    assert behind_original == original_pods, (behind_original, copies)
    after = kubectl.json("get", "deployment", "scorer", "-n", ns)
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"] == before["spec"]
    assert after["status"]["readyReplicas"] == 1
    # The copies and their Services are gone with their trials.
    left = kubectl.json("get", "deployments,services", "-n", ns, "-l", "kaliper.dev/profilerun=sizing")["items"]
    assert left == []

    assert [(t["parameters"]["cpu"], t["phase"]) for t in status["trials"]] == [
        ("200m", "Succeeded"),
        ("400m", "Succeeded"),
    ]
    for trial in status["trials"]:
        figures = trial["resources"]
        assert 0 < figures["cpuAvgCores"] <= float(trial["parameters"]["cpu"].rstrip("m")) / 1000 * 1.05, trial
        assert figures["memoryPeakBytes"] > 50 * 2**20, trial  # Python, numpy and onnxruntime loaded
    recommendation = status["recommendation"]
    assert "mergePatch" not in recommendation
    patch = json.loads(recommendation["strategicMergePatch"])
    container = patch["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == "server"
    assert container["resources"]["requests"]["cpu"] == recommendation["requests"]["cpu"]

    # `kaliper recommend` reads the report and the original from the cluster: the manifest, patched.
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    shown = subprocess.run(
        [str(KALIPER), "recommend", "sizing", "-n", ns, "--format", "manifest"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    manifest = yaml.safe_load(shown.stdout)
    assert (manifest["kind"], manifest["metadata"]["name"]) == ("Deployment", "scorer")
    served = manifest["spec"]["template"]["spec"]["containers"][0]
    assert served["resources"]["requests"]["cpu"] == recommendation["requests"]["cpu"]
    assert served["image"] == IMAGE and manifest["spec"]["template"]["metadata"]["labels"] == APP
