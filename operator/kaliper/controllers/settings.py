"""Operator-wide settings, from the environment the chart sets. Read when the operator starts (load()), not
when this module is imported: a test or an embedding process sets the environment first."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from kaliper.api.units import parse_duration
from kaliper.manifests.modeldeployment import KALIPER_IMAGE
from kaliper.manifests.profilerun import LoadgenPod
from kaliper.metrics.trial_window import MetricsDefaults
from kaliper.profiling.tenancy import LoadCaps, TenancyPolicy


@dataclass(frozen=True)
class Settings:
    step_interval_s: float = 5.0
    # The operator's requests to the API server: per second on average and at once (the chart's apiServer).
    api_qps: float = 50.0
    api_burst: int = 100
    # A step that keeps failing is retried with backoff doubling from the step interval up to this.
    retry_cap_s: float = 300.0
    # How often finished runs' ttls are checked (KALIPER_EXPIRY_INTERVAL; tests shorten it).
    expiry_interval_s: float = 30.0
    # Kaliper's image for every pod the operator creates: built-in servers, model fetchers, load generators.
    image: str = KALIPER_IMAGE
    prometheus_url: str | None = None
    # How often that Prometheus scrapes the kubelets (kube-prometheus-stack: 30 s), when a run does not say.
    prometheus_scrape_interval: str = "30s"
    # The operator's own namespace (the chart sets it from the pod): only Cleanups there reach other namespaces.
    operator_namespace: str | None = None
    # The namespaces the operator watches (the chart's watchNamespaces); empty: all of them.
    watch_namespaces: tuple[str, ...] = ()
    # What a namespace's run may reach besides its own namespace and the Prometheus above (the chart's tenancy).
    tenancy: TenancyPolicy = field(default_factory=TenancyPolicy)
    # Each run's load generators get a NetworkPolicy reaching their target alone (the chart's
    # tenancy.networkPolicy); it binds where the cluster's network plugin enforces NetworkPolicy.
    loadgen_network_policy: bool = True
    dcgm_enabled: bool = False
    dcgm_pod_label: str = "auto"
    loadgen: LoadgenPod = field(default_factory=lambda: LoadgenPod(image=KALIPER_IMAGE, resources={}))

    def metrics_defaults(self) -> MetricsDefaults:
        return MetricsDefaults(
            self.prometheus_url,
            self.prometheus_scrape_interval,
            self.dcgm_enabled,
            self.dcgm_pod_label,
            self.tenancy.query_namespaces,
        )

    @classmethod
    def from_environment(cls, env: dict[str, str] | os._Environ[str] = os.environ) -> Settings:
        image = env.get("KALIPER_IMAGE", KALIPER_IMAGE)
        caps = json.loads(env.get("KALIPER_LOAD_CAPS") or "{}")  # {"default": {...}, "namespaces": {ns: {...}}}
        return cls(
            step_interval_s=float(env.get("KALIPER_STEP_INTERVAL", "5")),
            api_qps=float(env.get("KALIPER_API_QPS", "50")),
            api_burst=int(env.get("KALIPER_API_BURST", "100")),
            retry_cap_s=parse_duration(env.get("KALIPER_RETRY_CAP", "5m")),
            expiry_interval_s=float(env.get("KALIPER_EXPIRY_INTERVAL", "30")),
            image=image,
            prometheus_url=env.get("KALIPER_PROMETHEUS_URL") or None,
            prometheus_scrape_interval=env.get("KALIPER_PROMETHEUS_SCRAPE_INTERVAL") or "30s",
            operator_namespace=env.get("KALIPER_NAMESPACE") or None,
            watch_namespaces=tuple(n for n in env.get("KALIPER_WATCH_NAMESPACES", "").split(",") if n),
            tenancy=TenancyPolicy(
                prometheus_url=env.get("KALIPER_PROMETHEUS_URL") or None,
                prometheus_urls=_listed(env.get("KALIPER_ALLOW_PROMETHEUS_URLS")),
                target_namespaces=_listed(env.get("KALIPER_ALLOW_TARGET_NAMESPACES")),
                target_hosts=_listed(env.get("KALIPER_ALLOW_TARGET_HOSTS")),
                target_cidrs=_listed(env.get("KALIPER_ALLOW_TARGET_CIDRS")),
                cluster_domain=env.get("KALIPER_CLUSTER_DOMAIN") or "cluster.local",
                query_namespaces=_listed(env.get("KALIPER_ALLOW_QUERY_NAMESPACES")),
                caps=LoadCaps.from_values(caps.get("default") or {}),
                namespace_caps=tuple(
                    (name, LoadCaps.from_values(values or {}))
                    for name, values in (caps.get("namespaces") or {}).items()
                ),
            ),
            loadgen_network_policy=env.get("KALIPER_LOADGEN_NETWORK_POLICY", "true") == "true",
            dcgm_enabled=env.get("KALIPER_DCGM_ENABLED", "false") == "true",
            dcgm_pod_label=env.get("KALIPER_DCGM_POD_LABEL", "auto"),
            loadgen=LoadgenPod(
                image=image,
                resources={
                    "requests": {
                        "cpu": env.get("KALIPER_LOADGEN_CPU", "1"),
                        "memory": env.get("KALIPER_LOADGEN_MEMORY", "512Mi"),
                    },
                    "limits": {"memory": env.get("KALIPER_LOADGEN_MEMORY_LIMIT", "1Gi")},
                },
                node_selector=json.loads(env.get("KALIPER_LOADGEN_NODE_SELECTOR") or "{}"),
                tolerations=json.loads(env.get("KALIPER_LOADGEN_TOLERATIONS") or "[]"),
                anti_affinity=env.get("KALIPER_LOADGEN_ANTI_AFFINITY") or "required",
            ),
        )


def _listed(value: str | None) -> tuple[str, ...]:
    """A comma-separated setting (the chart joins a list of values so)."""
    return tuple(item.strip() for item in (value or "").split(",") if item.strip())


class _Current:
    """The settings in force: modules hold this one object and read its attributes. The operator's start-up
    calls load(); code that runs without it (a test stepping a run) reads the environment on first use."""

    def __init__(self) -> None:
        self._settings: Settings | None = None

    def load(self) -> Settings:
        self._settings = Settings.from_environment()
        return self._settings

    def __getattr__(self, name: str) -> Any:
        return getattr(self._settings or self.load(), name)


SETTINGS = _Current()
