"""What a ProfileRun may reach through the operator (pure): a namespace user gains nothing through it beyond
what its namespace already gives it. By default a run loads only its own namespace (a ModelDeployment, a
workload, or a Service of the namespace by URL) and reads only the cluster admin's Prometheus (the chart's
prometheus.url); anything else is refused before the run starts, unless the admin allowed it in the chart's
values (tenancy.*). `kaliper run` on one's own machine applies none of this: there is no one else to protect."""

from __future__ import annotations

import ipaddress
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_duration
from kaliper.manifests.profilerun import LABEL_ROLE, LABEL_RUN
from kaliper.profiling.plan import Configuration

ANY = "*"
ALLOWANCES = "the chart's tenancy values"


@dataclass(frozen=True)
class LoadCaps:
    """The most load a run of a namespace may apply (None: no cap beyond the API's maxima)."""

    users: int | None = None
    """Concurrent users at any load level (closed loop)."""
    rate: float | None = None
    """Requests per second at any load level (open loop)."""
    processes: int | None = None
    """Load-generator processes per pod."""
    workers: int | None = None
    """Distributed load-generator workers."""
    stage_seconds: float | None = None
    """A stage's longest measurement (load.maxDuration)."""
    parallel_trials: int | None = None
    """Trials at the same time (search.parallelism)."""
    gpus: int | None = None
    """GPUs the run's trials hold at once (each trial's GPUs times its replicas, times the trials at once)."""

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> LoadCaps:
        """From the chart's tenancy.caps (camelCase, a duration for stageDuration)."""
        stage = values.get("stageDuration")
        return cls(
            users=values.get("users"),
            rate=values.get("rate"),
            processes=values.get("processes"),
            workers=values.get("workers"),
            stage_seconds=parse_duration(stage) if stage else None,
            parallel_trials=values.get("parallelTrials"),
            gpus=values.get("gpus"),
        )


@dataclass(frozen=True)
class TenancyPolicy:
    prometheus_url: str | None = None
    """The cluster admin's Prometheus (the chart's prometheus.url): a run may always name it."""
    prometheus_urls: tuple[str, ...] = ()
    """Other Prometheus URLs a run may name (tenancy.prometheusUrls), compared by scheme, host and port; "*":
    any."""
    target_namespaces: tuple[str, ...] = ()
    """Namespaces besides its own whose Services a run may load by URL (tenancy.targets.namespaces); "*": any."""
    target_hosts: tuple[str, ...] = ()
    """Host names outside the cluster a run may load (tenancy.targets.hosts)."""
    target_cidrs: tuple[str, ...] = ()
    """IP ranges a run may load by address (tenancy.targets.cidrs), such as 10.0.0.0/8."""
    query_namespaces: tuple[str, ...] = ()
    """Namespaces besides its own whose series a run's PromQL may read (tenancy.queries.namespaces); "*": any,
    queries not confined. Applied by kaliper.metrics.promql_scope."""
    caps: LoadCaps = field(default_factory=LoadCaps)
    """Every namespace's caps (tenancy.caps)."""
    namespace_caps: tuple[tuple[str, LoadCaps], ...] = ()
    """Namespaces with caps of their own instead (tenancy.namespaceCaps)."""

    def __post_init__(self) -> None:
        for cidr in self.target_cidrs:  # refused when the operator starts, not at each run
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"tenancy.targets.cidrs: {cidr!r} is not an IP range such as 10.0.0.0/8") from None

    def caps_of(self, namespace: str) -> tuple[LoadCaps, str]:
        """The caps a namespace's runs have, and the chart value that sets them."""
        own = dict(self.namespace_caps).get(namespace)
        return (own, f"tenancy.namespaceCaps.{namespace}") if own is not None else (self.caps, "tenancy.caps")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _prometheus_allowed(url: str, policy: TenancyPolicy) -> bool:
    if ANY in policy.prometheus_urls:
        return True
    allowed = [policy.prometheus_url, *policy.prometheus_urls]
    return any(_origin(url) == _origin(a) for a in allowed if a)


