"""What a namespace's ProfileRun may reach through the operator (kaliper.profiling.tenancy), tried as an attacker
would write it: addresses in every spelling the resolver reads, non-ASCII hosts the socket normalises, names
that look like the namespace's Services, malformed URLs, Prometheus URLs beside the admin's, every way of
applying load against every cap. Each is refused with the field and the setting that would allow it; the
legitimate forms are admitted. The Service lookup and the order (nothing sent before admission) are
tests/cluster/test_tenancy.py's."""

from __future__ import annotations

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.destination import BadUrl, destination
from kaliper.profiling.plan import configurations
from kaliper.profiling.tenancy import (
    LoadCaps,
    LoadReach,
    TenancyPolicy,
    caps_problem,
    load_reach,
    service_problem,
    target_host,
    tenancy_problem,
)
from tests.support.specs import BASE
from tests.support.specs import spec as sweep_spec

ADMIN = TenancyPolicy(prometheus_url="http://prometheus.monitoring:9090")
OWN_ONLY = (
    "a ProfileRun loads only what its own namespace (team-a) holds: a ModelDeployment (target.deploymentRef), a "
    "workload (target.workloadRef) or a Service of the namespace by URL, unless the cluster admin allows more "
    "(the chart's tenancy values: "
)


def spec(target: dict, **more: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {"target": target, "payload": {"inline": "{}"}, "load": {"closedLoop": {"concurrency": 1}}, **more}
    )


def refusal(url: str, policy: TenancyPolicy = ADMIN) -> str | None:
    return tenancy_problem(spec({"url": url}), "team-a", policy)


LOOPBACK = "a loopback address (the operator's own pod)"
LINK_LOCAL = "a link-local address (such as the cloud's metadata service)"
ANY_ADDRESS = "an IP address, which may be any pod, node or host the cluster reaches"


@pytest.mark.parametrize(
    ("written", "address", "kind"),
    [
        ("http://127.0.0.1:8080", "127.0.0.1", LOOPBACK),
        ("http://2130706433/", "127.0.0.1", LOOPBACK),  # one number
        ("http://0x7f000001", "127.0.0.1", LOOPBACK),  # hex
        ("http://127.1:8080", "127.0.0.1", LOOPBACK),  # short dotted
        ("http://0177.0.0.1", "127.0.0.1", LOOPBACK),  # octal
        ("http://localhost:8080", "127.0.0.1", LOOPBACK),  # the hosts file's
        ("http://api.localhost", "127.0.0.1", LOOPBACK),  # RFC 6761
        ("http://[::1]:8080", "::1", LOOPBACK),
        ("http://0/", "0.0.0.0", "the unspecified address, which reaches the pod itself"),
        ("http://169.254.169.254/latest/meta-data", "169.254.169.254", LINK_LOCAL),
        ("http://2852039166/", "169.254.169.254", LINK_LOCAL),
        ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254", LINK_LOCAL),
        ("http://169.254.43518/", "169.254.169.254", LINK_LOCAL),
        (
            "http://\uff11\uff16\uff19.\uff12\uff15\uff14.\uff11\uff16\uff19.\uff12\uff15\uff14/",
            "169.254.169.254",
            LINK_LOCAL,
        ),
        ("http://169\u3002254\u3002169\u3002254/", "169.254.169.254", LINK_LOCAL),  # ideographic full stops
        ("http://169\uff0e254\uff0e169\uff0e254/", "169.254.169.254", LINK_LOCAL),  # full-width full stops
        ("http://[::ffff:169.254.169.254]/", "::ffff:a9fe:a9fe", LINK_LOCAL),  # IPv4 in IPv6
        ("https://10.96.0.1", "10.96.0.1", ANY_ADDRESS),  # a Service's ClusterIP: the API server's
        ("https://167772161", "10.0.0.1", ANY_ADDRESS),
    ],
)
def test_an_address_in_any_spelling_is_refused_as_the_address_it_is(written: str, address: str, kind: str) -> None:
    assert refusal(written) == f"spec.target.url: {address} is {kind}; {OWN_ONLY}tenancy.targets.cidrs)"


def test_an_address_the_admin_allowed_is_loaded_as_that_address_in_its_plain_spelling() -> None:
    allowed = TenancyPolicy(target_cidrs=("127.0.0.0/8", "10.96.0.0/12"))
    assert refusal("http://0x7f000001:9000/v2", allowed) is None
    assert refusal("http://169.254.169.254/", allowed) is not None
    assert target_host("http://0x7f000001:9000/v2", "team-a", allowed).load_url("cluster.local") == (
        "http://127.0.0.1:9000/v2"
    )
    assert target_host("http://[::ffff:10.96.0.1]", "team-a", allowed).load_url("cluster.local") == (
        "http://[::ffff:a60:1]:80"
    )


