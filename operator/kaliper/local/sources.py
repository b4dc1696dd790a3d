"""Where `kaliper run` finds what a spec names: every model, dataset and output source resolved to a path on
this machine, or refused with the reason (a ConfigMap, URL or image exists only on a cluster)."""

from __future__ import annotations

from pathlib import Path

from kaliper.api.common import PvcReference
from kaliper.api.model_shape import ModelShape
from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.modeloptimization import ModelOptimizationSpec
from kaliper.api.resources import ModelOptimization
from kaliper.profiling.fit import ShapeOf
from kaliper.profiling.plan import Configuration
from kaliper.runtimes import runtime_of


class NotOnThisMachine(ValueError):
    """A source `kaliper run` cannot reach here: a cluster-only source, a file that is not there, or a claim
    without the folder that stands in for it."""


def local_path(path: str, base_dir: Path) -> Path:
    """A path from a manifest: absolute as written, else relative to the manifest's folder."""
    candidate = Path(path)
    return candidate if candidate.is_absolute() else base_dir / candidate


def on_volume(reference: PvcReference, volumes: dict[str, Path], field: str) -> Path:
    """A PVC path on this machine: `kaliper run --volume CLAIM=DIR` says which folder holds the claim."""
    if reference.claim_name not in volumes:
        raise NotOnThisMachine(
            f"{field} is on PersistentVolumeClaim {reference.claim_name!r}; locally, say which folder holds it: "
            f"kaliper run --volume {reference.claim_name}=DIR ..."
        )
    return volumes[reference.claim_name] / reference.path.lstrip("/")


def _existing(path: Path, what: str) -> Path:
    if not path.exists():
        raise NotOnThisMachine(f"{what}{path} does not exist")
    return path


def deployment_model(spec: ModelDeploymentSpec, base_dir: Path, volumes: dict[str, Path] | None = None) -> Path:
    """A ModelDeployment's model: model.file, or model.pvc in the folder given for the claim."""
    source = spec.model
    if source.pvc is not None:
        path = on_volume(source.pvc, volumes or {}, "model.pvc")
    elif source.file is None:
        kind = next(k for k in ("config_map", "url", "image") if getattr(source, k) is not None)
        raise NotOnThisMachine(f"model.{kind} is a Kubernetes source; for `kaliper run` give the model as model.file")
    else:
        path = local_path(source.file, base_dir)
    return _existing(path, "model ")


def optimization_model(spec: ModelOptimizationSpec, base_dir: Path, volumes: dict[str, Path]) -> Path:
    """A ModelOptimization's input model: model.source.file, or model.source.pvc."""
    source = spec.model.source
    if source.file is not None:
        path = local_path(source.file, base_dir)
    elif source.pvc is not None:
        path = on_volume(source.pvc, volumes, "spec.model.source.pvc")
    else:
        kind = "configMap" if source.config_map is not None else "url" if source.url is not None else "image"
        raise NotOnThisMachine(
            f"spec.model.source.{kind} is a Kubernetes source; for `kaliper run` give model.source.file"
        )
    return _existing(path, "spec.model.source: ")


def optimization_dataset(spec: ModelOptimizationSpec, base_dir: Path) -> Path | None:
    """The rows the candidates are evaluated on: labelled rows, or a GGUF model's prompts (None without)."""
    found = spec.evaluation_dataset()
    if found is None:
        return None
    field, dataset = found
    if dataset.file is None:
        raise NotOnThisMachine(
            f"spec.{field}.configMap is read in the cluster; for `kaliper run` give the rows as dataset.file"
        )
    return _existing(local_path(dataset.file, base_dir), f"spec.{field}.file: ")


def optimization_output(resource: ModelOptimization, volumes: dict[str, Path]) -> Path:
    """Where the optimizer writes: output.directory (from the working folder), output.pvc, else
    ./kaliper-models/<name>."""
    output = resource.spec.output
    if output.directory is not None:
        return local_path(output.directory, Path.cwd())
    if output.pvc is not None:
        return on_volume(output.pvc, volumes, "spec.output.pvc")
    return Path("kaliper-models") / (resource.metadata.name or "modeloptimization")


def model_shapes(base_dir: Path, volumes: dict[str, Path] | None = None) -> ShapeOf:
    """The fit check's reader of each configuration's model (profiling.fit): its header, once per file. A model
    whose header cannot be read is not estimated (its server says what is wrong with it)."""
    shapes: dict[Path, ModelShape | None] = {}

    def shape_of(config: Configuration) -> ModelShape | None:
        if config.deployment is None:
            return None
        try:
            path = deployment_model(config.deployment, base_dir, volumes)
        except NotOnThisMachine:
            return None  # admission says so, in its order (RunPlan.admit's environment check)
        if path not in shapes:
            try:
                shapes[path] = runtime_of(config.deployment).model_shape(str(path))
            except (ValueError, OSError, KeyError):
                shapes[path] = None
        return shapes[path]

    return shape_of