def _prometheus_problem(field: str, remove: str, url: str, policy: TenancyPolicy) -> str | None:
    if _prometheus_allowed(url, policy):
        return None
    admins = f"the cluster's, {policy.prometheus_url}" if policy.prometheus_url else "the one the chart names"
    return (
        f"{field}: {url} is not a Prometheus this operator may query for a namespace's run: it queries {admins} "
        f"(the chart's prometheus.url); remove {remove} to use it, or ask the cluster admin to allow this URL "
        f"({ALLOWANCES}: tenancy.prometheusUrls)"
    )


def _address_kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if address.is_loopback:
        return "a loopback address (the operator's own pod)"
    if address.is_link_local:
        return "a link-local address (such as the cloud's metadata service)"
    return "an IP address, which may be any pod, node or host the cluster reaches"


@dataclass(frozen=True)
class TargetHost:
    """What a target URL's host is, read once for the refusal and for the load generators' NetworkPolicy."""

    host: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    """An IP address (localhost read as 127.0.0.1)."""
    service: str | None = None
    """A Service in the cluster by name: `name`, `name.<namespace>`, `name.<namespace>.svc[.cluster.local]`."""
    namespace: str | None = None
    """That Service's namespace."""
    port: int | None = None


def target_host(url: str, namespace: str) -> TargetHost:
    """The host of a run's target URL: an address, a Service of some namespace, or a host outside the cluster."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    try:
        return TargetHost(host, address=ipaddress.ip_address("127.0.0.1" if host == "localhost" else host), port=port)
    except ValueError:
        pass
    labels = host.split(".")
    if len(labels) == 1 or (len(labels) == 2 and labels[1] == namespace):
        return TargetHost(host, service=labels[0], namespace=namespace, port=port)  # its own, by the short name
    if len(labels) >= 3 and labels[2] == "svc":
        return TargetHost(host, service=labels[0], namespace=labels[1], port=port)
    return TargetHost(host, port=port)


def _target_problem(url: str, namespace: str, policy: TenancyPolicy) -> str | None:
    target = target_host(url, namespace)
    if target.address is not None:
        if any(target.address in ipaddress.ip_network(cidr, strict=False) for cidr in policy.target_cidrs):
            return None
        what, allowance = _address_kind(target.address), "tenancy.targets.cidrs"
    elif target.namespace == namespace:
        return None
    elif target.namespace is not None:
        if ANY in policy.target_namespaces or target.namespace in policy.target_namespaces:
            return None
        what, allowance = f"a Service of namespace {target.namespace}", "tenancy.targets.namespaces"
    else:
        if target.host in policy.target_hosts:
            return None
        what, allowance = "a host outside this namespace", "tenancy.targets.hosts"
    host = str(target.address) if target.address is not None else target.host
    return (
        f"spec.target.url: {host} is {what}; a ProfileRun loads only what its own namespace ({namespace}) holds: "
        "a ModelDeployment (target.deploymentRef), a workload (target.workloadRef) or a Service of the namespace "
        f"by URL, unless the cluster admin allows more ({ALLOWANCES}: {allowance})"
    )


def tenancy_problem(spec: ProfileRunSpec, namespace: str, policy: TenancyPolicy) -> str | None:
    """Why the run may not reach what it names, or None."""
    if spec.target.url is not None and (problem := _target_problem(str(spec.target.url), namespace, policy)):
        return problem
    if spec.metrics.prometheus is not None:
        url = str(spec.metrics.prometheus.url)
        problem = _prometheus_problem("spec.metrics.prometheus.url", "spec.metrics.prometheus", url, policy)
        if problem:
            return problem
    fitted = spec.payload.prompts.from_prometheus if spec.payload.prompts is not None else None
    if fitted is not None and fitted.url is not None:
        field = "spec.payload.prompts.fromPrometheus.url"
        return _prometheus_problem(field, field, str(fitted.url), policy)
    return None


def _gpus_per_trial(config: Configuration) -> int:
    deployment = config.deployment
    if deployment is None or deployment.resources is None or deployment.resources.gpu is None:
        return 0
    return (deployment.resources.gpu.count or 0) * deployment.replicas


def caps_problem(
    spec: ProfileRunSpec, configs: list[Configuration], namespace: str, policy: TenancyPolicy
) -> str | None:
    """Why the run would apply more load than its namespace may, or None: checked before it starts."""
    caps, setting = policy.caps_of(namespace)
    level_name = configs[0].level_name if configs else ""
    highest = max((level for c in configs for level in c.levels), default=0.0)
    trials = sum(len(c.levels) for c in configs)
    at_once = min(spec.search.parallelism, max(trials, 1))
    gpus = max((_gpus_per_trial(c) for c in configs), default=0) * at_once
    asked = (
        (
            "users",
            "concurrent users (load.closedLoop.concurrency, sweep.concurrency)",
            highest if level_name == "concurrency" else None,
        ),
        ("rate", "requests per second (load.openLoop.rate, sweep.rate)", highest if level_name == "rate" else None),
        ("processes", "load-generator processes per pod (load.processes)", spec.load.processes),
        ("workers", "load-generator workers (load.workers)", spec.load.workers),
        (
            "stage_seconds",
            "seconds of measurement per stage (load.maxDuration)",
            parse_duration(spec.load.max_duration),
        ),
        ("parallel_trials", "trials at once (search.parallelism)", spec.search.parallelism),
        ("gpus", "GPUs held at once (each trial's GPUs times its replicas, times the trials at once)", gpus),
    )
    for name, what, value in asked:
        cap = getattr(caps, name)
        if cap is not None and value is not None and value > cap:
            return (
                f"the run asks for {value:g} {what}, more than the {cap:g} its namespace {namespace} may use; ask for "
                f"less, or ask the cluster admin to raise the cap (the chart's {setting}.{_camel(name)})"
            )
    return None


def _camel(name: str) -> str:
    head, *rest = ("stage_duration" if name == "stage_seconds" else name).split("_")
    return head + "".join(word.title() for word in rest)


# The label Kubernetes puts on every namespace with its name (a NetworkPolicy's namespaceSelector reads it).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
EVERYWHERE = [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]


@dataclass(frozen=True)
class LoadReach:
    """Where a run's load generators may send their load (a NetworkPolicy's egress peers and ports), and what
    that leaves wider than the target itself, in words (for the docs' and events' sake)."""

    peers: list[dict[str, Any]]
    ports: list[dict[str, Any]] | None = None  # None: any port of those peers (a server's metrics port too)
    wider: str | None = None


def load_reach(
    spec: ProfileRunSpec, run_name: str, namespace: str, service_selector: dict[str, str] | None
) -> LoadReach:
    """The target alone, resolved: the run's trial servers (a ModelDeployment or workload target), the pods
    behind a Service it names (`service_selector`, read from the Service; None when it has none), an address,
    or, for a host outside the cluster, which a NetworkPolicy cannot name, any address on the URL's port."""
    if spec.target.url is None:
        return LoadReach([{"podSelector": {"matchLabels": {LABEL_RUN: run_name, LABEL_ROLE: "server"}}}])
    target = target_host(str(spec.target.url), namespace)
    if target.address is not None:
        bits = 32 if target.address.version == 4 else 128
        return LoadReach([{"ipBlock": {"cidr": f"{target.address}/{bits}"}}])
    if target.namespace is not None:
        peer: dict[str, Any] = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: target.namespace}}}
        if service_selector:
            return LoadReach([{**peer, "podSelector": {"matchLabels": dict(service_selector)}}])
        wider = f"Service {target.service} has no selector (or cannot be read): any pod of {target.namespace}"
        return LoadReach([peer], wider=wider)
    ports = [{"protocol": "TCP", "port": target.port}] if target.port else None
    return LoadReach(EVERYWHERE, ports, wider=f"{target.host} is outside the cluster: any address, port {target.port}")