@pytest.mark.parametrize(
    ("written", "load_url"),
    [
        ("http://scorer", "http://scorer.team-a.svc.cluster.local.:80"),
        ("http://scorer:8080/v2", "http://scorer.team-a.svc.cluster.local.:8080/v2"),
        ("http://scorer.team-a:8080", "http://scorer.team-a.svc.cluster.local.:8080"),
        ("http://scorer.team-a.svc", "http://scorer.team-a.svc.cluster.local.:80"),
        ("https://Scorer.Team-A.svc.cluster.local./v1", "https://scorer.team-a.svc.cluster.local.:443/v1"),
        ("http://scorer.", "http://scorer.team-a.svc.cluster.local.:80"),  # absolute: a top-level name
    ],
)
def test_a_service_of_the_namespace_is_loaded_by_its_absolute_cluster_name(written: str, load_url: str) -> None:
    assert refusal(written) is None
    assert target_host(written, "team-a", ADMIN).load_url("cluster.local") == load_url


def test_the_cluster_domain_is_the_admins() -> None:
    policy = TenancyPolicy(cluster_domain="corp.internal")
    assert refusal("http://scorer.team-a.svc.corp.internal", policy) is None
    assert target_host("http://scorer", "team-a", policy).load_url("corp.internal") == (
        "http://scorer.team-a.svc.corp.internal.:80"
    )
    assert refusal("http://scorer.team-a.svc.cluster.local", policy) == (
        "spec.target.url: scorer.team-a.svc.cluster.local is not a Service of this namespace, and a host outside "
        f"the cluster; {OWN_ONLY}tenancy.targets.hosts)"
    )


@pytest.mark.parametrize(
    "written",
    [
        "http://scorer.team-a.svc.evil.example",  # a Service's name, then anything
        "http://scorer.team-a.svc.cluster.local.evil.example",
        "http://scorer.team-a.evil",
        "http://scoring.example.com",
        "http://1e2",  # numeric-looking, not an address: a name the search list completes
    ],
)
def test_a_name_that_only_looks_like_a_service_of_the_namespace_is_a_host_outside_it(written: str) -> None:
    host = destination(written).host
    assert refusal(written) == (
        f"spec.target.url: {host} is not a Service of this namespace, and a host outside the cluster; "
        f"{OWN_ONLY}tenancy.targets.hosts)"
    )


def test_services_of_other_namespaces_the_api_server_among_them_need_the_admins_leave() -> None:
    assert refusal("https://kubernetes.default.svc") == (
        f"spec.target.url: kubernetes.default.svc is a Service of namespace default; {OWN_ONLY}"
        "tenancy.targets.namespaces)"
    )
    assert refusal("https://kubernetes.default") == (
        f"spec.target.url: kubernetes.default is a Service of namespace default; {OWN_ONLY}tenancy.targets.namespaces)"
    )
    assert refusal("http://payments.team-b.svc.cluster.local:80", TenancyPolicy(target_namespaces=("team-b",))) is None
    assert refusal("http://payments.team-c.svc", TenancyPolicy(target_namespaces=("team-b",))) is not None
    assert refusal("http://payments.team-c.svc", TenancyPolicy(target_namespaces=("*",))) is None


def test_a_host_outside_the_cluster_the_admin_allowed_is_that_host_even_in_a_services_form() -> None:
    allowed = TenancyPolicy(target_hosts=("scoring.example.com", "api.team-b"))
    assert refusal("https://scoring.example.com/v1", allowed) is None
    assert refusal("https://SCORING.example.com./v1", allowed) is None
    assert target_host("https://scoring.example.com/v1", "team-a", allowed).load_url("cluster.local") == (
        "https://scoring.example.com.:443/v1"  # absolute: no search list completes it to a Service
    )
    assert target_host("http://api.team-b", "team-a", allowed).load_url("cluster.local") == "http://api.team-b.:80"


