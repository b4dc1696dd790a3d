"""A ProfileRun whose target is a workload that already runs (spec.target.workloadRef, a Deployment): what
its trials copy, and the copies. Pure functions: the Deployment as the API returns it in, plain dicts out.

The run snapshots the Deployment's pod template once; each trial is a Deployment `<run>-t<index>` running
that template with the swept cpu, memory, GPUs and replicas on the serving container, and a Service of the
same name in front of it. The copy's pods carry only Kaliper's run and trial labels, never the original's,
so no Service, PodDisruptionBudget or controller of the original selects them; and nothing here writes to
the original.

What the trials sweep is read from the original as a ModelDeploymentTemplate (a custom runtime of the
container's image and port, its resources and replicas): sweep expansion, cost, resource figures, verdicts
and the recommendation then work as they do for a ModelDeployment."""

from __future__ import annotations

import copy
from typing import Any

from kaliper.api.common import GpuRequest, ResourceList, ResourceRequirements
from kaliper.api.modeldeployment import ModelDeploymentTemplate, ServiceSpec, ServingRuntime
from kaliper.api.profilerun import WorkloadReference
from kaliper.manifests.modeldeployment import container_resources
from kaliper.manifests.profilerun import LABEL_ROLE, owned_meta, trial_labels, trial_name


class WorkloadProblem(ValueError):
    """The workload cannot be copied as asked; the message names the field and the fix."""


def snapshot(deployment: dict[str, Any]) -> dict[str, Any]:
    """What every trial starts from: the Deployment's name, replicas and pod template as they were when the
    run planned (an edit of the original mid-run changes no trial)."""
    spec = deployment.get("spec") or {}
    return {
        "name": deployment["metadata"]["name"],
        "replicas": spec.get("replicas", 1),
        "template": copy.deepcopy(spec.get("template") or {}),
    }


def _containers(saved: dict[str, Any]) -> list[dict[str, Any]]:
    return ((saved["template"].get("spec") or {}).get("containers")) or []


def serving_container(saved: dict[str, Any], ref: WorkloadReference) -> dict[str, Any]:
    containers = _containers(saved)
    if not containers:
        raise WorkloadProblem(f"Deployment {saved['name']} has no containers in its pod template")
    if ref.container is None:
        return containers[0]
    found = next((c for c in containers if c.get("name") == ref.container), None)
    if found is None:
        names = ", ".join(str(c.get("name")) for c in containers)
        raise WorkloadProblem(
            f"spec.target.workloadRef.container: Deployment {saved['name']} has no container {ref.container!r} "
            f"(its containers: {names}); name one of them"
        )
    return found


def serving_port(saved: dict[str, Any], ref: WorkloadReference) -> int:
    container = serving_container(saved, ref)
    if ref.port is not None:
        return ref.port
    ports = [p["containerPort"] for p in container.get("ports") or [] if p.get("containerPort")]
    if not ports:
        raise WorkloadProblem(
            f"spec.target.workloadRef.port: container {container.get('name')} of Deployment {saved['name']} "
            "declares no ports; set the port its server listens on"
        )
    return int(ports[0])


def is_gpu_resource(name: str) -> bool:
    """nvidia.com/gpu, MIG slices (nvidia.com/mig-1g.10gb) and other vendors' <domain>/gpu."""
    return "/" in name and (name.endswith("/gpu") or "/mig-" in name)


def _gpu(resources: dict[str, Any]) -> GpuRequest | None:
    for part in ("limits", "requests"):
        for name, value in (resources.get(part) or {}).items():
            if is_gpu_resource(name):
                return GpuRequest(count=int(value), resource_name=name)
    return None


