"""What a namespace's ProfileRun may reach through the operator (kaliper.profiling.tenancy): its own namespace
and the admin's Prometheus by default, more only where the admin's values allow it."""

from __future__ import annotations

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.profiling.plan import configurations
from kaliper.profiling.tenancy import LoadCaps, LoadReach, TenancyPolicy, caps_problem, load_reach, tenancy_problem
from tests.support.specs import BASE
from tests.support.specs import spec as sweep_spec

ADMIN = TenancyPolicy(prometheus_url="http://prometheus.monitoring:9090")
OWN = "Services, ModelDeployments and workloads"


def spec(target: dict, **more: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {"target": target, "payload": {"inline": "{}"}, "load": {"closedLoop": {"concurrency": 1}}, **more}
    )


def refusal(url: str, policy: TenancyPolicy = ADMIN) -> str | None:
    return tenancy_problem(spec({"url": url}), "team-a", policy)


def test_a_run_loads_its_own_namespace_and_nothing_else_by_default() -> None:
    for own in ("http://scorer", "http://scorer.team-a:8080", "http://scorer.team-a.svc.cluster.local/v2"):
        assert refusal(own) is None
    assert tenancy_problem(spec({"deploymentRef": {"name": "iris"}}), "team-a", ADMIN) is None
    assert refusal("http://169.254.169.254/latest/meta-data") == (
        "spec.target.url: 169.254.169.254 is a link-local address (such as the cloud's metadata service); a "
        "ProfileRun loads only what its own namespace (team-a) holds: a ModelDeployment (target.deploymentRef), a "
        "workload (target.workloadRef) or a Service of the namespace by URL, unless the cluster admin allows more "
        "(the chart's tenancy values: tenancy.targets.cidrs)"
    )
    assert refusal("https://kubernetes.default.svc").startswith(  # the API server
        "spec.target.url: kubernetes.default.svc is a Service of namespace default; "
    )
    assert refusal("http://payments.team-b.svc:80").endswith("(the chart's tenancy values: tenancy.targets.namespaces)")
    assert refusal("http://localhost:8080").startswith(
        "spec.target.url: 127.0.0.1 is a loopback address (the operator's own pod); "
    )
    assert refusal("http://10.96.0.1").startswith(
        "spec.target.url: 10.96.0.1 is an IP address, which may be any pod, node or host the cluster reaches; "
    )
    assert refusal("https://scoring.example.com").endswith("(the chart's tenancy values: tenancy.targets.hosts)")


def test_what_the_admin_allows_is_reached() -> None:
    allowed = TenancyPolicy(
        target_namespaces=("team-b",), target_hosts=("scoring.example.com",), target_cidrs=("10.96.0.0/12",)
    )
    for url in ("http://payments.team-b.svc", "https://scoring.example.com/v1", "http://10.96.0.1"):
        assert refusal(url, allowed) is None
    assert refusal("http://payments.team-c.svc", allowed) is not None
    assert refusal("http://payments.team-c.svc", TenancyPolicy(target_namespaces=("*",))) is None
    with pytest.raises(ValueError, match=r"tenancy.targets.cidrs: '10.0.0.0/33' is not an IP range such as 10.0.0.0/8"):
        TenancyPolicy(target_cidrs=("10.0.0.0/33",))


def test_only_the_admins_prometheus_is_queried_unless_more_are_allowed() -> None:
    def metrics(url: str, policy: TenancyPolicy = ADMIN) -> str | None:
        return tenancy_problem(
            spec({"deploymentRef": {"name": "iris"}}, metrics={"prometheus": {"url": url}}), "a", policy
        )

    assert metrics("http://prometheus.monitoring:9090/") is None  # the admin's, written another way
    assert metrics("http://prometheus.monitoring") == (
        "spec.metrics.prometheus.url: http://prometheus.monitoring is not a Prometheus this operator may query for "
        "a namespace's run: it queries the cluster's, http://prometheus.monitoring:9090 (the chart's "
        "prometheus.url); remove spec.metrics.prometheus to use it, or ask the cluster admin to allow this URL "
        "(the chart's tenancy values: tenancy.prometheusUrls)"
    )
    assert metrics("http://thanos.team-a:9090", TenancyPolicy(prometheus_urls=("http://thanos.team-a:9090",))) is None
    assert metrics("http://anything:9090", TenancyPolicy(prometheus_urls=("*",))) is None
    fitted = spec(
        {"url": "http://scorer"},
        payload={"prompts": {"fromPrometheus": {"url": "http://other:9090"}, "tokenizer": {"file": "/t.json"}}},
        request={"protocol": "openai-chat", "modelName": "m"},
    )
    assert tenancy_problem(fitted, "a", ADMIN).startswith(  # type: ignore[union-attr]
        "spec.payload.prompts.fromPrometheus.url: http://other:9090 is not a Prometheus this operator may query"
    )


