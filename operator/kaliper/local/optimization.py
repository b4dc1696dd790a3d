"""`kaliper run` for a ModelOptimization: the optimizer (`python -m kaliper.optimize`) as a process in a cgroup
with the target's CPU limit, as the optimizer Job runs in a pod with that limit on Kubernetes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from kaliper.api.resources import ModelOptimization
from kaliper.api.units import parse_cpu
from kaliper.local.cgroups import Cgroup, Limits, group_name
from kaliper.local.servers import ServerError
from kaliper.local.sources import optimization_dataset, optimization_model, optimization_output
from kaliper.processes import dies_with_this_process
from kaliper.report.optimization import OptimizationReport


def run_optimization(
    resource: ModelOptimization,
    base_dir: Path,
    volumes: dict[str, Path],
    limits: bool,
    progress: Callable[[str], None],
) -> tuple[OptimizationReport, Path]:
    """Run the optimizer under the target's CPU limit; returns its report and the output folder."""
    spec = resource.spec
    model = optimization_model(spec, base_dir, volumes)
    dataset = optimization_dataset(spec, base_dir)
    output = optimization_output(resource, volumes).resolve()
    output.mkdir(parents=True, exist_ok=True)
    manifest = output / "modeloptimization.yaml"
    manifest.write_text(yaml.safe_dump(resource.to_manifest(), sort_keys=False))
    command = [sys.executable, "-m", "kaliper.optimize", str(manifest), "--model", str(model), "--output", str(output)]
    if dataset is not None:
        command += ["--dataset", str(dataset)]
    cpu = float(parse_cpu(spec.target.cpu)) if spec.target.cpu else None
    group = Cgroup(group_name("optimize", 0), Limits(cpu_cores=cpu)).create() if limits and cpu else None

    tie_to_this_process = dies_with_this_process()

    def prepare() -> None:
        tie_to_this_process()  # first: a process seen in its cgroup is one a killed run takes with it
        if group is not None:
            group.join_in_child()

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