def serving_shape(saved: dict[str, Any], ref: WorkloadReference) -> ModelDeploymentTemplate:
    """The workload's serving container as a ModelDeploymentTemplate, which the sweep varies. A Deployment
    scaled to zero is copied with one replica unless sweep.replicas says otherwise."""
    container = serving_container(saved, ref)
    port = serving_port(saved, ref)
    for each in _containers(saved):
        host_ports = [p["hostPort"] for p in each.get("ports") or [] if p.get("hostPort")]
        if host_ports:
            raise WorkloadProblem(
                f"spec.target.workloadRef: container {each.get('name')} of Deployment {saved['name']} binds host "
                f"port {host_ports[0]}; copies of it would collide with the original's pods on the same node. "
                "Profile a ModelDeployment of the same model instead, or a Deployment without hostPort"
            )
    resources = container.get("resources") or {}

    def cpu_and_memory(part: str) -> ResourceList | None:
        values = {k: str(v) for k, v in (resources.get(part) or {}).items() if k in ("cpu", "memory")}
        return ResourceList.model_validate(values) if values else None

    requests, limits, gpu = cpu_and_memory("requests"), cpu_and_memory("limits"), _gpu(resources)
    return ModelDeploymentTemplate(
        runtime=ServingRuntime(type="custom", image=container.get("image"), port=port),
        replicas=max(1, int(saved.get("replicas") or 0)),
        resources=ResourceRequirements(requests=requests, limits=limits, gpu=gpu)
        if requests or limits or gpu
        else None,
        service=ServiceSpec(port=port),
    )


def _trial_resources(original: dict[str, Any], shape: ModelDeploymentTemplate) -> dict[str, Any]:
    """The original container's resources with cpu, memory and GPUs as the trial's configuration sets them
    (as a ModelDeployment's container gets them); anything else it asks for (ephemeral storage, hugepages,
    claims) is kept."""
    swept = container_resources(shape.resources)
    out = copy.deepcopy(original)
    for part in ("requests", "limits"):
        values = out.get(part) or {}
        kept = {k: v for k, v in values.items() if k not in ("cpu", "memory") and not is_gpu_resource(k)}
        out[part] = {**kept, **swept.get(part, {})}
    return {part: values for part, values in out.items() if values}


def build_trial_workload(
    run: dict[str, Any],
    index: int,
    saved: dict[str, Any],
    ref: WorkloadReference,
    shape: ModelDeploymentTemplate,
) -> list[dict[str, Any]]:
    """The trial's copy of the workload (a Deployment) and the Service the load generator sends to, both
    owned by the run."""
    name = trial_name(run["metadata"]["name"], index)
    labels = {**trial_labels(run["metadata"]["name"], index), LABEL_ROLE: "server"}
    template = copy.deepcopy(saved["template"])
    template["metadata"] = {**(template.get("metadata") or {}), "labels": dict(labels)}
    serving = serving_container(saved, ref)["name"]
    for container in template["spec"]["containers"]:
        if container.get("name") == serving:
            resources = _trial_resources(container.get("resources") or {}, shape)
            if resources:
                container["resources"] = resources
            else:
                container.pop("resources", None)
    port = serving_port(saved, ref)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": owned_meta(run, name, "server", index),
        "spec": {"replicas": shape.replicas, "selector": {"matchLabels": labels}, "template": template},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owned_meta(run, name, "server", index),
        "spec": {
            "selector": labels,
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
    return [deployment, service]


def rollout_state(deployment: dict[str, Any]) -> tuple[bool, str | None]:
    """(every replica of the current template ready, why the rollout failed or None), from the Deployment's
    status as the deployment controller writes it."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted = spec.get("replicas", 1)
    for condition in status.get("conditions") or []:
        failed_quota = condition.get("type") == "ReplicaFailure" and condition.get("status") == "True"
        deadline = condition.get("type") == "Progressing" and condition.get("reason") == "ProgressDeadlineExceeded"
        if failed_quota or deadline:
            return False, f"the trial's Deployment: {condition.get('reason')}: {condition.get('message')}"
    current = status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 1)
    ready = (
        current
        and status.get("updatedReplicas", 0) >= wanted
        and status.get("readyReplicas", 0) >= wanted
        and status.get("replicas", 0) == wanted
    )
    return ready, None
