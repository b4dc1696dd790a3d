"""ModelDeployment -> Deployment and Service. Pure functions: a spec in, plain dicts out, no API calls.

The serving container gets the model under /models/source (a PVC or ConfigMap mounted there, or an
emptyDir an init container fills from an URL or an image), the runtime's command for its port, the
requests and limits (GPUs as the extended resource the spec names), scheduling and the readiness probe.
"""

from __future__ import annotations

from typing import Any

from kaliper import __version__
from kaliper.api.common import API_VERSION, ResourceRequirements
from kaliper.api.modeldeployment import ModelDeploymentSpec, ModelDeploymentTemplate
from kaliper.api.units import parse_duration
from kaliper.runtimes import Launch, grpc_port_of, grpc_problem, port_of, readiness_path, runtime_of
from kaliper.runtimes.base import MODEL_DIR, BuildError

# Kaliper's own image: the built-in server and the model fetcher. The operator passes the image it is
# configured with (the chart's image values), so one setting reaches every pod it creates.
KALIPER_IMAGE = f"ghcr.io/kaliper-dev/kaliper:{__version__}"
# For servers that share tensors between their GPU workers through /dev/shm (runtime.shared_memory): a
# container gets 64 MiB of it.
SHARED_MEMORY = {"name": "shm", "emptyDir": {"medium": "Memory"}}
# The restricted Pod Security Standard, container by container: no privilege escalation, no capabilities.
# Kaliper's own image also runs as its non-root user; other images keep the user they were built with.
CONFINED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
KALIPER_USER = {**CONFINED, "runAsNonRoot": True, "runAsUser": 10001}
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
LABEL_DEPLOYMENT = "kaliper.dev/modeldeployment"
# On the pods of servers with their own Prometheus metrics (the LLM runtimes): the chart's PodMonitor selects
# this label; Prometheus's annotation-based pod discovery reads the prometheus.io annotations.
LABEL_SERVER_METRICS = "kaliper.dev/server-metrics"


