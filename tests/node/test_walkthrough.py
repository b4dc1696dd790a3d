"""The kind walkthrough of the README on a real node: the chart installed with `helm install`, the operator
a pod under the chart's ServiceAccount, the model server and the load generator real pods of the image built
from the Dockerfile, resource figures from a real Prometheus scraping the kubelet's cAdvisor, checked against
the kernel's own accounting of the server's cgroup."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.support.node import IMAGE, Node
from tests.support.node_operator import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, Operator, run_report, wait_for_phase
from tests.support.paths import EXAMPLES
from tests.support.podcpu import PodCpuSampler


def measured_window(trial: dict) -> tuple[float, float]:
    """The window the operator queries Prometheus over: the stage's measured seconds after its warm-up."""
    stage = trial["stage"]
    end = datetime.fromisoformat(stage["startedAt"]).timestamp() + stage["warmupS"] + stage["measuredS"]
    return end - round(stage["measuredS"]), end


def test_the_operator_runs_as_a_pod_under_the_charts_service_account(node: Node, operator: Operator) -> None:
    pod = operator.pod
    assert pod["spec"]["serviceAccountName"] == "kaliper-kaliper"
    assert pod["spec"]["containers"][0]["image"] == IMAGE
    assert pod["spec"]["nodeName"] == "kaliper-node"
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert node.kubectl("get", "crd", "profileruns.kaliper.dev").returncode == 0  # from the chart (templates/crds.yaml)
    watches = [
        e
        for e in node.audit_events()
        if e["user"]["username"] == OPERATOR_ACCOUNT
        and e["verb"] == "list"  # kopf lists, then watches (a watch is logged when it ends)
        and e["objectRef"]["resource"] == "profileruns"
    ]
    assert watches, f"the operator pod ({OPERATOR_NAMESPACE}) never watched ProfileRuns as {OPERATOR_ACCOUNT}"


def test_the_kind_walkthrough_runs_to_succeeded_with_real_pods(
    node: Node, operator: Operator, node_namespace: str, iris_model
) -> None:  # type: ignore[no-untyped-def]
    kubectl, ns = node.kubectl, node_namespace
    kubectl("create", "configmap", "iris-model", f"--from-file=model.onnx={iris_model}", "-n", ns)
    with PodCpuSampler(node, ns, "kaliper.dev/role=server", "server") as truth:
        kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            str(EXAMPLES / "kind" / "iris.yaml"),
            "-f",
            str(EXAMPLES / "kind" / "profilerun.yaml"),
        )
        status = wait_for_phase(node, ns, "iris-sweep", "Succeeded", timeout=600)

    assert status["progress"]["summary"] == "2/2"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Degraded"]["status"] == "False", conditions["Degraded"]["message"]
    full = run_report(node, ns, "iris-sweep")
    for summary, trial, limit in zip(status["trials"], full["trials"], (0.5, 1.0), strict=True):
        assert summary["phase"] == "Succeeded" and summary["requests"] > 0
        resources = summary["resources"]
        assert resources["restarts"] == 0 and resources["oomKills"] == 0
        start, end = measured_window(trial)
        accounted = truth.cores(f"{summary['name']}-", start, end)
        assert resources["cpuAvgCores"] == pytest.approx(accounted, rel=0.10), (summary["name"], start, end)
        assert resources["cpuAvgCores"] <= limit * 1.05  # the CFS quota held
        assert resources["memoryPeakBytes"] > 20 * 2**20  # a Python process with onnxruntime loaded
    assert status["trials"][0]["resources"]["cpuThrottledRatio"] > 0  # 500m is tight for this load

    # Every server pod ran the project's image; the load generator published under its own identity.
    servers = [p for p in truth.pods.values()]
    assert len(servers) == 2 and {p["spec"]["containers"][0]["image"] for p in servers} == {IMAGE}
    creators = {
        e["objectRef"].get("name"): e["user"]["username"]
        for e in node.audit_events()
        if e["verb"] == "create"
        and e["objectRef"].get("resource") == "configmaps"
        and e["objectRef"].get("namespace") == ns
    }
    loadgen = f"system:serviceaccount:{ns}:iris-sweep-loadgen"
    assert creators["iris-sweep-t0-result"] == loadgen and creators["iris-sweep-t1-result"] == loadgen
