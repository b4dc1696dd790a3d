"""ProfileRun -> the objects of its trials. Pure functions: specs in, plain dicts out, no API calls.

A trial is a ModelDeployment `<run>-t<index>` (the run's target with the swept values applied; for a
workloadRef target, a copy of the workload's Deployment and a Service, kaliper.manifests.workload) and a
load-generator Job `<run>-t<index>-lg` (or, with load.workers, a master Job `-lgm`, its Service and a worker
Job `-lgw`) that runs `python -m kaliper.loadgen` with its config from the ConfigMap `<run>-t<index>-lg`.
The generator writes its results document into the ConfigMap `<run>-t<index>-result` itself, from the
metadata the operator hands it (owner and labels included), so results survive the pod and the operator.
Everything carries an ownerReference to the run: deleting the run deletes them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

import yaml

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import DatasetSource, ProfileRunSpec, TraceSource
from kaliper.api.units import parse_duration
from kaliper.lifecycle.gc import KEEP_UNTIL
from kaliper.manifests.modeldeployment import LABEL_MANAGED, owner_reference
from kaliper.report.publish import PUBLISH_WAIT_S

LABEL_RUN = "kaliper.dev/profilerun"
LABEL_TRIAL = "kaliper.dev/trial"
LABEL_ROLE = "kaliper.dev/role"  # server, loadgen, loadgen-config, results, report


@dataclass(frozen=True)
class LoadgenPod:
    """How the operator runs load-generator pods (the chart's loadGenerator values)."""

    image: str
    resources: dict[str, Any] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    # Keep the generator off the node of the server it measures: "required" (the default; needs a second
    # node), "preferred" (best effort, for one-node clusters) or "none".
    anti_affinity: str = "required"

    def __post_init__(self) -> None:
        if self.anti_affinity not in ("required", "preferred", "none"):
            raise ValueError(f"loadGenerator.antiAffinity is {self.anti_affinity!r}; use required, preferred or none")


def _away_from_server(run_name: str, index: int, mode: str) -> dict[str, Any] | None:
    term = {
        "labelSelector": {"matchLabels": {**trial_labels(run_name, index), LABEL_ROLE: "server"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    if mode == "required":
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    if mode == "preferred":
        weighted = {"weight": 100, "podAffinityTerm": term}
        return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}}
    return None


def loadgen_account(run: str) -> str:
    """The identity of a run's load-generator pods: its own, owned by the run and removed with it."""
    return f"{run}-loadgen"


LOADGEN_PORT = 5557
CONFIG_DIR = "/etc/kaliper"
PAYLOAD_DIR = "/etc/kaliper/payload"
TOKENIZER_DIR = "/etc/kaliper/tokenizer"
QUALITY_DIR = "/etc/kaliper/quality"
MASTER_JOIN_TIMEOUT_S = 120


def trial_prefix(run: str) -> str:
    """A trial's name less its index: a namespace holds many runs' trials."""
    return f"{run}-t"


def trial_name(run: str, index: int) -> str:
    return f"{trial_prefix(run)}{index}"


@dataclass(frozen=True)
class TrialObjects:
    """The name of every object a trial creates, from one place: the builders name them with it, the
    operator reads and tears them down by it."""

    deployment: str  # the trial's ModelDeployment (and the Deployment and Service it makes)
    loadgen_config: str  # ConfigMap: the load generator's config and where it publishes its results
    jobs: tuple[str, ...]  # the load-generator Job, or the master's and the workers'
    master_service: str | None  # with load.workers: the Service the workers reach the master by
    results: str  # ConfigMap the load generator writes its results document into

    def server_pod_regex(self, template_hashes: list[str]) -> str | None:
        """The names of the trial's server pods and of any that replace them: `<deployment>-<pod-template-hash>-`
        and five characters (a looser `<deployment>-.*` would also match the load generator's pods). None
        before any server pod exists."""
        hashes = sorted(set(template_hashes) - {""})
        if not hashes:
            return None
        return f"{self.deployment}-({'|'.join(hashes)})-[a-z0-9]{{5}}"


def trial_objects(run: str, index: int, workers: int = 0) -> TrialObjects:
    name = trial_name(run, index)
    return TrialObjects(
        deployment=name,
        loadgen_config=f"{name}-lg",
        jobs=(f"{name}-lgm", f"{name}-lgw") if workers else (f"{name}-lg",),
        master_service=f"{name}-lgm" if workers else None,
        results=f"{name}-result",
    )


def report_name(run: str) -> str:
    return f"{run}-report"


def owned_meta(run: dict[str, Any], name: str, role: str, index: int | None = None) -> dict[str, Any]:
    meta = run["metadata"]
    labels = {LABEL_RUN: meta["name"], LABEL_ROLE: role, LABEL_MANAGED: "kaliper"}
    if index is not None:
        labels[LABEL_TRIAL] = str(index)
    return {
        "name": name,
        "namespace": meta["namespace"],
        "labels": labels,
        "ownerReferences": [owner_reference("ProfileRun", meta["name"], meta["uid"])],
    }


def trial_labels(run_name: str, index: int) -> dict[str, str]:
    return {LABEL_RUN: run_name, LABEL_TRIAL: str(index)}


def build_trial_deployment(run: dict[str, Any], index: int, spec: ModelDeploymentSpec) -> dict[str, Any]:
    """The trial's ModelDeployment; its pods carry the run and trial labels (for diagnosis and metrics). A
    target's spec.prediction stays with the target: a trial serves for the run alone."""
    labels = {**(spec.pod_labels or {}), **trial_labels(run["metadata"]["name"], index), LABEL_ROLE: "server"}
    spec = spec.model_copy(update={"pod_labels": labels, "prediction": None})
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": owned_meta(run, trial_objects(run["metadata"]["name"], index).deployment, "server", index),
        "spec": spec.to_manifest(),
    }


def payload_file(spec: ProfileRunSpec) -> DatasetSource | TraceSource | None:
    """The file the requests come from: request bodies (payload.dataset), or the prompts' dataset or trace."""
    if spec.payload.prompts is not None:
        return spec.payload.prompts.dataset or spec.payload.prompts.trace
    return spec.payload.dataset


def header_variable(index: int) -> str:
    return f"KALIPER_HEADER_{index}"


@dataclass(frozen=True)
class TrialLoad:
    """Where one trial's load goes and how much of it: the target's URL and model name, the load level, the
    server replicas behind the URL, and the trial's protocol where the run sweeps it."""

    url: str
    model_name: str
    level: float
    server_replicas: int = 1
    protocol: str | None = None
    scores_quality: bool = False
    """Asks the quality dataset after its load (spec.quality; the plan says which trial)."""


def loadgen_config(
    spec: ProfileRunSpec,
    trial: TrialLoad,
    env_headers: dict[str, str],
    dataset_file: str | None = None,
    tokenizer_file: str | None = None,
    quality_file: str | None = None,
) -> dict[str, Any]:
    """The load generator's config (a LoadGenConfig) for one trial. Secret-backed headers become
    environment variable names (env_headers: header -> variable), never values. `dataset_file` and
    `tokenizer_file` say where the generator finds the payload's dataset (or prompts dataset or trace) and the
    prompts' tokenizer, and `quality_file` spec.quality's dataset: a mounted ConfigMap key in the cluster, a
    resolved path locally. Behind one endpoint
    for several server replicas, each read of the server's metrics reaches one replica, so the generator does
    not check itself against them."""
    url, model_name, level, protocol = trial.url, trial.model_name, trial.level, trial.protocol
    load = spec.load.to_manifest()
    if spec.load.closed_loop is not None:
        load["closedLoop"]["concurrency"] = int(level)
    elif spec.load.trace is not None:
        load["trace"]["speedup"] = level
    else:
        load["openLoop"]["rate"] = level
    payload = spec.payload.to_manifest()
    holder = payload.get("prompts", payload)  # where a dataset (or a trace) and a tokenizer sit
    if dataset_file is not None:
        key = "trace" if "trace" in holder else "dataset"
        holder[key] = {**holder[key], "file": dataset_file}
        holder[key].pop("configMap", None)
    if tokenizer_file is not None:
        holder["tokenizer"] = {"file": tokenizer_file}
    request = spec.request.to_manifest()
    request.setdefault("modelName", model_name)
    if protocol is not None:
        request["protocol"] = protocol
    if request.get("protocol") != "oip-v2-grpc":
        request.pop("grpc", None)  # set for the gRPC trials of a protocol sweep
    request.pop("headersFrom", None)
    if trial.server_replicas > 1 and "generation" in request:
        request["generation"]["serverMetricsPath"] = None
    config = {"url": url, "request": request, "payload": payload, "load": load, "envHeaders": env_headers}
    if spec.slo is not None and spec.slo.latency:
        config["objectives"] = [o.to_manifest() for o in spec.slo.latency]
    if trial.scores_quality and spec.quality is not None and quality_file is not None:
        quality = spec.quality
        config["quality"] = {"file": quality_file, "rows": quality.rows, "maxTokens": quality.max_tokens}
    return config


def _loadgen_pod(
    run: dict[str, Any], index: int, spec: ProfileRunSpec, pod: LoadgenPod, command: list[str]
) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        {"name": header_variable(i), "valueFrom": {"secretKeyRef": h.secret_key_ref.to_manifest()}}
        for i, h in enumerate(spec.request.headers_from or [])
    ]
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": trial_objects(run["metadata"]["name"], index).loadgen_config}},
        {"name": "tmp", "emptyDir": {}},
    ]
    dataset = payload_file(spec)
    if dataset is not None and dataset.config_map is not None:
        volumes.append({"name": "payload", "configMap": {"name": dataset.config_map.name}})
        mounts.append({"name": "payload", "mountPath": PAYLOAD_DIR, "readOnly": True})
    tokenizer = spec.payload.prompts.tokenizer if spec.payload.prompts else None
    if tokenizer is not None and tokenizer.config_map is not None:
        volumes.append({"name": "tokenizer", "configMap": {"name": tokenizer.config_map.name}})
        mounts.append({"name": "tokenizer", "mountPath": TOKENIZER_DIR, "readOnly": True})
    quality = spec.quality.dataset if spec.quality is not None else None
    if quality is not None and quality.config_map is not None:
        volumes.append({"name": "quality", "configMap": {"name": quality.config_map.name}})
        mounts.append({"name": "quality", "mountPath": QUALITY_DIR, "readOnly": True})
    container: dict[str, Any] = {
        "name": "loadgen",
        "image": pod.image,
        "command": command,
        "volumeMounts": mounts,
        "resources": pod.resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if env:
        container["env"] = env
    pod_spec: dict[str, Any] = {
        "serviceAccountName": loadgen_account(run["metadata"]["name"]),
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    placement = {
        "nodeSelector": pod.node_selector,
        "tolerations": pod.tolerations,
        "affinity": _away_from_server(run["metadata"]["name"], index, pod.anti_affinity),
    }
    pod_spec.update({k: v for k, v in placement.items() if v})
    return {
        "metadata": {"labels": {**trial_labels(run["metadata"]["name"], index), LABEL_ROLE: "loadgen"}},
        "spec": pod_spec,
    }


def job_deadline_s(spec: ProfileRunSpec) -> int:
    """How long a load-generator Job may run: warm-up and the longest measurement, plus time to start, and the
    time its results may wait for an API server that is away (PUBLISH_WAIT_S: a Job past its deadline when the
    API server comes back is ended at once, its measurement lost). The Job stops by itself even if nobody
    deletes it."""
    load_s = parse_duration(spec.load.warmup) + parse_duration(spec.load.max_duration)
    return int(load_s) + MASTER_JOIN_TIMEOUT_S + int(PUBLISH_WAIT_S)


def _job(
    run: dict[str, Any], index: int, name: str, pod: dict[str, Any], spec: ProfileRunSpec, parallelism: int = 1
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": owned_meta(run, name, "loadgen", index),
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            # A load test that failed is reported, not silently measured again.
            "backoffLimit": 0,
            "activeDeadlineSeconds": job_deadline_s(spec),
            "template": pod,
        },
    }


def build_loadgen(
    run: dict[str, Any], index: int, spec: ProfileRunSpec, trial: TrialLoad, pod: LoadgenPod
) -> list[dict[str, Any]]:
    """The trial's load-generator objects: its config ConfigMap, then the Job (or master Job, Service and
    worker Job)."""
    workers = spec.load.workers
    names = trial_objects(run["metadata"]["name"], index, workers)
    headers = {h.name: header_variable(i) for i, h in enumerate(spec.request.headers_from or [])}
    dataset = payload_file(spec)
    dataset_file = str(PurePosixPath(PAYLOAD_DIR) / dataset.config_map.key) if dataset and dataset.config_map else None
    tokenizer = spec.payload.prompts.tokenizer if spec.payload.prompts else None
    tokenizer_file = (
        str(PurePosixPath(TOKENIZER_DIR) / tokenizer.config_map.key) if tokenizer and tokenizer.config_map else None
    )
    quality = spec.quality.dataset if spec.quality is not None else None
    quality_file = str(PurePosixPath(QUALITY_DIR) / quality.config_map.key) if quality and quality.config_map else None
    config = loadgen_config(spec, trial, headers, dataset_file, tokenizer_file, quality_file)
    results_meta = owned_meta(run, names.results, "results", index)
    # The load generator's identity may not update the run's finalizers, which blocking the owner's deletion
    # needs (OwnerReferencesPermissionEnforcement); the results need not hold up a deletion anyway.
    results_meta["ownerReferences"][0]["blockOwnerDeletion"] = False
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned_meta(run, names.loadgen_config, "loadgen-config", index),
        "data": {"config.yaml": yaml.safe_dump(config), "results.yaml": yaml.safe_dump({"metadata": results_meta})},
    }
    config_path, publish = f"{CONFIG_DIR}/config.yaml", f"{CONFIG_DIR}/results.yaml"
    base = ["python", "-m", "kaliper.loadgen"]
    out = ["--output", "/tmp/result.json", "--publish", publish]
    if names.master_service is None:
        single = _loadgen_pod(run, index, spec, pod, [*base, "run", config_path, *out])
        return [config_map, _job(run, index, names.jobs[0], single, spec)]
    master_name = names.master_service
    master_pod = _loadgen_pod(
        run,
        index,
        spec,
        pod,
        [
            *base,
            "master",
            config_path,
            "--workers",
            str(workers),
            "--bind",
            f"*:{LOADGEN_PORT}",
            "--join-timeout",
            str(MASTER_JOIN_TIMEOUT_S),
            *out,
        ],
    )
    master_pod["metadata"]["labels"][LABEL_ROLE] = "loadgen-master"
    master_pod["spec"]["containers"][0]["ports"] = [{"name": "locust", "containerPort": LOADGEN_PORT}]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owned_meta(run, master_name, "loadgen", index),
        "spec": {
            "clusterIP": "None",
            "selector": {**trial_labels(run["metadata"]["name"], index), LABEL_ROLE: "loadgen-master"},
            "ports": [{"name": "locust", "port": LOADGEN_PORT, "targetPort": LOADGEN_PORT}],
        },
    }
    worker_pod = _loadgen_pod(run, index, spec, pod, [*base, "worker", "--master", f"{master_name}:{LOADGEN_PORT}"])
    return [
        config_map,
        service,
        _job(run, index, names.jobs[0], master_pod, spec),
        _job(run, index, names.jobs[1], worker_pod, spec, parallelism=workers),
    ]


