"""`kaliper run` for a ModelOptimization: the optimizer (`python -m kaliper.optimize`) as a process in a cgroup
with the target's CPU limit, as the optimizer Job runs in a pod with that limit on Kubernetes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from kaliper.api.common import PvcReference
from kaliper.api.modeloptimization import ModelOptimizationSpec
from kaliper.api.resources import ModelOptimization
from kaliper.api.units import parse_cpu
from kaliper.local.cgroups import Cgroup, Limits, group_name
from kaliper.local.servers import ServerError
from kaliper.processes import die_with_parent
from kaliper.report.optimization import OptimizationReport


def on_volume(reference: PvcReference, volumes: dict[str, Path], field: str) -> Path:
    """A PVC path on this machine: `kaliper run --volume CLAIM=DIR` says which folder holds the claim."""
    if reference.claim_name not in volumes:
        raise ServerError(
            f"{field} is on PersistentVolumeClaim {reference.claim_name!r}; locally, say which folder holds it: "
            f"kaliper run --volume {reference.claim_name}=DIR ..."
        )
    return volumes[reference.claim_name] / reference.path.lstrip("/")


def _local(path: str, base_dir: Path) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else base_dir / candidate


def model_path(spec: ModelOptimizationSpec, base_dir: Path, volumes: dict[str, Path]) -> Path:
    source = spec.model.source
    if source.file is not None:
        path = _local(source.file, base_dir)
    elif source.pvc is not None:
        path = on_volume(source.pvc, volumes, "spec.model.source.pvc")
    else:
        kind = "configMap" if source.config_map is not None else "url" if source.url is not None else "image"
        raise ServerError(f"spec.model.source.{kind} is a Kubernetes source; for `kaliper run` give model.source.file")
    if not path.exists():
        raise ServerError(f"spec.model.source: {path} does not exist")
    return path


def dataset_path(spec: ModelOptimizationSpec, base_dir: Path) -> Path | None:
    accuracy = spec.evaluator.accuracy
    if accuracy is None:
        return None
    if accuracy.dataset.file is None:
        raise ServerError(
            "spec.evaluator.accuracy.dataset.configMap is read in the cluster; for `kaliper run` give the rows as "
            "dataset.file"
        )
    path = _local(accuracy.dataset.file, base_dir)
    if not path.exists():
        raise ServerError(f"spec.evaluator.accuracy.dataset.file: {path} does not exist")
    return path


def output_path(resource: ModelOptimization, base_dir: Path, volumes: dict[str, Path]) -> Path:
    output = resource.spec.output
    if output.directory is not None:
        return _local(output.directory, Path.cwd())
    if output.pvc is not None:
        return on_volume(output.pvc, volumes, "spec.output.pvc")
    return Path("kaliper-models") / (resource.metadata.name or "modeloptimization")


def run_optimization(
    resource: ModelOptimization,
    base_dir: Path,
    volumes: dict[str, Path],
    limits: bool,
    progress: Callable[[str], None],
) -> tuple[OptimizationReport, Path]:
    """Run the optimizer under the target's CPU limit; returns its report and the output folder."""
    spec = resource.spec
    model = model_path(spec, base_dir, volumes)
    dataset = dataset_path(spec, base_dir)
    output = output_path(resource, base_dir, volumes).resolve()
    output.mkdir(parents=True, exist_ok=True)
    manifest = output / "modeloptimization.yaml"
    manifest.write_text(yaml.safe_dump(resource.to_manifest(), sort_keys=False))
    command = [sys.executable, "-m", "kaliper.optimize", str(manifest), "--model", str(model), "--output", str(output)]
    if dataset is not None:
        command += ["--dataset", str(dataset)]
    cpu = float(parse_cpu(spec.target.cpu)) if spec.target.cpu else None
    group = Cgroup(group_name("optimize", 0), Limits(cpu_cores=cpu)).create() if limits and cpu else None

    def prepare() -> None:
        if group is not None:
            group.join_in_child()
        die_with_parent()

    try:
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, preexec_fn=prepare)
        assert process.stderr is not None
        tail: list[str] = []
        for line in process.stderr:
            line = line.rstrip()
            tail = [*tail[-40:], line]
            progress(line)
        process.wait()
    except KeyboardInterrupt:
        process.terminate()
        process.wait(30)
        raise
    finally:
        if group is not None:
            group.remove()
    report_file = output / "report.json"
    if process.returncode not in (0, 1) or not report_file.exists():
        raise ServerError(f"the optimizer exited with {process.returncode} and no report:\n" + "\n".join(tail[-20:]))
    return OptimizationReport.model_validate_json(report_file.read_text()), output
