"""ModelDeployment -> its HorizontalPodAutoscaler (autoscaling/v2). Pure: a spec in, a plain dict out.

The HPA scales the Deployment of the same name; the ModelDeployment owns it (deleted with it). While it exists
the Deployment is applied without spec.replicas (manifests.modeldeployment), so the two never fight over the
field: the HPA's scale changes are the only writes to it."""

from __future__ import annotations

from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentTemplate
from kaliper.manifests.modeldeployment import LABEL_MANAGED, owner_reference, selector_labels


def build_autoscaler(name: str, namespace: str, uid: str, spec: ModelDeploymentTemplate) -> dict[str, Any] | None:
    """The HPA of a ModelDeployment with spec.autoscaling; None without one."""
    scaling = spec.autoscaling
    if scaling is None:
        return None
    targets = (("cpu", scaling.cpu_utilization), ("memory", scaling.memory_utilization))
    metrics = [
        {"type": "Resource", "resource": {"name": name, "target": {"type": "Utilization", "averageUtilization": at}}}
        for name, at in targets
        if at is not None
    ]
    hpa_spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
        "minReplicas": scaling.min_replicas,
        "maxReplicas": scaling.max_replicas,
        "metrics": metrics,
    }
    if scaling.behavior is not None:
        hpa_spec["behavior"] = scaling.behavior.model_dump(by_alias=True, exclude_none=True)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**selector_labels(name), LABEL_MANAGED: "kaliper"},
            "ownerReferences": [owner_reference("ModelDeployment", name, uid)],
        },
        "spec": hpa_spec,
    }