@pytest.mark.parametrize(
    ("written", "message"),
    [
        (
            "http://a:99999",
            "'http://a:99999' is not a URL (Port out of range 0-65535); write it as http://host:port/path",
        ),
        ("http://[::1", "'http://[::1' is not a URL (Invalid IPv6 URL); write it as http://host:port/path"),
        ("http://scorer:0", "'http://scorer:0' names port 0, which no server listens on; write the server's port"),
        ("http://:8080/v2", "'http://:8080/v2' has no host; write it as http://host:port/path"),
        ("http://@/", "'http://@/' has no host; write it as http://host:port/path"),
        (
            "http://127%2e0%2e0%2e1/",
            "'http://127%2e0%2e0%2e1/': the host '127%2e0%2e0%2e1' is not a host name (letters, digits, hyphens "
            "and dots) nor an IP address",
        ),
        (
            "http://scorer_1/",
            "'http://scorer_1/': the host 'scorer_1' is not a host name (letters, digits, hyphens and dots) nor an "
            "IP address",
        ),
        (
            "http://[fe80::1%25eth0]/",
            "'http://[fe80::1%25eth0]/': an IPv6 address with a zone (%25eth0) is not a target",
        ),
        (
            "http://a..b/",
            "'http://a..b/': the host 'a..b' is not a host name (a label is empty, longer than 63 characters, or "
            "not a name once IDNA-encoded)",
        ),
        (
            "http://-scorer/",
            "'http://-scorer/': the host '-scorer' is not a host name (letters, digits, hyphens and dots) nor an IP "
            "address",
        ),
    ],
)
def test_a_malformed_url_is_refused_with_what_to_write(written: str, message: str) -> None:
    assert refusal(written) == f"spec.target.url: {message}"


def test_the_service_a_url_names_must_send_the_load_to_its_own_pods() -> None:
    target = target_host("http://scorer:8080", "team-a", ADMIN)
    assert service_problem({"spec": {"selector": {"app": "scorer"}, "ports": [{"port": 8080}]}}, target, ADMIN) is None
    external = {"spec": {"type": "ExternalName", "externalName": "metadata.google.internal."}}
    assert service_problem(external, target, ADMIN) == (
        "spec.target.url: Service scorer of namespace team-a is an ExternalName for metadata.google.internal, a host "
        "outside the cluster; load it by its own name if the cluster admin allows it (the chart's tenancy values: "
        "tenancy.targets.hosts)"
    )
    assert service_problem(external, target, TenancyPolicy(target_hosts=("metadata.google.internal",))) is None
    assert service_problem({"spec": {"ports": [{"port": 8080}]}}, target, ADMIN) == (
        "spec.target.url: Service scorer of namespace team-a has no selector: its endpoints are written by hand and "
        "may point anywhere; give it a selector of the serving pods, or load them through a Service that has one"
    )


def test_only_the_admins_prometheus_is_queried_compared_whole() -> None:
    def metrics(url: str, policy: TenancyPolicy = ADMIN) -> str | None:
        return tenancy_problem(
            spec({"deploymentRef": {"name": "iris"}}, metrics={"prometheus": {"url": url}}), "a", policy
        )

    assert metrics("http://prometheus.monitoring:9090/") is None  # the admin's, written another way
    assert metrics("http://PROMETHEUS.monitoring.:9090") is None
    assert metrics("http://prometheus.monitoring") == (
        "spec.metrics.prometheus.url: http://prometheus.monitoring is not a Prometheus this operator may query for "
        "a namespace's run: it queries the cluster's, http://prometheus.monitoring:9090 (the chart's "
        "prometheus.url, and paths below it); remove spec.metrics.prometheus to use it, or ask the cluster admin "
        "to allow this URL (the chart's tenancy values: tenancy.prometheusUrls)"
    )
    gateway = TenancyPolicy(prometheus_urls=("https://gateway.monitoring/prom/team-a",))
    assert metrics("https://gateway.monitoring/prom/team-a", gateway) is None
    assert metrics("https://gateway.monitoring:443/prom/team-a/", gateway) is None
    assert metrics("https://gateway.monitoring/prom/team-a/tenant", gateway) is None
    for elsewhere in ("https://gateway.monitoring/prom/team-b", "https://gateway.monitoring/prom/team-ab"):
        assert metrics(elsewhere, gateway).startswith(f"spec.metrics.prometheus.url: {elsewhere} is not a Prometheus")  # type: ignore[union-attr]
    assert metrics("https://gateway.monitoring/prom/team-a/../team-b", gateway) == (
        "spec.metrics.prometheus.url: https://gateway.monitoring/prom/team-a/../team-b: a Prometheus URL's path is "
        "compared whole; write it without %-escapes, . or .."
    )
    assert metrics("https://gateway.monitoring/prom/team-a/%2e%2e/team-b", gateway).endswith(  # type: ignore[union-attr]
        "a Prometheus URL's path is compared whole; write it without %-escapes, . or .."
    )
    assert metrics("http://0x7f000001:9090", TenancyPolicy(prometheus_urls=("http://127.0.0.1:9090",))) is None
    assert metrics("http://anything:9090", TenancyPolicy(prometheus_urls=("*",))) is None
    fitted = spec(
        {"url": "http://scorer"},
        payload={"prompts": {"fromPrometheus": {"url": "http://other:9090"}, "tokenizer": {"file": "/t.json"}}},
        request={"protocol": "openai-chat", "modelName": "m"},
    )
    assert tenancy_problem(fitted, "a", ADMIN).startswith(  # type: ignore[union-attr]
        "spec.payload.prompts.fromPrometheus.url: http://other:9090 is not a Prometheus this operator may query"
    )
    with pytest.raises(BadUrl, match=r"^a Prometheus URL: 'http://prom:0' names port 0"):
        TenancyPolicy(prometheus_urls=("http://prom:0",))
    with pytest.raises(ValueError, match=r"tenancy.targets.cidrs: '10.0.0.0/33' is not an IP range such as 10.0.0.0/8"):
        TenancyPolicy(target_cidrs=("10.0.0.0/33",))


