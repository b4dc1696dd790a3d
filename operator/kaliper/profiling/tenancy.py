"""What a ProfileRun may reach through the operator (pure): a namespace user gains nothing through it beyond
what its namespace already gives it. By default a run loads only its own namespace (a ModelDeployment, a
workload, or a Service of the namespace by URL) and reads only the cluster admin's Prometheus (the chart's
prometheus.url); anything else is refused before the run starts, unless the admin allowed it in the chart's
values (tenancy.*). `kaliper run` on one's own machine applies none of this: there is no one else to protect."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_duration
from kaliper.destination import Address, BadUrl, Destination, destination
from kaliper.loadgen.config import graceful_stop_s
from kaliper.manifests.profilerun import LABEL_ROLE, LABEL_RUN
from kaliper.profiling.plan import Configuration

ANY = "*"
ALLOWANCES = "the chart's tenancy values"


@dataclass(frozen=True)
class LoadCaps:
    """The most load a run of a namespace may apply (None: no cap beyond the API's maxima)."""

    users: int | None = None
    """Concurrent users at once (closed loop), at the most any level or ramp reaches, over the trials at once."""
    rate: float | None = None
    """Requests per second at once (open loop, a trace), as for users."""
    processes: int | None = None
    """Load-generator processes at once (in every pod of every trial running)."""
    workers: int | None = None
    """Distributed load-generator workers at once."""
    stage_seconds: float | None = None
    """A stage's longest time under load: warm-up, measurement (load.maxDuration) and graceful stop."""
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
    """Other Prometheus URLs a run may name (tenancy.prometheusUrls), compared whole: scheme, host, port and path
    (a URL below the path too); "*": any."""
    target_namespaces: tuple[str, ...] = ()
    """Namespaces besides its own whose Services a run may load by URL (tenancy.targets.namespaces); "*": any."""
    target_hosts: tuple[str, ...] = ()
    """Host names outside the cluster a run may load (tenancy.targets.hosts)."""
    target_cidrs: tuple[str, ...] = ()
    """IP ranges a run may load by address (tenancy.targets.cidrs), such as 10.0.0.0/8."""
    cluster_domain: str = "cluster.local"
    """The cluster's DNS domain (the chart's clusterDomain): a Service's absolute name ends with it."""
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
        for url in (self.prometheus_url, *self.prometheus_urls):
            if url and url != ANY:
                prometheus_place(url)  # BadUrl (a ValueError) names it

    def caps_of(self, namespace: str) -> tuple[LoadCaps, str]:
        """The caps a namespace's runs have, and the chart value that sets them."""
        own = dict(self.namespace_caps).get(namespace)
        return (own, f"tenancy.namespaceCaps.{namespace}") if own is not None else (self.caps, "tenancy.caps")


def _prometheus_allowed(url: str, policy: TenancyPolicy) -> bool:
    if ANY in policy.prometheus_urls:
        return True
    written = prometheus_place(url)
    return any(_within(written, prometheus_place(a)) for a in (policy.prometheus_url, *policy.prometheus_urls) if a)


def prometheus_place(url: str) -> tuple[str, str, int, str]:
    """A Prometheus URL whole, as compared: scheme, host (as it resolves), port and path (no trailing slash).
    BadUrl for a path that could mean another once a gateway decodes or normalises it."""
    where = destination(url, "a Prometheus URL")
    decoded = urllib.parse.unquote(where.path)
    if decoded != where.path or any(part in (".", "..") for part in where.path.split("/")):
        raise BadUrl(f"{url}: a Prometheus URL's path is compared whole; write it without %-escapes, . or ..")
    return where.scheme, where.host, where.port, where.path.rstrip("/")


def _within(written: tuple[str, str, int, str], allowed: tuple[str, str, int, str]) -> bool:
    """Same scheme, host and port, and the path the allowed one's or below it (/prom/team-a/x, not /prom/team-b)."""
    path, prefix = written[3], allowed[3]
    return written[:3] == allowed[:3] and (path == prefix or path.startswith(prefix + "/"))


def _prometheus_problem(field: str, remove: str, url: str, policy: TenancyPolicy) -> str | None:
    try:
        allowed = _prometheus_allowed(url, policy)
    except BadUrl as exc:
        return f"{field}: {exc}"
    if allowed:
        return None
    admins = f"the cluster's, {policy.prometheus_url}" if policy.prometheus_url else "the one the chart names"
    return (
        f"{field}: {url} is not a Prometheus this operator may query for a namespace's run: it queries {admins} "
        f"(the chart's prometheus.url, and paths below it); remove {remove} to use it, or ask the cluster admin "
        f"to allow this URL ({ALLOWANCES}: tenancy.prometheusUrls)"
    )


def _address_kind(address: Address) -> str:
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    address = mapped or address
    if address.is_loopback:
        return "a loopback address (the operator's own pod)"
    if address.is_unspecified:
        return "the unspecified address, which reaches the pod itself"
    if address.is_link_local:
        return "a link-local address (such as the cloud's metadata service)"
    return "an IP address, which may be any pod, node or host the cluster reaches"


_SERVICE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # a Service's name (DNS-1035)
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a namespace's (DNS-1123 label)


@dataclass(frozen=True)
class TargetHost:
    """What a target URL's host is, read once for the refusal, the load generators' URL and their
    NetworkPolicy: an address, a Service by one of its cluster names, or a host outside the cluster."""

    destination: Destination
    service: str | None = None
    namespace: str | None = None
    """The Service's namespace."""
    outside: bool = False
    """A host the admin allowed outside the cluster (tenancy.targets.hosts)."""

    @property
    def address(self) -> Address | None:
        return self.destination.address

    def load_url(self, cluster_domain: str) -> str:
        """The URL the load generators are given: a Service by its absolute cluster name, a host by its
        absolute name, an address in its canonical form; never the spelling the user wrote."""
        if self.service is not None:
            return self.destination.url(f"{self.service}.{self.namespace}.svc.{cluster_domain}.")
        if self.outside:
            return self.destination.url(self.destination.host + ".")
        return self.destination.url()


def target_host(url: str, namespace: str, policy: TenancyPolicy) -> TargetHost:
    """The host of a run's target URL, read as the load generator's socket will read it (BadUrl: it cannot
    be). A name is a Service only in one of the forms cluster DNS gives it (`name`, `name.<namespace>`,
    `name.<namespace>.svc`, `name.<namespace>.svc.<cluster domain>`); a host the admin allowed outside the
    cluster is that host, even where it has a Service's form."""
    where = destination(url, "spec.target.url")
    if where.address is not None:
        return TargetHost(where)
    if where.host in policy.target_hosts:
        return TargetHost(where, outside=True)
    labels = where.labels
    service_form = len(labels) <= 2 or labels[2:] in (["svc"], ["svc", *policy.cluster_domain.split(".")])
    service_namespace = labels[1] if len(labels) > 1 else namespace
    if service_form and _SERVICE.fullmatch(labels[0]) and _NAMESPACE.fullmatch(service_namespace):
        return TargetHost(where, service=labels[0], namespace=service_namespace)
    return TargetHost(where)


def _target_problem(url: str, namespace: str, policy: TenancyPolicy) -> str | None:
    try:
        target = target_host(url, namespace, policy)
    except BadUrl as exc:
        return str(exc)
    if target.address is not None:
        if any(target.address in ipaddress.ip_network(cidr, strict=False) for cidr in policy.target_cidrs):
            return None
        what, allowance = _address_kind(target.address), "tenancy.targets.cidrs"
    elif target.outside or target.namespace == namespace:
        return None
    elif target.namespace is not None:
        if ANY in policy.target_namespaces or target.namespace in policy.target_namespaces:
            return None
        what, allowance = f"a Service of namespace {target.namespace}", "tenancy.targets.namespaces"
    else:
        what, allowance = "not a Service of this namespace, and a host outside the cluster", "tenancy.targets.hosts"
    return (
        f"spec.target.url: {target.destination.host} is {what}; a ProfileRun loads only what its own namespace "
        f"({namespace}) holds: a ModelDeployment (target.deploymentRef), a workload (target.workloadRef) or a "
        f"Service of the namespace by URL, unless the cluster admin allows more ({ALLOWANCES}: {allowance})"
    )


def service_problem(service: dict[str, Any], target: TargetHost, policy: TenancyPolicy) -> str | None:
    """Why the Service a target URL names may not be loaded, as the API holds it (None: it may). Its
    selector's pods are what the load reaches; a Service that names a host (ExternalName) or has hand-written
    endpoints (no selector) could send the load anywhere."""
    assert target.service is not None
    name = f"Service {target.service} of namespace {target.namespace}"
    spec = service.get("spec") or {}
    if spec.get("type") == "ExternalName":
        external = str(spec.get("externalName") or "").lower().rstrip(".")
        if external in policy.target_hosts:
            return None
        return (
            f"spec.target.url: {name} is an ExternalName for {external}, a host outside the cluster; load it by its "
            f"own name if the cluster admin allows it ({ALLOWANCES}: tenancy.targets.hosts)"
        )
    if not spec.get("selector"):
        return (
            f"spec.target.url: {name} has no selector: its endpoints are written by hand and may point anywhere; "
            "give it a selector of the serving pods, or load them through a Service that has one"
        )
    return None


def tenancy_problem(spec: ProfileRunSpec, namespace: str, policy: TenancyPolicy) -> str | None:
    """Why the run may not reach what it names, or None: from the spec alone (the Service a URL names is
    looked up after, service_problem)."""
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
    return (deployment.resources.gpu.count or 0) * deployment.replicas_at_most()


def _peak_of_each_trial(
    spec: ProfileRunSpec, configs: list[Configuration], trace_peak_per_s: float | None
) -> list[float]:
    """The most users (closed loop) or requests per second (open loop, a trace) each planned trial reaches: a
    ramp's end where it ends higher, a trace's busiest second times its speed-up."""
    ramp = spec.load.ramp
    peaks = []
    for config in configs:
        for level in config.levels:
            if config.level_name == "speedup":
                peaks.append((trace_peak_per_s or 0.0) * level)
            else:
                peaks.append(max(level, float(ramp.to)) if ramp is not None else level)
    return peaks


def stage_seconds(spec: ProfileRunSpec) -> float:
    """A stage's whole time under load: its warm-up, its measurement at most, and the graceful stop after it."""
    return parse_duration(spec.load.warmup) + parse_duration(spec.load.max_duration) + graceful_stop_s(spec)


def caps_problem(
    spec: ProfileRunSpec,
    configs: list[Configuration],
    namespace: str,
    policy: TenancyPolicy,
    trace_peak_per_s: float | None = None,
) -> str | None:
    """Why the run would apply more load than its namespace may, or None: checked before it starts, over every
    way it applies load (a level, a ramp's end, a trace at its speed-up; the trials it runs at once summed).
    `trace_peak_per_s`: the most requests in any one second of the trace a trace replay plays."""
    caps, setting = policy.caps_of(namespace)
    level_name = configs[0].level_name if configs else ""
    peaks = sorted(_peak_of_each_trial(spec, configs, trace_peak_per_s), reverse=True)
    at_once = min(spec.search.parallelism, max(len(peaks), 1))
    load = sum(peaks[:at_once])
    pods = max(spec.load.workers, 1)
    gpus = max((_gpus_per_trial(c) for c in configs), default=0) * at_once
    together = "summed over the trials at once (search.parallelism)"
    asked = (
        (
            "users",
            f"concurrent users at the most (load.closedLoop.concurrency, sweep.concurrency, a ramp's end), {together}",
            load if level_name == "concurrency" else None,
        ),
        (
            "rate",
            "requests per second at the most (load.openLoop.rate, sweep.rate, a ramp's end, a trace's busiest "
            f"second times load.trace.speedup), {together}",
            load if level_name in ("rate", "speedup") else None,
        ),
        (
            "processes",
            "load-generator processes at once (load.processes in each of its pods, times the trials at once)",
            spec.load.processes * pods * at_once,
        ),
        (
            "workers",
            "load-generator workers at once (load.workers, times the trials at once)",
            spec.load.workers * at_once,
        ),
        (
            "stage_seconds",
            "seconds of load per stage (load.warmup, load.maxDuration and the graceful stop after it)",
            stage_seconds(spec),
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


def load_reach(run_name: str, target: TargetHost | None, service_selector: dict[str, str] | None) -> LoadReach:
    """The target alone, as admission resolved it: the run's trial servers (None: a ModelDeployment or workload
    target), the pods the selector of the Service its URL names picks in that Service's namespace, an address
    the admin allowed, or, for a host outside the cluster the admin allowed (which a NetworkPolicy cannot
    name), any address on the URL's port."""
    if target is None:
        return LoadReach([{"podSelector": {"matchLabels": {LABEL_RUN: run_name, LABEL_ROLE: "server"}}}])
    if target.address is not None:
        mapped = target.address.ipv4_mapped if isinstance(target.address, ipaddress.IPv6Address) else None
        address = mapped or target.address
        return LoadReach([{"ipBlock": {"cidr": f"{address}/{address.max_prefixlen}"}}])
    port = target.destination.port
    if target.service is not None:
        assert service_selector, "admission refuses a Service without a selector"
        namespace = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: target.namespace}}}
        return LoadReach([{**namespace, "podSelector": {"matchLabels": dict(service_selector)}}])
    host = target.destination.host
    return LoadReach(
        EVERYWHERE, [{"protocol": "TCP", "port": port}], f"{host} is outside the cluster: any address, port {port}"
    )
