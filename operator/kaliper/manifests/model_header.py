"""ProfileRun -> the Jobs that read its models' headers for the fit check (profiling.fit), before any trial.
Pure functions: specs in, plain dicts out.

One Job `<run>-header-<digest>` per model file the configurations serve: Kaliper's image runs
`python -m kaliper.runtimes.header` against the model mounted as the server's pod would mount it (the same
volumes, node selection, pull secrets and security context: the pod spec of the trial's Deployment, its
container replaced) and leaves the shape in its termination message. Models on a PersistentVolumeClaim or in a
ConfigMap are read; a model fetched from a URL or copied out of an image is read by its server only (reading
its header would mean fetching or copying all of it once more)."""

from __future__ import annotations

import hashlib
from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentSpec, ModelDeploymentTemplate
from kaliper.manifests.modeldeployment import KALIPER_USER, LABEL_MANAGED, build_deployment, model_path, owner_reference
from kaliper.manifests.profilerun import LABEL_ROLE, LABEL_RUN
from kaliper.runtimes import runtime_of

HEADER_ROLE = "model-header"
# Reading a header takes a second; the rest is scheduling, mounting the volume and starting Python. A Job that
# has not read it in this long (no node for it, a volume that will not attach) gives up and the run goes on
# without the estimate for that model.
HEADER_DEADLINE_S = 300
HEADER_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}


def header_source(template: ModelDeploymentTemplate) -> str | None:
    """The model a configuration serves, in words that name it once per run (its runtime reads the header):
    None where its header is not read (no estimate for its runtime here, or a model not on a volume)."""
    if not isinstance(template, ModelDeploymentSpec) or not runtime_of(template).estimates_memory(template):
        return None
    model = template.model
    if model.pvc is not None:
        return f"{template.runtime.type} pvc {model.pvc.claim_name}/{model.pvc.path.lstrip('/')}"
    if model.config_map is not None:
        return f"{template.runtime.type} configMap {model.config_map.name}/{model.config_map.key}"
    return None


def header_job_name(run_name: str, source: str) -> str:
    digest = hashlib.sha256(source.encode()).hexdigest()[:8]
    return f"{run_name[:40]}-header-{digest}"


def build_header_job(run: dict[str, Any], source: str, template: ModelDeploymentSpec, image: str) -> dict[str, Any]:
    """The Job that reads the header of `source`, the model `template` serves."""
    meta = run["metadata"]
    name = header_job_name(meta["name"], source)
    pod = build_deployment(name, meta["namespace"], meta["uid"], template, image)["spec"]["template"]["spec"]
    server = pod["containers"][0]
    reader = {
        "name": "header",
        "image": image,
        "command": ["python", "-m", "kaliper.runtimes.header", template.runtime.type, model_path(template)],
        "volumeMounts": [m for m in server["volumeMounts"] if m["name"] == "model"],
        "resources": HEADER_RESOURCES,
        "securityContext": KALIPER_USER,
    }
    labels = {LABEL_RUN: meta["name"], LABEL_ROLE: HEADER_ROLE, LABEL_MANAGED: "kaliper"}
    pod.update(containers=[reader], restartPolicy="Never", automountServiceAccountToken=False)
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] == "model"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": {"kaliper.dev/model": source},
            "ownerReferences": [owner_reference("ProfileRun", meta["name"], meta["uid"])],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": HEADER_DEADLINE_S,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
