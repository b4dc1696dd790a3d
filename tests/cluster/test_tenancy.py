"""A namespace user's ProfileRuns against an operator with strict tenancy (nothing allowed beyond the run's
namespace and the admin's Prometheus, users capped at 16 and requests at 20 per second), written as an attacker
would: addresses in other spellings, a full-width metadata address, lookalike names, Services that send the load
elsewhere, malformed URLs, a query that would hold the operator, load over the caps by a ramp or by trials at
once, another team's Prometheus or another path of a gateway, fitted workloads that would query before the run is
admitted. Each is refused with a literal message before the operator sends anything: two recording
"Prometheus" servers (the admin's and another's) hear nothing from the refused runs, then hear the one fitted
run that is admitted. A run within its namespace goes ahead, its load generators given the Service's absolute
cluster name and held by a NetworkPolicy to its pods. The policy's every case is tests/profiling/test_tenancy.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from kaliper.manifests.profilerun import LABEL_RUN
from tests.support.cluster_objects import apply, model_deployment, profile_run
from tests.support.controlplane import Kubectl
from tests.support.operator_runner import Cluster, running_operator

EMPTY_VECTOR = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()


class RecordingPrometheus:
    """A Prometheus double that answers every query with no series and records each request the operator sends
    it (path and query), on a loopback address of its own."""

    def __init__(self, host: str) -> None:
        self.requests: list[str] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                recorded.append(f"{parts.path} {parse_qs(parts.query).get('query', [''])[0]}")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(EMPTY_VECTOR)))
                self.end_headers()
                self.wfile.write(EMPTY_VECTOR)

            do_POST = do_GET

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def prometheuses() -> Iterator[tuple[RecordingPrometheus, RecordingPrometheus]]:
    admins, others = RecordingPrometheus("127.0.0.1"), RecordingPrometheus("127.0.0.2")
    yield admins, others
    admins.close()
    others.close()


@pytest.fixture(scope="module")
def strict_operator(crds: Kubectl, prometheuses: tuple[RecordingPrometheus, RecordingPrometheus]) -> Iterator[None]:
    admins, others = prometheuses
    caps = json.dumps({"default": {"users": 16, "rate": 20}})  # the chart's tenancy.caps
    settings = {
        "KALIPER_PROMETHEUS_URL": admins.url,
        "KALIPER_ALLOW_PROMETHEUS_URLS": f"{others.url}/gateway/team-a",  # one path of another's
        "KALIPER_LOAD_CAPS": caps,
    }
    with running_operator(crds, allowed=settings):
        yield


def fitted_run(name: str, prometheus: str, selector: str = 'model_name="m"', target: str = "http://iris") -> dict:
    prompts = {
        "fromPrometheus": {"url": prometheus, "selector": selector, "window": "10m"},
        "tokenizer": {"configMap": {"name": "tokenizer", "key": "tokenizer.json"}},
    }
    return profile_run(
        name,
        None,
        target={"url": target},
        request={"protocol": "openai-completions", "modelName": "m"},
        payload={"prompts": prompts},
        load={"fitted": {}, "warmup": "0s", "minDuration": "2s", "maxDuration": "2s"},
    )


def service(name: str, spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def test_a_run_reaches_nothing_outside_its_namespace_and_is_refused_before_anything_is_sent(
    strict_operator: None,
    crds: Kubectl,
    namespace: str,
    prometheuses: tuple[RecordingPrometheus, RecordingPrometheus],
) -> None:
    admins, others = prometheuses
    apply(
        crds,
        namespace,
        model_deployment(),
        service("metadata", {"type": "ExternalName", "externalName": "metadata.google.internal"}),
        service("handmade", {"ports": [{"port": 80}]}),  # endpoints written by hand: anywhere
    )
    own_only = f"a ProfileRun loads only what its own namespace ({namespace}) holds"
    deep = "(" * 2000 + "up" + ")" * 2000
    attempts = {
        "metadata": (
            profile_run("metadata", None, target={"url": "http://169.254.169.254/latest/meta-data"}),
            "spec.target.url: 169.254.169.254 is a link-local address (such as the cloud's metadata service); ",
        ),
        "wide-metadata": (
            profile_run("wide-metadata", None, target={"url": "http://\uff11\uff16\uff19\uff0e254\u3002169.254/"}),
            "spec.target.url: 169.254.169.254 is a link-local address (such as the cloud's metadata service); ",
        ),
        "hex-loopback": (
            profile_run("hex-loopback", None, target={"url": "http://0x7f000001:8080"}),
            "spec.target.url: 127.0.0.1 is a loopback address (the operator's own pod); ",
        ),
        "api-server": (
            profile_run("api-server", None, target={"url": "https://kubernetes.default.svc"}),
            "spec.target.url: kubernetes.default.svc is a Service of namespace default; ",
        ),
        "api-server-address": (
            profile_run("api-server-address", None, target={"url": "https://167772161"}),  # 10.0.0.1
            "spec.target.url: 10.0.0.1 is an IP address, which may be any pod, node or host the cluster reaches; ",
        ),
        "lookalike": (
            profile_run("lookalike", None, target={"url": f"http://iris.{namespace}.svc.evil.example"}),
            f"spec.target.url: iris.{namespace}.svc.evil.example is not a Service of this namespace, and a host "
            f"outside the cluster; {own_only}",
        ),
        "absent": (
            profile_run("absent", None, target={"url": "http://nothing:8080"}, readyTimeout="1s"),
            "Service nothing does not exist; create it or fix spec.target.url",
        ),
        "external-name": (
            profile_run("external-name", None, target={"url": "http://metadata"}),
            f"spec.target.url: Service metadata of namespace {namespace} is an ExternalName for "
            "metadata.google.internal, a host outside the cluster; ",
        ),
        "handmade": (
            profile_run("handmade", None, target={"url": "http://handmade"}),
            f"spec.target.url: Service handmade of namespace {namespace} has no selector: its endpoints are written "
            "by hand and may point anywhere; ",
        ),
        "malformed": (
            profile_run("malformed", None, target={"url": "http://[::1"}),
            "spec.target.url: 'http://[::1' is not a URL (Invalid IPv6 URL); write it as http://host:port/path",
        ),
        "ramp": (
            profile_run(
                "ramp",
                None,
                load={"closedLoop": {"concurrency": 2, "ramp": {"to": 64}}, "minDuration": "3s", "maxDuration": "3s"},
            ),
            "the run asks for 64 concurrent users at the most (load.closedLoop.concurrency, sweep.concurrency, a "
            "ramp's end), summed over the trials at once (search.parallelism), more than the 16 its namespace ",
        ),
        "crowd": (
            profile_run("crowd", None, sweep={"concurrency": [8, 12]}, search={"parallelism": 2}),
            "the run asks for 20 concurrent users at the most (",
        ),
        "deep": (
            profile_run(
                "deep",
                None,
                metrics={"prometheus": {"url": admins.url}, "customQueries": [{"name": "q", "query": deep}]},
            ),
            "spec.metrics.customQueries[0].query: the query has 4001 terms, more than the 128 a run's query may have "
            "(checking it would hold the operator); split it into several customQueries",
        ),
        "peek": (
            profile_run(
                "peek",
                None,
                metrics={
                    "prometheus": {"url": admins.url},
                    "customQueries": [{"name": "secrets", "query": 'sum(kube_secret_info{namespace="team-b"})'}],
                },
            ),
            'spec.metrics.customQueries[0].query: kube_secret_info{namespace="team-b"} reads namespace team-b; ',
        ),
        "prometheus": (
            profile_run("prometheus", others.url),
            f"spec.metrics.prometheus.url: {others.url} is not a Prometheus this operator may query for a namespace's "
            f"run: it queries the cluster's, {admins.url} (the chart's prometheus.url, and paths below it); ",
        ),
        "gateway": (
            profile_run("gateway", None, metrics={"prometheus": {"url": f"{others.url}/gateway/team-b"}}),
            f"spec.metrics.prometheus.url: {others.url}/gateway/team-b is not a Prometheus this operator may query",
        ),
        "fitted-elsewhere": (
            fitted_run("fitted-elsewhere", others.url),
            f"spec.payload.prompts.fromPrometheus.url: {others.url} is not a Prometheus this operator may query",
        ),
        "fitted-selector": (
            fitted_run("fitted-selector", admins.url, selector='namespace="team-b"'),
            'spec.payload.prompts.fromPrometheus.selector: vllm:request_success_total{namespace="team-b"} reads '
            "namespace team-b; ",
        ),
        "fitted-target": (
            fitted_run("fitted-target", admins.url, target="http://2852039166/"),
            "spec.target.url: 169.254.169.254 is a link-local address (such as the cloud's metadata service); ",
        ),
    }
    apply(crds, namespace, *(run for run, _ in attempts.values()))
    messages = {name: Cluster(crds, namespace, name).wait_phase("Failed")["message"] for name in attempts}
    assert {name: message[: len(attempts[name][1])] for name, message in messages.items()} == {
        name: refusal for name, (_, refusal) in attempts.items()
    }
    # Nothing was sent on a refused run's behalf: neither Prometheus heard a query.
    assert admins.requests == [] and others.requests == []
    # Nothing was made: no load generator, no trial deployment, no identity or role for either.
    made = crds.json(
        "get", "jobs,deployments,modeldeployments,serviceaccounts,roles", "-n", namespace, "-l", LABEL_RUN
    )["items"]
    assert [f"{o['kind']}/{o['metadata']['name']}" for o in made] == []

    # Within its namespace (the admin's Prometheus, the Service of its ModelDeployment by its short name):
    # planned and started, the load generator given the Service's absolute name.
    own = profile_run("own", admins.url, target={"url": "http://IRIS:80"})
    apply(crds, namespace, own)
    status = Cluster(crds, namespace, "own").wait_phase("Running")
    assert [t["name"] for t in status["trials"]] == ["own-t0"]
    Cluster(crds, namespace, "own").wait_trial(0, "Running")
    config = yaml.safe_load(crds.json("get", "configmap", "own-t0-lg", "-n", namespace)["data"]["config.yaml"])
    assert config["url"] == f"http://iris.{namespace}.svc.cluster.local.:80"
    # Its load generators' NetworkPolicy reaches the pods behind the Service, the cluster's DNS, the API server
    # (this control plane's `kubernetes` Service at 10.0.0.1:443; it publishes no endpoints for its loopback
    # address), where they write their results, and their master; nothing else; owned by the run.
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
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
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

    # A fitted workload that is admitted is fitted from the admin's Prometheus, its queries held to the
    # namespace: the recorder hears it (so its silence above was the operator's), and finds no series.
    apply(crds, namespace, fitted_run("fitted", admins.url))
    message = Cluster(crds, namespace, "fitted").wait_phase("Failed")["message"]
    assert message.startswith(
        f'payload.prompts.fromPrometheus: no vllm:request_success_total series match {{model_name="m"}} in the 600s '
        f"before the end at {admins.url}: "
    ), message
    assert others.requests == []
    assert admins.requests and all(f'namespace="{namespace}"' in request for request in admins.requests), (
        admins.requests
    )