def loadgen_rbac(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's load-generator identity, owned by the run, so it goes when the run does."""
    return results_writer_identity(owned_meta(run, loadgen_account(run["metadata"]["name"]), "loadgen-identity"))


REACH_ANNOTATION = "kaliper.dev/reach"
# The cluster's DNS: CoreDNS and kube-dns pods carry this label in every distribution.
# The cluster's DNS, in kube-system only: a namespace's own pod labelled k8s-app=kube-dns is not it.
CLUSTER_DNS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}


def loadgen_network_policy(
    run: dict[str, Any],
    target: list[dict[str, Any]],
    target_ports: list[dict[str, Any]] | None,
    api_server: list[tuple[str, int]],
    wider: str | None = None,
) -> dict[str, Any]:
    """The run's NetworkPolicy: its load-generator pods may reach their target (`target`: the egress peers,
    on `target_ports` or any port), the cluster's DNS, the API server (`api_server`: its addresses and ports,
    where they write their results) and, with load.workers, their master; nothing else, where the cluster's
    network enforces NetworkPolicy. Owned by the run; `wider`: why the target's peers are wider than the target
    itself, kept in an annotation."""
    name = run["metadata"]["name"]
    meta = owned_meta(run, loadgen_account(name), "loadgen-network")
    if wider:
        meta["annotations"] = {REACH_ANNOTATION: wider}
    to_target: dict[str, Any] = {"to": target, **({"ports": target_ports} if target_ports else {})}
    egress = [to_target, CLUSTER_DNS]
    if api_server:
        blocks = sorted({f"{ip}/{128 if ':' in ip else 32}" for ip, _ in api_server})
        ports = sorted({port for _, port in api_server})
        egress.append(
            {
                "to": [{"ipBlock": {"cidr": block}} for block in blocks],
                "ports": [{"protocol": "TCP", "port": port} for port in ports],
            }
        )
    master = {"matchLabels": {LABEL_RUN: name, LABEL_ROLE: "loadgen-master"}}
    egress.append({"to": [{"podSelector": master}], "ports": [{"protocol": "TCP", "port": LOADGEN_PORT}]})
    generators = {LABEL_RUN: name}, ["loadgen", "loadgen-master"]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta,
        "spec": {
            "podSelector": {
                "matchLabels": generators[0],
                "matchExpressions": [{"key": LABEL_ROLE, "operator": "In", "values": generators[1]}],
            },
            "policyTypes": ["Egress"],
            "egress": egress,
        },
    }


def results_writer_identity(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """A ServiceAccount (named and owned as `meta` says) that may create ConfigMaps, its results, and nothing
    else: the load generator's and the optimizer's."""
    name = meta["name"]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": meta["namespace"]}],
        },
    ]


def build_report_configmap(
    run: dict[str, Any], content: dict[str, Any], keep_until: datetime | None = None
) -> dict[str, Any]:
    """The run's report ConfigMap; content comes from report.store.configmap_content. With keep_until
    (spec.report.keepFor) it has no owner, so it outlives the run, and says until when it is kept."""
    meta = owned_meta(run, report_name(run["metadata"]["name"]), "report")
    if keep_until is not None:
        del meta["ownerReferences"]
        meta["annotations"] = {KEEP_UNTIL: keep_until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **content}