def caps_refusal(
    run: ProfileRunSpec, policy: TenancyPolicy, base: ModelDeploymentSpec = BASE, trace_peak: float | None = None
) -> str | None:
    return caps_problem(run, configurations(run, base), "team-a", policy, trace_peak)


def cap_words(value: str, what: str, cap: str, setting: str) -> str:
    return (
        f"the run asks for {value} {what}, more than the {cap} its namespace team-a may use; ask for less, or ask "
        f"the cluster admin to raise the cap (the chart's tenancy.caps.{setting})"
    )


AT_ONCE = "summed over the trials at once (search.parallelism)"
USERS = f"concurrent users at the most (load.closedLoop.concurrency, sweep.concurrency, a ramp's end), {AT_ONCE}"
RATE = (
    "requests per second at the most (load.openLoop.rate, sweep.rate, a ramp's end, a trace's busiest second times "
    f"load.trace.speedup), {AT_ONCE}"
)


def test_every_way_a_run_applies_load_is_counted_against_its_caps() -> None:
    users = TenancyPolicy(caps=LoadCaps(users=64))
    assert caps_refusal(sweep_spec(sweep={"concurrency": [8, 64]}), users) is None
    assert caps_refusal(sweep_spec(sweep={"concurrency": [8, 128]}), users) == cap_words("128", USERS, "64", "users")
    ramp = {"closedLoop": {"concurrency": 8, "ramp": {"to": 200}}, "maxDuration": "1m"}
    assert caps_refusal(sweep_spec(load=ramp), users) == cap_words("200", USERS, "64", "users")
    # Three trials of 30 users at once: 90 together.
    parallel = sweep_spec(sweep={"concurrency": [30], "cpu": ["1", "2", "4"]}, search={"parallelism": 3})
    assert caps_refusal(parallel, users) == cap_words("90", USERS, "64", "users")
    assert caps_refusal(sweep_spec(sweep={"concurrency": [30], "cpu": ["1", "2", "4"]}), users) is None  # one at once

    rate = TenancyPolicy(caps=LoadCaps(rate=100))
    open_loop = {"openLoop": {"rate": 50, "ramp": {"to": 400}}, "maxDuration": "1m"}
    assert caps_refusal(sweep_spec(load=open_loop), rate) == cap_words("400", RATE, "100", "rate")
    swept = sweep_spec(load={"openLoop": {"rate": 10}}, sweep={"rate": [40, 60, 80]}, search={"parallelism": 2})
    assert caps_refusal(swept, rate) == cap_words("140", RATE, "100", "rate")  # 80 and 60 at once
    trace = ProfileRunSpec.model_validate(
        {
            "target": {"deploymentRef": {"name": "m"}},
            "request": {"protocol": "openai-completions", "modelName": "m"},
            "payload": {
                "prompts": {
                    "trace": {"configMap": {"name": "t", "key": "trace.jsonl"}, "format": "mooncake"},
                    "tokenizer": {"configMap": {"name": "t", "key": "tokenizer.json"}},
                }
            },
            "load": {"trace": {"speedup": 20}},
        }
    )
    assert caps_refusal(trace, rate, trace_peak=6) == cap_words("120", RATE, "100", "rate")  # 6/s at 20 times
    assert caps_refusal(trace, rate, trace_peak=5) is None

    stage = TenancyPolicy(caps=LoadCaps.from_values({"stageDuration": "10m"}))
    within = sweep_spec(load={"closedLoop": {"concurrency": 8}, "maxDuration": "9m", "warmup": "30s"})
    assert caps_refusal(within, stage) is None
    long_warmup = sweep_spec(load={"closedLoop": {"concurrency": 8}, "maxDuration": "9m", "warmup": "2m"})
    assert caps_refusal(long_warmup, stage) == cap_words(
        "690",  # 2 min of warm-up, 9 of measurement, 30 s of graceful stop (the request timeout's default)
        "seconds of load per stage (load.warmup, load.maxDuration and the graceful stop after it)",
        "600",
        "stageDuration",
    )

    pods = TenancyPolicy(caps=LoadCaps(processes=16, workers=4))
    distributed = sweep_spec(load={"closedLoop": {"concurrency": 8}, "workers": 2, "processes": 4})
    assert caps_refusal(distributed, pods) is None
    twice = sweep_spec(
        load={"closedLoop": {"concurrency": 8}, "workers": 2, "processes": 4},
        sweep={"cpu": ["1", "2"]},
        search={"parallelism": 2},
    )
    assert caps_refusal(twice, pods) is None  # processes 4 x 2 workers x 2 trials = 16; workers 2 x 2 = 4
    thrice = sweep_spec(
        load={"closedLoop": {"concurrency": 8}, "workers": 2, "processes": 4},
        sweep={"cpu": ["1", "2", "4"]},
        search={"parallelism": 3},
    )
    assert caps_refusal(thrice, pods) == cap_words(
        "24",
        "load-generator processes at once (load.processes in each of its pods, times the trials at once)",
        "16",
        "processes",
    )


