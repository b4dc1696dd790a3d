"""The chart on the kind cluster: the operator a pod of the image built from the Dockerfile, under the chart's
ServiceAccount, watching as that identity (the API server's audit log says so)."""

from __future__ import annotations

from tests.support.kind_cluster import IMAGE, KindCluster
from tests.support.kind_operator import OPERATOR_ACCOUNT, OPERATOR_NAMESPACE, Operator


def test_the_operator_runs_as_a_pod_under_the_charts_service_account(cluster: KindCluster, operator: Operator) -> None:
    pod = operator.pod
    assert pod["spec"]["serviceAccountName"] == "kaliper-kaliper"
    assert pod["spec"]["containers"][0]["image"] == IMAGE
    assert pod["spec"]["nodeName"] in cluster.workers
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert (
        cluster.kubectl("get", "crd", "profileruns.kaliper.dev").returncode == 0
    )  # from the chart (templates/crds.yaml)
    watches = [
        e
        for e in cluster.audit_events()
        if e["user"]["username"] == OPERATOR_ACCOUNT
        and e["verb"] == "list"  # kopf lists, then watches (a watch is logged when it ends)
        and e["objectRef"]["resource"] == "profileruns"
    ]
    assert watches, f"the operator pod ({OPERATOR_NAMESPACE}) never watched ProfileRuns as {OPERATOR_ACCOUNT}"