def owner_reference(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def selector_labels(name: str) -> dict[str, str]:
    return {LABEL_NAME: "kaliper-model", LABEL_INSTANCE: name, LABEL_DEPLOYMENT: name}


def model_path(spec: ModelDeploymentSpec) -> str:
    """Where the model file is inside the serving container."""
    source = spec.model
    if source.pvc is not None:
        return f"{MODEL_DIR}/{source.pvc.path.lstrip('/')}"
    if source.config_map is not None:
        return f"{MODEL_DIR}/{source.config_map.key}"
    if source.url is not None:
        return f"{MODEL_DIR}/{source.url.rstrip('/').rsplit('/', 1)[-1] or 'model'}"
    if source.image is not None:
        return f"{MODEL_DIR}/{source.image.path.rstrip('/').rsplit('/', 1)[-1]}"
    raise BuildError("spec.model.file is a path on one machine; on Kubernetes use model.pvc, configMap, url or image")


def _volumes(spec: ModelDeploymentSpec, kaliper_image: str) -> tuple[list[dict], list[dict]]:
    """(volumes, init containers) that put the model under MODEL_DIR."""
    source = spec.model
    if source.file is not None:
        model_path(spec)  # raises the BuildError that explains it
    if source.pvc is not None:
        return [{"name": "model", "persistentVolumeClaim": {"claimName": source.pvc.claim_name, "readOnly": True}}], []
    if source.config_map is not None:
        return [{"name": "model", "configMap": {"name": source.config_map.name}}], []
    volume = {"name": "model", "emptyDir": {}}
    mount = [{"name": "model", "mountPath": MODEL_DIR}]
    if source.url is not None:
        command = ["python", "-m", "kaliper.serving.fetch", source.url, model_path(spec)]
        if source.sha256:
            command += ["--sha256", source.sha256]
        fetch = {"name": "fetch-model", "image": kaliper_image, "command": command, "volumeMounts": mount}
        return [volume], [{**fetch, "securityContext": KALIPER_USER}]
    assert source.image is not None
    copy = {
        "name": "copy-model",
        "image": source.image.image,
        "command": ["cp", "-r", source.image.path, MODEL_DIR + "/"],
        "volumeMounts": mount,
        "securityContext": CONFINED,
    }
    return [volume], [copy]


def _command(spec: ModelDeploymentSpec, name: str) -> tuple[list[str] | None, list[str] | None, list[dict]]:
    """(command, args, extra env) of the serving container, as its runtime writes them for a pod."""
    runtime = runtime_of(spec)
    problem = runtime.cluster_problem(spec, name)
    if problem:
        raise BuildError(problem)
    grpc_port = grpc_port_of(spec)
    launch = Launch(spec, "pod", model_path(spec), spec.model.name or name, port_of(spec), grpc_port)
    built = runtime.command(launch)
    env = [{"name": k, "value": v} for k, v in built.env.items()]
    return built.program, built.args, env


def container_resources(resources: ResourceRequirements | None) -> dict[str, Any]:
    """A serving container's `resources`: cpu and memory as given, GPUs as the extended resource named."""
    out: dict[str, Any] = {}
    if resources is None:
        return out
    for part in ("requests", "limits"):
        values = getattr(resources, part)
        if values is not None:
            out[part] = {k: v for k, v in (("cpu", values.cpu), ("memory", values.memory)) if v is not None}
    if resources.gpu is not None and resources.gpu.count:
        # Extended resources: requests must equal limits; setting the limit is enough (Kubernetes copies it).
        out.setdefault("limits", {})[resources.gpu.resource_name] = str(resources.gpu.count)
    return {k: v for k, v in out.items() if v}


def _readiness(spec: ModelDeploymentSpec) -> dict[str, Any]:
    readiness = spec.readiness
    path = readiness_path(spec)
    return {
        "httpGet": {"path": path, "port": "http"},
        "initialDelaySeconds": int(parse_duration(readiness.initial_delay)),
        "periodSeconds": max(1, int(parse_duration(readiness.period))),
        "timeoutSeconds": max(1, int(parse_duration(readiness.timeout))),
        "failureThreshold": readiness.failure_threshold,
    }


def build_deployment(
    name: str, namespace: str, uid: str, spec: ModelDeploymentSpec, kaliper_image: str = KALIPER_IMAGE
) -> dict[str, Any]:
    volumes, init_containers = _volumes(spec, kaliper_image)
    command, args, runtime_env = _command(spec, name)
    runtime = runtime_of(spec)
    image = spec.runtime.image or (kaliper_image if runtime.in_kaliper_image else runtime.image)
    assert image is not None, "a runtime without an image of its own refuses a spec without one"
    env = runtime_env + [e.to_manifest() for e in spec.env or []]
    container: dict[str, Any] = {
        "name": "server",
        "image": image,
        "ports": container_ports(spec),
        "readinessProbe": _readiness(spec),
        "volumeMounts": [{"name": "model", "mountPath": MODEL_DIR, "readOnly": spec.model.pvc is not None}],
        "securityContext": KALIPER_USER if image == kaliper_image else CONFINED,
        # Why a server that will not start exits reaches its pod's status (and a failed trial's message): the
        # termination log if it wrote one, else the end of its output.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    resources = container_resources(spec.resources)
    for key, value in (("command", command), ("args", args), ("env", env), ("resources", resources)):
        if value:
            container[key] = value
    if runtime.shared_memory:
        volumes = [*volumes, SHARED_MEMORY]
        container["volumeMounts"].append({"name": "shm", "mountPath": "/dev/shm"})
    labels = selector_labels(name)
    pod_labels = {**labels, **(spec.pod_labels or {})}
    annotations = dict(spec.pod_annotations or {})
    if runtime.metrics_path is not None:
        pod_labels[LABEL_SERVER_METRICS] = "true"
        scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port_of(spec))}
        annotations = {**scrape, "prometheus.io/path": runtime.metrics_path, **annotations}
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": volumes,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    optional = {
        "initContainers": init_containers,
        "nodeSelector": spec.node_selector,
        "tolerations": [t.to_manifest() for t in spec.tolerations or []],
        "affinity": spec.affinity,
        "imagePullSecrets": [r.to_manifest() for r in spec.image_pull_secrets or []],
        "serviceAccountName": spec.service_account_name,
    }
    pod_spec.update({k: v for k, v in optional.items() if v})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**labels, LABEL_MANAGED: "kaliper"},
            "ownerReferences": [owner_reference("ModelDeployment", name, uid)],
        },
        "spec": {
            # With an autoscaler the replicas are its to set (manifests.autoscaler): applying them would undo its
            # scaling at every change of the ModelDeployment.
            **({"replicas": spec.replicas} if spec.autoscaling is None else {}),
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": annotations},
                "spec": pod_spec,
            },
        },
    }


def build_service(name: str, namespace: str, uid: str, spec: ModelDeploymentSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**selector_labels(name), LABEL_MANAGED: "kaliper"},
            "annotations": dict(spec.service.annotations or {}),
            "ownerReferences": [owner_reference("ModelDeployment", name, uid)],
        },
        "spec": {
            "type": spec.service.type,
            "selector": selector_labels(name),
            "ports": service_ports(spec),
        },
    }


def container_ports(spec: ModelDeploymentSpec) -> list[dict[str, Any]]:
    ports = [{"name": "http", "containerPort": port_of(spec), "protocol": "TCP"}]
    grpc_port = grpc_port_of(spec)
    if grpc_port is not None:
        ports.append({"name": "grpc", "containerPort": grpc_port, "protocol": "TCP"})
    return ports


def service_ports(spec: ModelDeploymentSpec) -> list[dict[str, Any]]:
    ports = [{"name": "http", "port": spec.service.port, "targetPort": "http", "protocol": "TCP"}]
    grpc_port = grpc_port_of(spec)
    if grpc_port is not None:
        # appProtocol tells meshes and gateways the port speaks HTTP/2 without TLS (gRPC's plaintext).
        port = spec.service.grpc_port or grpc_port
        ports.append(
            {"name": "grpc", "port": port, "targetPort": "grpc", "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"}
        )
    return ports