def caps_refusal(run: ProfileRunSpec, policy: TenancyPolicy, base: ModelDeploymentSpec = BASE) -> str | None:
    return caps_problem(run, configurations(run, base), "team-a", policy)


def test_a_run_over_its_namespaces_cap_is_refused_naming_the_cap_and_who_sets_it() -> None:
    capped = TenancyPolicy(caps=LoadCaps.from_values({"users": 64, "stageDuration": "10m", "workers": 2}))
    within = sweep_spec(sweep={"concurrency": [8, 64]}, load={"closedLoop": {"concurrency": 8}, "maxDuration": "10m"})
    assert caps_refusal(within, capped) is None
    over = sweep_spec(sweep={"concurrency": [8, 128]})
    assert caps_refusal(over, capped) == (
        "the run asks for 128 concurrent users (load.closedLoop.concurrency, sweep.concurrency), more than the 64 "
        "its namespace team-a may use; ask for less, or ask the cluster admin to raise the cap (the chart's "
        "tenancy.caps.users)"
    )
    long_stage = sweep_spec(load={"closedLoop": {"concurrency": 8}, "maxDuration": "1h"})
    assert caps_refusal(long_stage, capped).endswith("(the chart's tenancy.caps.stageDuration)")  # type: ignore[union-attr]
    # A namespace with caps of its own has those instead of everyone's.
    own = TenancyPolicy(caps=capped.caps, namespace_caps=(("team-a", LoadCaps.from_values({"users": 256})),))
    assert caps_refusal(over, own) is None


def test_gpus_held_at_once_count_each_trials_gpus_replicas_and_the_trials_at_once() -> None:
    """Two replicas of one GPU each, three trials at once: six GPUs, over a cap of four."""
    gpu = ModelDeploymentSpec.model_validate(
        {"model": {"file": "m.onnx"}, "replicas": 2, "resources": {"gpu": {"count": 1}}}
    )
    run = sweep_spec(sweep={"concurrency": [1, 2, 4]}, search={"parallelism": 3})
    assert caps_refusal(run, TenancyPolicy(caps=LoadCaps(gpus=4)), gpu) == (
        "the run asks for 6 GPUs held at once (each trial's GPUs times its replicas, times the trials at once), "
        "more than the 4 its namespace team-a may use; ask for less, or ask the cluster admin to raise the cap "
        "(the chart's tenancy.caps.gpus)"
    )
    assert caps_refusal(run, TenancyPolicy(caps=LoadCaps(gpus=6)), gpu) is None


def test_the_load_generators_reach_their_resolved_target_alone() -> None:
    def reach(target: dict, selector: dict | None = None) -> LoadReach:
        return load_reach(spec(target), "run", "team-a", selector)

    assert reach({"deploymentRef": {"name": "iris"}}) == LoadReach(
        [{"podSelector": {"matchLabels": {"kaliper.dev/profilerun": "run", "kaliper.dev/role": "server"}}}]
    )
    own = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}
    assert reach({"url": "http://scorer:8080"}, {"app": "scorer"}) == LoadReach(
        [{**own, "podSelector": {"matchLabels": {"app": "scorer"}}}]
    )
    assert reach({"url": "http://payments.team-b.svc"}) == LoadReach(
        [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}],
        wider="Service payments has no selector (or cannot be read): any pod of team-b",
    )
    assert reach({"url": "http://10.96.0.7:9000"}) == LoadReach([{"ipBlock": {"cidr": "10.96.0.7/32"}}])
    assert reach({"url": "https://scoring.example.com/v1"}) == LoadReach(
        [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}],
        [{"protocol": "TCP", "port": 443}],
        wider="scoring.example.com is outside the cluster: any address, port 443",
    )
