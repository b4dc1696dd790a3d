"""ModelOptimization -> its optimizer Job and what the Job needs, and the follow-up objects. Pure functions:
specs in, plain dicts out, no API calls.

The optimizer is a Job `<name>-optimize` of Kaliper's image running `python -m kaliper.optimize` with the
target's CPU limit (requests = limits, so the latencies it measures are what that limit gives), the model's
PVC mounted read-only at /models and the output PVC at /output. Its manifest and the metadata of its results
ConfigMap come from the ConfigMap `<name>-optimize`; it writes its report into `<name>-result` itself (the
same hand-over as the load generator's) and its models and full report to the PVC. Everything is owned by
the ModelOptimization.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import yaml

from kaliper.api.modeloptimization import ModelOptimizationSpec
from kaliper.api.units import parse_cpu
from kaliper.manifests.modeldeployment import LABEL_MANAGED, BuildError, owner_reference
from kaliper.manifests.profilerun import LABEL_ROLE, results_writer_identity

LABEL_OPTIMIZATION = "kaliper.dev/modeloptimization"
CONFIG_DIR = "/etc/kaliper"
DATASET_DIR = "/etc/kaliper/dataset"
MODEL_DIR = "/models"
OUTPUT_DIR = "/output"
# The Job stops by itself: a search bounded by maxCandidates finishes well within this on any sane model.
DEADLINE_S = 6 * 3600


def optimizer_name(name: str) -> str:
    return f"{name}-optimize"


def results_name(name: str) -> str:
    return f"{name}-result"


def owned_meta(owner: dict[str, Any], name: str, role: str) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "name": name,
        "namespace": meta["namespace"],
        "labels": {LABEL_OPTIMIZATION: meta["name"], LABEL_ROLE: role, LABEL_MANAGED: "kaliper"},
        "ownerReferences": [owner_reference("ModelOptimization", meta["name"], meta["uid"])],
    }


def artifact_prefix(spec: ModelOptimizationSpec) -> str:
    assert spec.output.pvc is not None
    return f"pvc://{spec.output.pvc.claim_name}/{spec.output.pvc.path.strip('/')}"


def check_buildable(spec: ModelOptimizationSpec) -> None:
    """What only the cluster path refuses (the schema accepts it for `kaliper run`)."""
    source = spec.model.source
    if source.file is not None:
        raise BuildError("spec.model.source.file is a path on one machine; on Kubernetes use source.pvc or url")
    if source.image is not None:
        raise BuildError("spec.model.source.image: the optimizer reads models from source.pvc, configMap or url")
    found = spec.evaluation_dataset()
    if found is not None and found[1].file is not None:
        raise BuildError(
            f"spec.{found[0]}.file is a path on one machine; on Kubernetes give the rows as a ConfigMap key "
            "(dataset.configMap)"
        )
    if spec.output.pvc is None:
        raise BuildError(
            "spec.output.pvc: on Kubernetes the optimizer keeps its models on a PersistentVolumeClaim; set "
            "output.pvc (claimName and path)"
        )
    if spec.target.device == "gpu" and (spec.target.gpu is None or not spec.target.gpu.count):
        raise BuildError("spec.target.gpu: a gpu target needs a GPU for the optimizer pod; set target.gpu.count")


def _model_file(spec: ModelOptimizationSpec) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(path of the model in the container, volumes, init containers)."""
    source = spec.model.source
    if source.pvc is not None:
        return str(PurePosixPath(MODEL_DIR) / source.pvc.path.lstrip("/")), [], []
    if source.config_map is not None:
        volume = {"name": "model", "configMap": {"name": source.config_map.name}}
        return str(PurePosixPath(MODEL_DIR) / source.config_map.key), [volume], []
    assert source.url is not None
    name = PurePosixPath(str(source.url).split("?")[0]).name or "model"
    path = str(PurePosixPath(MODEL_DIR) / name)
    command = ["python", "-m", "kaliper.serving.fetch", str(source.url), path]
    if source.sha256:
        command += ["--sha256", source.sha256]
    return path, [{"name": "model", "emptyDir": {}}], [{"name": "fetch-model", "command": command}]