def endpoint(name: str, namespace: str, spec: ModelDeploymentTemplate, protocol: str = "oip-v2") -> str:
    """The Service's URL for a protocol: its HTTP port, or its gRPC port for oip-v2-grpc."""
    if protocol == "oip-v2-grpc":
        if (problem := grpc_problem(spec, "pod")) is not None:
            raise BuildError(problem)
        grpc_port = grpc_port_of(spec)
        return f"http://{name}.{namespace}.svc:{spec.service.grpc_port or grpc_port}"
    return f"http://{name}.{namespace}.svc:{spec.service.port}"


def status_condition(
    kind: str, ok: bool | None, reason: str, message: str, previous: list[dict], generation: int, now: str
) -> dict[str, Any]:
    """A condition of the ModelDeployment's status (`ok` None: Unknown)."""
    status = "Unknown" if ok is None else "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    # The transition time moves only when the status does.
    since = before["lastTransitionTime"] if before and before.get("status") == status else now
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def observed_status(
    name: str,
    namespace: str,
    generation: int,
    spec: ModelDeploymentSpec,
    deployment: dict[str, Any] | None,
    previous_conditions: list[dict],
    now: str,
) -> dict[str, Any]:
    """The ModelDeployment's status from its Deployment's (a plain dict for the status subresource)."""
    desired = spec.replicas
    if spec.autoscaling is not None:  # what its autoscaler last asked for, never under its minimum
        # (a new Deployment starts at one replica until the autoscaler's first pass raises it)
        asked = ((deployment or {}).get("spec") or {}).get("replicas") or 0
        desired = max(asked, spec.autoscaling.min_replicas)
    observed = (deployment or {}).get("status") or {}
    ready = observed.get("readyReplicas") or 0
    updated = observed.get("updatedReplicas") or 0
    current = observed.get("replicas") or 0
    deployment_conditions = {c["type"]: c for c in observed.get("conditions") or []}
    stalled = deployment_conditions.get("Progressing", {}).get("reason") == "ProgressDeadlineExceeded"
    failure = deployment_conditions.get("ReplicaFailure")
    available = observed.get("availableReplicas") or 0
    # The Deployment's status speaks for its spec only once its controller has seen that spec: right after an
    # edit the status still describes the old, fully rolled-out ReplicaSet.
    generation_wanted = (deployment or {}).get("metadata", {}).get("generation")
    caught_up = generation_wanted is None or (observed.get("observedGeneration") or 0) >= generation_wanted
    rolled_out = caught_up and min(ready, updated, available) >= desired and current == desired
    if deployment is None:
        phase, message = "Pending", "the Deployment does not exist yet"
    elif not caught_up:
        phase = "Progressing"
        message = f"the Deployment controller has not yet seen generation {generation_wanted} of the Deployment"
    elif rolled_out:
        phase, message = "Ready", f"{ready}/{desired} replicas ready at {endpoint(name, namespace, spec)}"
    elif stalled or (failure and failure.get("status") == "True"):
        phase = "Degraded"
        message = (failure or deployment_conditions["Progressing"]).get("message", "the rollout is stuck")
    else:
        phase, message = "Progressing", f"{ready}/{desired} replicas ready"
    rolling_out = phase in ("Pending", "Progressing")
    # Ready, Progressing and Degraded as Deployments have them; Reconciling and Stalled for kstatus (Flux,
    # `kubectl wait`) and Argo CD: a stuck rollout is Stalled, which they report as failed.
    decided = [
        ("Ready", phase == "Ready", "ReplicasReady" if phase == "Ready" else "ReplicasNotReady"),
        ("Progressing", rolling_out, "RollingOut" if rolling_out else "Settled"),
        ("Degraded", phase == "Degraded", "RolloutStuck" if phase == "Degraded" else "Healthy"),
        ("Reconciling", rolling_out, "RollingOut" if rolling_out else "Settled"),
        ("Stalled", phase == "Degraded", "RolloutStuck" if phase == "Degraded" else "Healthy"),
    ]
    conditions = [
        status_condition(kind, ok, reason, message, previous_conditions, generation, now)
        for kind, ok, reason in decided
    ]
    return {
        "phase": phase,
        "observedGeneration": generation,
        "conditions": conditions,
        "replicas": current,
        "readyReplicas": ready,
        "endpoint": endpoint(name, namespace, spec),
        "modelName": spec.model.name or name,
        "deploymentName": name,
        "serviceName": name,
        "autoscalerName": name if spec.autoscaling is not None else None,
        "message": message,
    }


def failed_status(generation: int, message: str, previous_conditions: list[dict], now: str) -> dict[str, Any]:
    """A spec that cannot be deployed: Failed, with the reason a person can act on."""
    return {
        "phase": "Failed",
        "observedGeneration": generation,
        "message": message,
        "conditions": [
            status_condition("Ready", False, "InvalidSpec", message, previous_conditions, generation, now),
            status_condition("Degraded", True, "InvalidSpec", message, previous_conditions, generation, now),
            status_condition("Reconciling", False, "InvalidSpec", message, previous_conditions, generation, now),
            status_condition("Stalled", True, "InvalidSpec", message, previous_conditions, generation, now),
        ],
    }