def test_gpus_held_at_once_count_each_trials_gpus_replicas_and_the_trials_at_once() -> None:
    """Two replicas of one GPU each, three trials at once: six GPUs, over a cap of four."""
    gpu = ModelDeploymentSpec.model_validate(
        {"model": {"file": "m.onnx"}, "replicas": 2, "resources": {"gpu": {"count": 1}}}
    )
    run = sweep_spec(sweep={"concurrency": [1, 2, 4]}, search={"parallelism": 3})
    assert caps_refusal(run, TenancyPolicy(caps=LoadCaps(gpus=4)), gpu) == cap_words(
        "6", "GPUs held at once (each trial's GPUs times its replicas, times the trials at once)", "4", "gpus"
    )
    assert caps_refusal(run, TenancyPolicy(caps=LoadCaps(gpus=6)), gpu) is None


def test_a_namespace_with_caps_of_its_own_has_those_instead_of_everyones() -> None:
    own = TenancyPolicy(caps=LoadCaps(users=64), namespace_caps=(("team-a", LoadCaps.from_values({"users": 256})),))
    assert caps_refusal(sweep_spec(sweep={"concurrency": [8, 128]}), own) is None
    over = sweep_spec(sweep={"concurrency": [8, 128]})
    assert caps_problem(over, configurations(over, BASE), "team-b", own) == cap_words(
        "128", USERS, "64", "users"
    ).replace("team-a", "team-b")


def test_the_load_generators_reach_their_resolved_target_alone() -> None:
    assert load_reach("run", None, None) == LoadReach(
        [{"podSelector": {"matchLabels": {"kaliper.dev/profilerun": "run", "kaliper.dev/role": "server"}}}]
    )
    own = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}
    scorer = target_host("http://scorer:8080", "team-a", ADMIN)
    assert load_reach("run", scorer, {"app": "scorer"}) == LoadReach(
        [{**own, "podSelector": {"matchLabels": {"app": "scorer"}}}]
    )
    allowed = TenancyPolicy(target_cidrs=("10.0.0.0/8",), target_hosts=("scoring.example.com",))
    assert load_reach("run", target_host("http://0xa600007:9000", "team-a", allowed), None) == LoadReach(
        [{"ipBlock": {"cidr": "10.96.0.7/32"}}]
    )
    assert load_reach("run", target_host("http://[::ffff:10.96.0.7]", "team-a", allowed), None) == LoadReach(
        [{"ipBlock": {"cidr": "10.96.0.7/32"}}]
    )
    assert load_reach("run", target_host("https://scoring.example.com/v1", "team-a", allowed), None) == LoadReach(
        [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}],
        [{"protocol": "TCP", "port": 443}],
        wider="scoring.example.com is outside the cluster: any address, port 443",
    )