def build_optimizer(owner: dict[str, Any], spec: ModelOptimizationSpec, image: str) -> list[dict[str, Any]]:
    """The optimizer's ConfigMap, identity (ServiceAccount, Role, RoleBinding) and Job, in creation order."""
    check_buildable(spec)
    assert spec.output.pvc is not None
    meta = owner["metadata"]
    name = optimizer_name(meta["name"])
    manifest = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "spec": spec.to_manifest(),
    }
    results_meta = owned_meta(owner, results_name(meta["name"]), "results")
    # The optimizer's identity may not update the owner's finalizers, which blockOwnerDeletion needs.
    results_meta["ownerReferences"][0]["blockOwnerDeletion"] = False
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned_meta(owner, name, "optimizer-config"),
        "data": {
            "manifest.yaml": yaml.safe_dump(manifest, sort_keys=False),
            "results.yaml": yaml.safe_dump({"metadata": results_meta}),
        },
    }
    model_path, volumes, init = _model_file(spec)
    output_path = str(PurePosixPath(OUTPUT_DIR) / spec.output.pvc.path.strip("/"))
    command = [
        "python",
        "-m",
        "kaliper.optimize",
        f"{CONFIG_DIR}/manifest.yaml",
        "--model",
        model_path,
        "--output",
        output_path,
        "--artifact-prefix",
        artifact_prefix(spec),
        "--publish",
        f"{CONFIG_DIR}/results.yaml",
    ]
    mounts = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "output", "mountPath": OUTPUT_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    volumes += [
        {"name": "config", "configMap": {"name": name}},
        {"name": "output", "persistentVolumeClaim": {"claimName": spec.output.pvc.claim_name}},
        {"name": "tmp", "emptyDir": {}},
    ]
    source = spec.model.source
    if source.pvc is not None and source.pvc.claim_name == spec.output.pvc.claim_name:
        mounts.append({"name": "output", "mountPath": MODEL_DIR, "readOnly": True})
    elif source.pvc is not None:
        volumes.append(
            {"name": "model", "persistentVolumeClaim": {"claimName": source.pvc.claim_name, "readOnly": True}}
        )
        mounts.append({"name": "model", "mountPath": MODEL_DIR, "readOnly": True})
    else:
        mounts.append({"name": "model", "mountPath": MODEL_DIR, "readOnly": not init})
    found = spec.evaluation_dataset()
    rows = found[1].config_map if found is not None else None
    if rows is not None:
        volumes.append({"name": "dataset", "configMap": {"name": rows.name}})
        mounts.append({"name": "dataset", "mountPath": DATASET_DIR, "readOnly": True})
        command += ["--dataset", str(PurePosixPath(DATASET_DIR) / rows.key)]
    security = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    container: dict[str, Any] = {
        "name": "optimizer",
        "image": image,
        "command": command,
        "volumeMounts": mounts,
        "resources": optimizer_resources(spec),
        "securityContext": security,
    }
    init_containers = [
        {**c, "image": image, "volumeMounts": [{"name": "model", "mountPath": MODEL_DIR}], "securityContext": security}
        for c in init
    ]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": name,
        "restartPolicy": "Never",
        # fsGroup: the output volume is writable by the non-root optimizer where the volume type supports it.
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    if init_containers:
        pod_spec["initContainers"] = init_containers
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": owned_meta(owner, name, "optimizer"),
        "spec": {
            # A failed optimization is reported with its reason, not run again.
            "backoffLimit": 0,
            "activeDeadlineSeconds": DEADLINE_S,
            "template": {
                "metadata": {"labels": {LABEL_OPTIMIZATION: meta["name"], LABEL_ROLE: "optimizer"}},
                "spec": pod_spec,
            },
        },
    }
    return [config_map, *results_writer_identity(owned_meta(owner, name, "optimizer-identity")), job]


def optimizer_resources(spec: ModelOptimizationSpec) -> dict[str, Any]:
    """Requests = limits for CPU: the optimizer measures latency under exactly the target's CPU."""
    resources: dict[str, dict[str, Any]] = {}
    if spec.target.cpu is not None:
        cpu = f"{int(parse_cpu(spec.target.cpu) * 1000)}m"
        resources = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
    gpu = spec.target.gpu
    if spec.target.device == "gpu" and gpu is not None and gpu.count:
        resources.setdefault("limits", {})[gpu.resource_name] = gpu.count
    return resources


def build_follow_up(owner: dict[str, Any], kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A follow-up ModelDeployment or ProfileRun, owned by the ModelOptimization (deleted with it) and
    carrying its labels (a pipeline's Cleanup selects them the same way)."""
    meta = owner["metadata"]
    labels = {**(meta.get("labels") or {}), LABEL_OPTIMIZATION: meta["name"]}
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference("ModelOptimization", meta["name"], meta["uid"])],
        },
        "spec": spec,
    }
