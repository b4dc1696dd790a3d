"""Operator-wide settings, from the environment the chart sets."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from kaliper.manifests.modeldeployment import KALIPER_IMAGE
from kaliper.manifests.profilerun import LoadgenPod


@dataclass(frozen=True)
class Settings:
    step_interval_s: float = float(os.environ.get("KALIPER_STEP_INTERVAL", "5"))
    # Kaliper's image for every pod the operator creates: built-in servers, model fetchers, load generators.
    image: str = os.environ.get("KALIPER_IMAGE", KALIPER_IMAGE)
    prometheus_url: str | None = os.environ.get("KALIPER_PROMETHEUS_URL") or None
    # How often that Prometheus scrapes the kubelets (kube-prometheus-stack: 30 s), when a run does not say.
    prometheus_scrape_interval: str = os.environ.get("KALIPER_PROMETHEUS_SCRAPE_INTERVAL") or "30s"
    # The operator's own namespace (the chart sets it from the pod): only Cleanups there reach other namespaces.
    operator_namespace: str | None = os.environ.get("KALIPER_NAMESPACE") or None
    # The namespaces the operator watches (the chart's watchNamespaces); empty: all of them.
    watch_namespaces: tuple[str, ...] = tuple(n for n in os.environ.get("KALIPER_WATCH_NAMESPACES", "").split(",") if n)
    dcgm_enabled: bool = os.environ.get("KALIPER_DCGM_ENABLED", "false") == "true"
    dcgm_pod_label: str = os.environ.get("KALIPER_DCGM_POD_LABEL", "auto")
    loadgen: LoadgenPod = field(
        default_factory=lambda: LoadgenPod(
            image=os.environ.get("KALIPER_IMAGE", KALIPER_IMAGE),
            resources={
                "requests": {
                    "cpu": os.environ.get("KALIPER_LOADGEN_CPU", "1"),
                    "memory": os.environ.get("KALIPER_LOADGEN_MEMORY", "512Mi"),
                },
                "limits": {"memory": os.environ.get("KALIPER_LOADGEN_MEMORY_LIMIT", "1Gi")},
            },
            node_selector=json.loads(os.environ.get("KALIPER_LOADGEN_NODE_SELECTOR") or "{}"),
            tolerations=json.loads(os.environ.get("KALIPER_LOADGEN_TOLERATIONS") or "[]"),
            anti_affinity=os.environ.get("KALIPER_LOADGEN_ANTI_AFFINITY") or "required",
        )
    )


SETTINGS = Settings()
