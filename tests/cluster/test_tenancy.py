"""A namespace user's ProfileRuns against an operator with the chart's default tenancy (nothing allowed beyond
the run's namespace and the admin's Prometheus, users capped at 16), as an attacker would write them: the
metadata address, the API server, another namespace's Service, more users than the cap, another namespace's
series in PromQL, another Prometheus.
Each is refused before anything is made, with the setting that would allow it; a run within its namespace goes
ahead, its load generators held by a NetworkPolicy to its target. The policy's every case is
tests/profiling/test_tenancy.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kaliper.manifests.profilerun import LABEL_RUN
from tests.support.cluster_objects import apply, model_deployment, profile_run
from tests.support.controlplane import Kubectl
from tests.support.operator_runner import Cluster, running_operator

ADMIN_PROMETHEUS = "http://prometheus.monitoring:9090"


@pytest.fixture(scope="module")
def strict_operator(crds: Kubectl) -> Iterator[None]:
    caps = json.dumps({"default": {"users": 16}})  # the chart's tenancy.caps.users: 16
    with running_operator(crds, allowed={"KALIPER_PROMETHEUS_URL": ADMIN_PROMETHEUS, "KALIPER_LOAD_CAPS": caps}):
        yield


def test_a_run_reaches_nothing_outside_its_namespace_and_is_refused_before_anything_is_made(
    strict_operator: None, crds: Kubectl, namespace: str
) -> None:
    apply(crds, namespace, model_deployment())
    attempts = {
        "metadata": (
            profile_run("metadata", None, target={"url": "http://169.254.169.254/latest/meta-data"}),
            "spec.target.url: 169.254.169.254 is a link-local address (such as the cloud's metadata service); ",
        ),
        "api-server": (
            profile_run("api-server", None, target={"url": "https://kubernetes.default.svc"}),
            "spec.target.url: kubernetes.default.svc is a Service of namespace default; ",
        ),
        "neighbour": (
            profile_run("neighbour", None, target={"url": "http://payments.team-b.svc:8080"}),
            "spec.target.url: payments.team-b.svc is a Service of namespace team-b; ",
        ),
        "crowd": (
            profile_run("crowd", None, sweep={"concurrency": [2, 64]}),
            "the run asks for 64 concurrent users (load.closedLoop.concurrency, sweep.concurrency), more than the 16 "
            "its namespace ",
        ),
        "peek": (
            profile_run(
                "peek",
                None,
                metrics={
                    "prometheus": {"url": ADMIN_PROMETHEUS},
                    "customQueries": [{"name": "secrets", "query": 'sum(kube_secret_info{namespace="team-b"})'}],
                },
            ),
            'spec.metrics.customQueries[0].query: kube_secret_info{namespace="team-b"} reads namespace team-b; ',
        ),
        "prometheus": (
            profile_run("prometheus", "http://prometheus.team-b:9090"),
            "spec.metrics.prometheus.url: http://prometheus.team-b:9090 is not a Prometheus this operator may query "
            f"for a namespace's run: it queries the cluster's, {ADMIN_PROMETHEUS} (the chart's prometheus.url); ",
        ),
    }
    apply(crds, namespace, *(run for run, _ in attempts.values()))
    for name, (_, refusal) in attempts.items():
        status = Cluster(crds, namespace, name).wait_phase("Failed")
        assert status["message"].startswith(refusal), status["message"]
    # Refused before anything was made: no load generator, no trial deployment, no identity or role for either
    # (a run refused once its trials are listed, over a cap, keeps its report ConfigMap, as any failed run).
    made = crds.json(
        "get", "jobs,deployments,modeldeployments,serviceaccounts,roles", "-n", namespace, "-l", LABEL_RUN
    )["items"]
    assert [f"{o['kind']}/{o['metadata']['name']}" for o in made] == []
    # Within its namespace (the admin's Prometheus, a Service of its own): planned and started.
    own = profile_run("own", ADMIN_PROMETHEUS, target={"url": f"http://iris.{namespace}.svc:80"})
    apply(crds, namespace, own)
    status = Cluster(crds, namespace, "own").wait_phase("Running")
    assert [t["name"] for t in status["trials"]] == ["own-t0"]
    # Its load generators' NetworkPolicy reaches the pods behind the Service it names, DNS, the API server (this
    # control plane's `kubernetes` Service at 10.0.0.1:443; it publishes no endpoints for its loopback address)
    # and their master, nothing else; owned by the run.
    policy = crds.json("get", "networkpolicy", "own-loadgen", "-n", namespace)
    assert policy["metadata"]["ownerReferences"][0]["name"] == "own"
    iris = {"app.kubernetes.io/instance": "iris", "app.kubernetes.io/name": "kaliper-model"}
    assert policy["spec"] == {
        "podSelector": {
            "matchLabels": {"kaliper.dev/profilerun": "own"},
            "matchExpressions": [
                {"key": "kaliper.dev/role", "operator": "In", "values": ["loadgen", "loadgen-master"]}
            ],
        },
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                        "podSelector": {"matchLabels": {**iris, "kaliper.dev/modeldeployment": "iris"}},
                    }
                ]
            },
            {
                "to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            },
            {"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 443}]},
            {
                "to": [
                    {
                        "podSelector": {
                            "matchLabels": {"kaliper.dev/profilerun": "own", "kaliper.dev/role": "loadgen-master"}
                        }
                    }
                ],
                "ports": [{"protocol": "TCP", "port": 5557}],
            },
        ],
    }
