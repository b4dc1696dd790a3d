"""`python -m kaliper.optimize`: one ModelOptimization as a command (the optimizer Job's entrypoint, and what
`kaliper run` starts in a cgroup with the target's CPU limit).

    python -m kaliper.optimize MANIFEST --model FILE --output DIR [--dataset FILE]
        [--artifact-prefix pvc://claim/path] [--publish META.yaml]

MANIFEST is the ModelOptimization (YAML or JSON). The report goes to DIR/report.json and DIR/report.html,
the kept models under DIR; with --publish the report (without per-node detail) also goes into a ConfigMap,
which is how the Job hands it to the operator. Progress goes to stderr, one line per step. Exit code: 0 when
a model was chosen, 1 when the optimization failed (the report says why), 2 for bad input.
"""

from __future__ import annotations

import os
import signal
import sys
from datetime import datetime
from pathlib import Path

import click

from kaliper.log import configure_logging
from kaliper.report.optimization import OptimizationReport


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _say(line: str) -> None:
    print(f"{datetime.now():%H:%M:%S} {line}", file=sys.stderr, flush=True)


def cpus_available() -> tuple[float, bool]:
    """The CPU limit of this process's cgroup (the pod's, or the local run's), else the CPUs it may run on;
    and whether it is a limit."""
    from kaliper.measure.cpu import quota_cores

    quota = quota_cores()
    return (quota, True) if quota is not None else (float(len(os.sched_getaffinity(0))), False)


def status_document(report: OptimizationReport) -> str:
    """The report without per-node detail, small enough for a ConfigMap; the full one stays on the volume."""
    trimmed = report.model_copy(deep=True)
    for profile in trimmed.profiles:
        profile.graph_nodes = []
        profile.operators = profile.operators[:50]
    return trimmed.model_dump_json(by_alias=True, exclude_none=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--model", "model", required=True, type=click.Path(exists=True, path_type=Path), help="The model file.")
@click.option("--output", required=True, type=click.Path(file_okay=False, path_type=Path), help="Artifacts folder.")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
@click.option(
    "--artifact-prefix", default=None, help="How --output is named in the report (pvc://claim/path); default: its path."
)
@click.option("--publish", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None)
def main(
    manifest: Path, model: Path, output: Path, dataset: Path | None, artifact_prefix: str | None, publish: Path | None
) -> None:
    from kaliper.api.loader import ManifestError, check_document, read_documents
    from kaliper.api.resources import ModelOptimization
    from kaliper.optimize.engine import Inputs, run

    configure_logging("warning", "auto")
    # SIGTERM (a pod deleted, `kaliper run` interrupted) ends the search as Ctrl-C does: the candidates
    # measured so far are written to a report marked interrupted.
    signal.signal(signal.SIGTERM, _interrupt)
    documents = [check_document(d) for d in read_documents(manifest)]
    found = [d for d in documents if isinstance(d.resource, ModelOptimization) or d.problems]
    if len(found) != 1 or found[0].problems:
        problems = found[0].problems if found else []
        click.echo(
            str(ManifestError(str(manifest), problems)) if problems else f"{manifest}: one ModelOptimization expected",
            err=True,
        )
        sys.exit(2)
    resource = found[0].resource
    assert isinstance(resource, ModelOptimization)
    output = output.resolve()

    def artifact_uri(path: Path) -> str:
        if artifact_prefix is None:
            return str(path)
        relative = path.resolve().relative_to(output).as_posix()
        return artifact_prefix.rstrip("/") + ("/" + relative if relative != "." else "")

    cpus, limited = cpus_available()
    _say(f"optimizing {resource.metadata.name} with up to {cpus:g} CPUs" + (" (its CPU limit)" if limited else ""))
    report = run(
        resource.spec,
        resource.metadata.name or "modeloptimization",
        resource.metadata.namespace,
        Inputs(model=model, output=output, artifact_uri=artifact_uri, cpus=cpus, limited=limited, dataset=dataset),
        progress=_say,
    )
    _say(f"{report.phase}: {report.message}")
    if publish is not None:
        from kaliper.report.publish import publish as publish_configmap

        text = status_document(report)
        _say(f"published the report in ConfigMap {publish_configmap(text, publish)}")
    sys.exit(0 if report.phase == "Succeeded" else 1)


if __name__ == "__main__":
    main()
