"""The operator's ModelDeployment handlers on the real API server, running in this process (kopf's
KopfRunner). Pods land on kwok's nodes, which report them Running and Ready; the controller manager's
Deployment controller does the rest, as in a cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kopf.testing import KopfRunner

from tests.support.controlplane import Kubectl
from tests.support.gitops import argocd_health, kstatus
from tests.support.operator_runner import running_operator


@pytest.fixture(scope="module")
def operator(crds: Kubectl) -> Iterator[KopfRunner]:
    with running_operator(crds) as runner:
        yield runner


MODEL = {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"}


def model_deployment(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {"model": MODEL, **spec},
    }


KINDS = ("deployment", "service")  # what the operator makes of a ModelDeployment, in the order it applies them


def status_of(kubectl: Kubectl, namespace: str, name: str) -> dict:
    return kubectl.json("get", "modeldeployment", name, "-n", namespace).get("status") or {}


def test_a_model_deployment_becomes_a_ready_deployment_and_service(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    spec = {
        "replicas": 2,
        "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        "threads": {"intraOp": 1},
    }
    crds("apply", "-n", namespace, "-f", "-", input=json.dumps(model_deployment("iris", **spec)))
    # The operator applies the Deployment, then the Service (a clean-clone run read the Service in between).
    crds.wait_for(
        lambda: all(crds("get", kind, "iris", "-n", namespace, check=False).returncode == 0 for kind in KINDS),
        what="the Deployment and the Service",
    )
    owner = crds.json("get", "modeldeployment", "iris", "-n", namespace)
    stored = crds.json("get", "deployment", "iris", "-n", namespace)
    # The built-in server of the project's image serves the ConfigMap's model under its name, on port 8080 of
    # the pod, with one intra-op thread and exactly the resources asked for.
    pod = stored["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "server" and container["image"] == "ghcr.io/kaliper-dev/kaliper:0.1.0"
    assert container["command"] == ["python", "-m", "kaliper.serving"]
    assert container["args"] == [
        "--model", "/models/source/model.onnx", "--name", "iris", "--host", "0.0.0.0", "--port", "8080",
        "--grpc-port", "8081", "--intra-op", "1",
    ]  # fmt: skip
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "128Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }
    assert container["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "grpc", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http", "scheme": "HTTP"}
    assert pod["volumes"] == [{"name": "model", "configMap": {"name": "iris-model", "defaultMode": 420}}]
    labels = {
        "app.kubernetes.io/name": "kaliper-model",
        "app.kubernetes.io/instance": "iris",
        "kaliper.dev/modeldeployment": "iris",
    }
    assert stored["spec"]["replicas"] == 2 and stored["spec"]["selector"] == {"matchLabels": labels}
    assert stored["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kaliper.dev/v1alpha1",
            "kind": "ModelDeployment",
            "name": "iris",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    # The Service sends port 80 to the pods' http port, and selects exactly this deployment's pods.
    service = crds.json("get", "service", "iris", "-n", namespace)
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["selector"] == labels
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
        {"name": "grpc", "port": 8081, "targetPort": "grpc", "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"},
    ]

    crds.wait_for(
        lambda: status_of(crds, namespace, "iris").get("phase") == "Ready",
        timeout=90,
        what="the ModelDeployment to become Ready",
    )
    status = status_of(crds, namespace, "iris")
    assert status["readyReplicas"] == 2 and status["endpoint"] == f"http://iris.{namespace}.svc:80"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Ready": "True",
        "Progressing": "False",
        "Degraded": "False",
        "Reconciling": "False",
        "Stalled": "False",
    }
    assert kstatus(crds, namespace, "modeldeployment", "iris") == ("Current", "Resource is Ready")
    ready = f"2/2 replicas ready at http://iris.{namespace}.svc:80"
    assert argocd_health(crds, namespace, "modeldeployment", "iris") == ("Healthy", ready)
    pods = crds.json("get", "pods", "-n", namespace, "-l", "kaliper.dev/modeldeployment=iris")["items"]
    assert len(pods) == 2 and all(p["spec"]["nodeName"].startswith("kwok-node") for p in pods)

    # A spec change rolls out, and the status follows it.
    crds("patch", "modeldeployment", "iris", "-n", namespace, "--type=merge", "-p", '{"spec":{"replicas":3}}')
    crds.wait_for(
        lambda: status_of(crds, namespace, "iris").get("readyReplicas") == 3, timeout=90, what="three ready replicas"
    )
    assert status_of(crds, namespace, "iris")["observedGeneration"] == 2

    # Deleting the ModelDeployment deletes what it owns.
    crds("delete", "modeldeployment", "iris", "-n", namespace)
    crds.wait_for(
        lambda: (
            crds("get", "deployment,service", "iris", "-n", namespace, check=False).returncode != 0
            and "NotFound" in crds("get", "service", "iris", "-n", namespace, check=False).stderr
        ),
        timeout=60,
        what="the garbage collector",
    )


def test_a_spec_that_cannot_run_on_kubernetes_fails_with_the_reason(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    local = model_deployment("local-only")
    local["spec"]["model"] = {"file": "models/iris.onnx"}
    crds("apply", "-n", namespace, "-f", "-", input=json.dumps(local))
    crds.wait_for(
        lambda: status_of(crds, namespace, "local-only").get("phase") == "Failed", timeout=60, what="the Failed status"
    )
    status = status_of(crds, namespace, "local-only")
    assert "model.file is a path on one machine" in status["message"]
    gitops, message = kstatus(crds, namespace, "modeldeployment", "local-only")
    assert gitops == "Failed" and "model.file is a path on one machine" in message
    assert argocd_health(crds, namespace, "modeldeployment", "local-only") == ("Degraded", message)
    assert crds("get", "deployment", "local-only", "-n", namespace, check=False).returncode != 0


def test_an_autoscaled_model_deployment_gets_a_horizontal_pod_autoscaler_that_sets_its_replicas(
    operator, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    """The controller manager's own HPA controller (no metrics here: it only holds the replicas within
    minReplicas and maxReplicas) scales the Deployment the operator applied without replicas to minReplicas; the
    ModelDeployment is Ready at those. Without autoscaling in its spec again, the HPA goes and spec.replicas is
    applied."""
    scaling = {"minReplicas": 2, "maxReplicas": 5, "cpuUtilization": 70}
    spec = {"resources": {"requests": {"cpu": "250m"}}, "autoscaling": scaling}
    crds("apply", "-n", namespace, "-f", "-", input=json.dumps(model_deployment("scaled", **spec)))
    crds.wait_for(
        lambda: crds("get", "hpa", "scaled", "-n", namespace, check=False).returncode == 0, what="the autoscaler"
    )
    hpa = crds.json("get", "hpa", "scaled", "-n", namespace)
    owner = crds.json("get", "modeldeployment", "scaled", "-n", namespace)
    assert hpa["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 5)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "scaled"}
    crds.wait_for(
        lambda: (
            status_of(crds, namespace, "scaled").get("readyReplicas") == 2
            and status_of(crds, namespace, "scaled").get("phase") == "Ready"
        ),
        timeout=120,
        what="the autoscaler's two replicas ready",
    )
    status = status_of(crds, namespace, "scaled")
    assert (status["autoscalerName"], status["message"]) == (
        "scaled",
        f"2/2 replicas ready at http://scaled.{namespace}.svc:80",
    )
    managers = crds.json("get", "deployment", "scaled", "-n", namespace, "--show-managed-fields")
    replicas_owners = [m["manager"] for m in managers["metadata"]["managedFields"] if '"f:replicas"' in json.dumps(m)]
    assert "kaliper" not in replicas_owners  # the operator never applied replicas

    # Autoscaling taken out: the HPA is deleted and the Deployment gets spec.replicas.
    change = [{"op": "remove", "path": "/spec/autoscaling"}, {"op": "add", "path": "/spec/replicas", "value": 3}]
    crds("patch", "modeldeployment", "scaled", "-n", namespace, "--type=json", "-p", json.dumps(change))
    crds.wait_for(
        lambda: "NotFound" in crds("get", "hpa", "scaled", "-n", namespace, check=False).stderr,
        timeout=60,
        what="the autoscaler deleted",
    )
    crds.wait_for(
        lambda: status_of(crds, namespace, "scaled").get("readyReplicas") == 3, timeout=90, what="three replicas"
    )
    assert "autoscalerName" not in status_of(crds, namespace, "scaled")
