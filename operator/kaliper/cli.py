"""The `kaliper` command line."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kaliper import __version__
from kaliper.log import configure_logging

if TYPE_CHECKING:  # the CLI imports what a command needs when it runs
    from collections.abc import Callable, Iterable

    from kaliper.report.recommend import Target

F = TypeVar("F", bound="Callable[..., Any]")  # a command function, as click's decorators take and return it

DEFAULT_CRD_DIRS = ("crds", "charts/kaliper/files/crds")  # the chart renders its copy (templates/crds.yaml)
DEFAULT_REFERENCE = "docs/api-reference.md"
DEFAULT_ARGOCD_DIR = "charts/kaliper/argocd"  # Argo CD's health checks, beside the chart's CRDs


def file_to_write(*names: str, help: str, default: Path | None = None) -> Callable[[F], F]:
    """An option naming a file a command writes."""
    return click.option(
        *names,
        type=click.Path(dir_okay=False, path_type=Path),
        default=default,
        show_default=default is not None,
        help=help,
    )


def file_to_read(*names: str, help: str) -> Callable[[F], F]:
    """An option naming a file a command reads (it must exist)."""
    return click.option(*names, type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None, help=help)


def run_namespace(help: str = "The run's namespace (cluster).") -> Callable[[F], F]:
    return click.option("--namespace", "-n", default="default", show_default=True, help=help)


def prometheus_window(url_help: str, selector_example: str, required: bool = True) -> Callable[[F], F]:
    """The options of a command that reads servers' series from Prometheus over a window: --from-prometheus,
    --selector, --window and --end (read with _prometheus_window)."""
    options = (
        click.option("--from-prometheus", "prometheus_url", required=required, default=None, help=url_help),
        click.option(
            "--selector",
            default="",
            help=f"Label matchers of the servers' series, such as '{selector_example}' (default: all).",
        ),
        click.option(
            "--window", default="1h", show_default=True, help="How far back from --end to read (30m, 6h, 1d)."
        ),
        click.option("--end", "end_at", default=None, help="The window's end, an ISO 8601 time (default: now)."),
    )

    def decorate(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kaliper")
@click.option(
    "--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"])
)
@click.option(
    "--log-format",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "json", "console"]),
    help="auto: JSON inside a Kubernetes pod, console elsewhere.",
)
def main(log_level: str, log_format: str) -> None:
    """Kaliper: find the configuration that serves a model within its latency SLO at the lowest cost."""
    configure_logging(log_level, log_format)  # type: ignore[arg-type]


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="Print problems only.")
def validate(paths: tuple[Path, ...], output: str, quiet: bool) -> None:
    """Check Kaliper manifests (files or directories) against the API.

    Documents of other kinds (Secrets, ConfigMaps) are skipped. Exits 1 when any document is invalid.
    """
    from kaliper.api.loader import check_document, manifest_files, read_documents

    documents = [check_document(d) for f in manifest_files(list(paths)) for d in read_documents(f)]
    invalid = [d for d in documents if not d.ok]
    if output == "json":
        click.echo(json.dumps([_document_json(d) for d in documents], indent=2))
    else:
        for document in documents:
            if document.problems:
                click.echo(click.style("invalid ", fg="red") + document.label)
                for problem in document.problems:
                    click.echo(f"  {problem}")
            elif not quiet:
                note = f"skipped: {document.skipped}" if document.skipped else click.style("valid", fg="green")
                click.echo(f"{note:<7} {document.label}" if not document.skipped else f"{document.label}: {note}")
        checked = sum(1 for d in documents if not d.skipped)
        click.echo(
            f"{checked - len(invalid)} valid, {len(invalid)} invalid, {len(documents) - checked} skipped",
            err=bool(invalid),
        )
    if not documents:
        raise click.ClickException("no manifests found (looked for .yaml, .yml and .json files)")
    sys.exit(1 if invalid else 0)


def _document_json(document: Any) -> dict[str, Any]:
    return {
        "source": document.source,
        "document": document.index,
        "object": document.object_ref,
        "valid": document.ok and not document.skipped,
        "skipped": document.skipped,
        "problems": [{"path": p.path, "message": p.message} for p in document.problems],
    }


@main.group()
def crds() -> None:
    """The CustomResourceDefinitions, generated from the API models."""


@crds.command("generate")
@click.option(
    "--dir",
    "directories",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help=f"Directory to write into (repeatable). Default: {', '.join(DEFAULT_CRD_DIRS)}.",
)
@file_to_write("--reference", default=Path(DEFAULT_REFERENCE), help="Where the Markdown API reference goes.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if the files differ from the models.")
def crds_generate(directories: tuple[Path, ...], reference: Path, check: bool) -> None:
    """Write the CRD YAML files, the API reference (with the commands, report fields, Helm values, condition
    reasons and metrics beside it) and the chart's argocd-cm patch (or check that they are up to date)."""
    from kaliper.api.argocd import argocd_patch_stale, write_argocd_patch
    from kaliper.api.crd import stale_crds, write_crds
    from kaliper.api.reasons import reasons_reference_markdown
    from kaliper.api.reference import api_reference_markdown
    from kaliper.report.reference import reports_reference_markdown

    targets = list(directories) or [Path(d) for d in DEFAULT_CRD_DIRS]
    argocd = Path(DEFAULT_ARGOCD_DIR)  # there when run from the repository's root
    # The API reference, and beside it (docs/reference/) every command's help and every report field.
    pages = {
        reference: api_reference_markdown(),
        reference.parent / "reference" / "cli.md": cli_reference_markdown(),
        reference.parent / "reference" / "reports.md": reports_reference_markdown(),
        reference.parent / "reference" / "reasons.md": reasons_reference_markdown(),
        reference.parent / "reference" / "metrics.md": metrics_reference_markdown(),
    }
    values = argocd.parent / "values.yaml"  # the chart's values, documented where they are set
    if values.is_file():
        pages[reference.parent / "reference" / "helm-values.md"] = helm_values_markdown(values.read_text())
    if check:
        stale = stale_crds(targets)
        stale += [path for path, text in pages.items() if not path.exists() or path.read_text() != text]
        if argocd.is_dir() and argocd_patch_stale(argocd):
            stale.append(argocd / "argocd-cm.yaml")
        if stale:
            for path in stale:
                click.echo(f"out of date: {path}", err=True)
            raise click.ClickException("generated files differ from the models; run `kaliper crds generate`")
        click.echo(f"CRDs and API reference are up to date in {', '.join(map(str, [*targets, reference]))}")
        return
    for path in write_crds(targets):
        click.echo(f"wrote {path}")
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        click.echo(f"wrote {path}")
    if argocd.is_dir():
        click.echo(f"wrote {write_argocd_patch(argocd)}")


def helm_values_markdown(values: str) -> str:
    """The Helm values reference (docs/reference/helm-values.md): the chart's values.yaml, whose comments
    document each value where it is set (charts/kaliper/values.schema.json checks them at install)."""
    return (
        "<!-- Generated by `kaliper crds generate` from charts/kaliper/values.yaml. Do not edit by hand. -->\n\n"
        "# Helm values reference\n\n"
        "After this page you know every value the chart takes, its default and what it sets: `helm install kaliper "
        "charts/kaliper --set NAME=VALUE` (or `-f my-values.yaml`); a value the schema refuses stops the install "
        "with its name. The chart's values.yaml, as it is:\n\n```yaml\n" + values.rstrip() + "\n```\n"
    )


def metrics_reference_markdown() -> str:
    """The metrics reference (docs/reference/metrics.md): what the operator and the built-in server export, read
    from the metric objects they register (tests/test_metrics_reference.py scrapes both and holds them to it)."""
    from prometheus_client import Metric

    from kaliper.controllers.metrics import exported
    from kaliper.serving.server import Metrics

    def rows(metrics: Iterable[Any]) -> list[str]:
        table = ["| metric | type | labels | what it counts |", "|---|---|---|---|"]
        for metric in metrics:
            # A registered metric describes itself as a family (a collector yields one); prometheus_client keeps
            # the label names in _labelnames on both. A counter's exposed name gains _total.
            family = metric if isinstance(metric, Metric) else metric.describe()[0]
            exposed = f"{family.name}_total" if family.type == "counter" else family.name
            labels = ", ".join(f"`{label}`" for label in metric._labelnames)
            table.append(f"| `{exposed}` | {family.type} | {labels} | {family.documentation} |")
        return table

    series = (
        "Histograms have the `_bucket`, `_sum` and `_count` series; counters and histograms also a `_created` "
        "gauge per label set (when it first appeared, in Unix seconds)."
    )
    return "\n".join(
        [
            "<!-- Generated by `kaliper crds generate` from the metrics the operator and the built-in server "
            "register. Do not edit by hand. -->",
            "",
            "# Metrics",
            "",
            "After this page you know every metric Kaliper's own processes export, to alert on or to graph. The "
            "figures of a ProfileRun are in its report, not here: these say how the operator and the servers "
            "are doing. " + series,
            "",
            "## The operator",
            "",
            "On the chart's `metrics.port` (8080), path `/metrics`; `serviceMonitor.enabled` makes a ServiceMonitor "
            "for the Prometheus Operator.",
            "",
            *rows(exported()),
            "",
            "## The built-in server",
            "",
            "Kaliper's ONNX Runtime server (runtime `onnxruntime`, the default) on its HTTP port, path "
            "`/metrics`. A model's counters appear with its first request.",
            "",
            *rows(Metrics().exported()),
            "",
        ]
    )


def cli_reference_markdown() -> str:
    """The command-line reference (docs/reference/cli.md): every command's help as `--help` prints it, from the
    click commands themselves, at a fixed width so that it reads the same on every machine."""
    lines = [
        "<!-- Generated by `kaliper crds generate` from the click commands (operator/kaliper/cli.py). Do not edit by"
        " hand. -->",
        "",
        "# Command-line reference",
        "",
        "After this page you know every `kaliper` command and its options; `kaliper COMMAND --help` prints the same.",
        "",
    ]

    def describe(command: click.Command, path: list[str]) -> None:
        context = click.Context(command, info_name=" ".join(path), terminal_width=100, max_content_width=100)
        lines.extend([f"## `{' '.join(path)}`", "", "```text", command.get_help(context).rstrip(), "```", ""])
        if isinstance(command, click.Group):
            for name in sorted(command.commands):
                describe(command.commands[name], [*path, name])

    describe(main, ["kaliper"])
    return "\n".join(lines)


@crds.command("print")
@click.argument("kind", required=False)
def crds_print(kind: str | None) -> None:
    """Print the CRDs (or one, by kind) as YAML, for `kaliper crds print | kubectl apply -f -`."""
    from kaliper.api.crd import custom_resource_definition, render
    from kaliper.api.resources import KINDS

    selected = [k for k in KINDS if kind is None or k.kind.lower() == kind.lower()]
    if not selected:
        raise click.BadParameter(f"{kind!r} is not a Kaliper kind; use one of {', '.join(k.kind for k in KINDS)}")
    click.echo("---\n".join(render(custom_resource_definition(k)) for k in selected), nl=False)


@main.command("run")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where reports go. Default: spec.report.directory, else ./kaliper-reports/<name>.",
)
@click.option("--no-limits", is_flag=True, help="Run without cgroup limits when cgroups cannot be written.")
@click.option(
    "--fail-if-not-met",
    is_flag=True,
    help="Exit 1 unless a configuration met the SLO (NotMet or Inconclusive fail; for CI gates). A ProfileRun's "
    "spec.failIfNotMet does the same for that run.",
)
@click.option(
    "--volume",
    "volumes",
    multiple=True,
    metavar="CLAIM=DIR",
    help="The folder that stands in for a PersistentVolumeClaim (model.pvc, output.pvc); repeatable.",
)
@click.option(
    "--ignore-other-work",
    is_flag=True,
    help="Do not flag trials measured while other work kept this machine busy (a shared runner whose noise "
    "you accept); the whole machine's CPU is still recorded, and the report says the check was off.",
)
def run_command(
    paths: tuple[Path, ...],
    output_dir: Path | None,
    no_limits: bool,
    fail_if_not_met: bool,
    volumes: tuple[str, ...],
    ignore_other_work: bool,
) -> None:
    """Run ModelOptimizations and ProfileRuns on this machine (with the ModelDeployments they target) under
    real cgroup limits. A file holding several kinds runs in order: optimizations first, with their
    follow-ups (a ModelDeployment of the chosen model and a ProfileRun of it), then the ProfileRuns.

    Exits 0 when every optimization chose a model and every run wrote its report with at least one trial
    succeeded, whatever the verdict (see --fail-if-not-met); 1 when an optimization or a run failed; 130
    when interrupted."""
    from rich.console import Console

    from kaliper.api.loader import ManifestError
    from kaliper.local import cgroups
    from kaliper.local.executor import load_manifests
    from kaliper.local.servers import ServerError
    from kaliper.local.sources import NotOnThisMachine

    console = Console(stderr=True)
    claims = _volumes(volumes)
    try:
        found = load_manifests(list(paths))
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from exc
    if not found.runs and not found.optimizations:
        raise click.ClickException(
            "no ProfileRun or ModelOptimization in the files given; `kaliper run` needs at least one"
        )
    if not no_limits and cgroups.detect() is None:
        raise click.ClickException(
            "cgroups with CPU and memory controllers are not writable here, so limits cannot be enforced; run as "
            "root on Linux, or pass --no-limits to measure without limits (the report will say so)"
        )
    # SIGTERM (a CI job's timeout, `kill`) ends the run as Ctrl-C does: the trial under way stops its servers
    # and removes its cgroups, and the finished trials are written to a report marked interrupted.
    signal.signal(signal.SIGTERM, _interrupt)
    for name in found.cleanups:
        console.print(
            f"Cleanup {name}: skipped (it removes cluster objects; locally, `kaliper gc` does that)", soft_wrap=True
        )
    for name, deployment in found.deployments.items():
        if deployment.spec.prediction is not None:
            console.print(
                f"ModelDeployment {name}: spec.prediction is checked by the operator against production; from this "
                "machine, `kaliper compare PROFILE --from-prometheus URL` scores it",
                soft_wrap=True,
            )
    runs = []
    for optimization in found.optimizations:
        try:
            follow_ups = _run_optimization(optimization, found.base_dir, claims, not no_limits, console)
        except (ServerError, NotOnThisMachine) as exc:
            raise click.ClickException(f"ModelOptimization {optimization.metadata.name}: {exc}") from exc
        if follow_ups is None:
            rest = len(found.runs) + len(found.optimizations) - 1 - found.optimizations.index(optimization)
            click.echo(f"not run: the {rest} documents after it depend on its model" if rest else "", err=True)
            sys.exit(1)
        deployment, run = follow_ups
        if deployment is not None:
            found.deployments[deployment.metadata.name or ""] = deployment
        if run is not None:
            runs.append(run)
    failed = False
    for run in [*runs, *found.runs]:
        failed |= _run_profile(run, found, claims, output_dir, no_limits, fail_if_not_met, ignore_other_work, console)
    sys.exit(1 if failed else 0)


def _volumes(pairs: tuple[str, ...]) -> dict[str, Path]:
    claims = {}
    for pair in pairs:
        claim, sep, folder = pair.partition("=")
        if not sep or not claim or not folder:
            raise click.BadParameter(
                f"{pair!r}: write CLAIM=DIR, such as models=./volumes/models", param_hint="--volume"
            )
        if not Path(folder).is_dir():
            raise click.BadParameter(f"{folder} is not a folder", param_hint="--volume")
        claims[claim] = Path(folder).resolve()
    return claims


def _run_optimization(resource: Any, base_dir: Path, claims: dict[str, Path], limits: bool, console: Any) -> Any:
    """One ModelOptimization; returns its follow-ups (deployment, run), either may be None, or None when it
    failed."""
    import yaml

    from kaliper.api.common import API_VERSION
    from kaliper.api.resources import ModelDeployment, ProfileRun
    from kaliper.local.optimization import run_optimization
    from kaliper.optimize.followups import follow_ups
    from kaliper.report.optimization_terminal import print_optimization
    from kaliper.report.status import optimization_status

    name = resource.metadata.name or "modeloptimization"
    with console.status(f"ModelOptimization {name}: starting") as status:

        def update(line: str) -> None:
            console.print(f"[dim]{line}[/dim]", highlight=False, soft_wrap=True)
            status.update(f"ModelOptimization {name}: {line[9:][:100]}")

        try:
            report, output = run_optimization(resource, base_dir, claims, limits, update)
        except KeyboardInterrupt:
            click.echo(f"ModelOptimization {name}: interrupted", err=True)
            sys.exit(130)
    state = optimization_status(report)
    state.phase = report.phase if report.phase != "Running" else "Failed"
    print_optimization(report)
    click.echo(f"report: {output / 'report.json'}\nhtml report: {output / 'report.html'}")
    if report.interrupted:
        sys.exit(130)
    if report.phase != "Succeeded" or report.chosen is None:
        (output / "status.yaml").write_text(yaml.safe_dump(state.to_manifest(), sort_keys=False))
        return None
    made = follow_ups(resource.spec, report.chosen, output)
    namespace = resource.metadata.namespace
    deployment = run = None
    if made.deployment is not None:
        name, deployment_spec = made.deployment
        meta = {"name": name, "namespace": namespace}
        deployment = ModelDeployment(
            apiVersion=API_VERSION, kind="ModelDeployment", metadata=meta, spec=deployment_spec
        )
    if made.profile_run is not None:
        name, run_spec = made.profile_run
        meta = {"name": name, "namespace": namespace}
        run = ProfileRun(apiVersion=API_VERSION, kind="ProfileRun", metadata=meta, spec=run_spec)
    state.follow_up = made.status()
    if made.deployment is not None:
        click.echo(f"follow-ups: {made.described()}")
    (output / "status.yaml").write_text(yaml.safe_dump(state.to_manifest(), sort_keys=False))
    return deployment, run


def _run_profile(
    run: Any,
    found: Any,
    claims: dict[str, Path],
    output_dir: Path | None,
    no_limits: bool,
    fail_if_not_met: bool,
    ignore_other_work: bool,
    console: Any,
) -> bool:
    """One ProfileRun; True when it failed (or missed the SLO under --fail-if-not-met or spec.failIfNotMet)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from kaliper.lifecycle.gc import expires_at
    from kaliper.local.executor import LocalExecutor, RunOptions, write_report
    from kaliper.local.servers import ServerError
    from kaliper.profiling.outcome import failed_gate
    from kaliper.profiling.trials import OTHER_WORK_CORES
    from kaliper.report.profile_html import write_html
    from kaliper.report.profile_terminal import print_report

    name = run.metadata.name or "profilerun"
    directory = output_dir or Path(run.spec.report.directory or Path("kaliper-reports") / name)
    options = RunOptions(
        base_dir=found.base_dir,
        output_dir=directory / "work",
        limits=not no_limits,
        volumes=claims,
        other_work_cores=None if ignore_other_work else OTHER_WORK_CORES,
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(f"ProfileRun {name}", total=None)

        def update(what: str, done: int, total: int, task=task, name=name) -> None:  # type: ignore[no-untyped-def]
            progress.update(task, description=f"{name}: {what}", completed=done, total=total)

        try:
            report = LocalExecutor(options, update).run(run, found.deployments)
        except (ServerError, ValueError) as exc:
            raise click.ClickException(f"ProfileRun {name}: {exc}") from exc
    if no_limits:
        report.warnings.append("run with --no-limits: CPU and memory limits were not enforced")
    if run.spec.ttl is not None and report.finished_at is not None:
        ttl = run.spec.ttl.to_manifest()
        report.expires_at = expires_at(ttl, bool(report.error) or report.interrupted, report.finished_at)
    json_path = write_report(report, directory)
    formats = run.spec.report.formats
    if "table" in formats:
        print_report(report, Console())
    html_path = write_html(report, directory / "report.html") if "html" in formats else None
    click.echo(f"report: {json_path}" + (f"\nhtml report: {html_path}" if html_path else ""))
    if report.interrupted:
        kept = sum(t.status != "Skipped" for t in report.trials)
        click.echo(f"interrupted: the {kept} finished trials are in the report; later runs were not started")
        sys.exit(130)
    gate = failed_gate(run.spec, report.verdict, report.baseline, fail_if_not_met=fail_if_not_met)
    if gate is not None:
        click.echo(f"ProfileRun {name} failed: {gate.message}", err=True)
    return bool(report.error) or gate is not None


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@main.command("gc")
@click.option("--delete", "remove", is_flag=True, help="Remove what is listed (default: only list it).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of lines for people.")
@click.option(
    "--reports",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("kaliper-reports"),
    show_default=True,
    help="Where local reports are (report folders whose ttl has passed are leftovers).",
)
@click.option(
    "--cluster/--no-cluster",
    default=None,
    help="Look in the cluster of $KUBECONFIG (or ~/.kube/config) too. Default: when one is configured.",
)
@click.option("--namespace", "-n", default=None, help="Only this namespace of the cluster (default: all).")
def gc_command(remove: bool, as_json: bool, reports: Path, cluster: bool | None, namespace: str | None) -> None:
    """List (and with --delete remove) what Kaliper left behind: on this machine, cgroups and processes of
    runs that were killed, the parent cgroup kept between runs, expired report folders; in a cluster,
    Kaliper-made objects whose owner is gone and finished runs past their ttl."""
    from datetime import UTC, datetime

    from kaliper.controllers import leftovers
    from kaliper.local.gc import find_local, remove_local

    now = datetime.now(UTC)
    local = find_local(reports, now)
    kubeconfig = os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    in_cluster = cluster if cluster is not None else Path(kubeconfig.split(os.pathsep)[0]).exists()
    try:
        remote = leftovers.find(namespace, now) if in_cluster else []
    except leftovers.ClusterUnreachable as exc:
        raise click.ClickException(str(exc)) from exc
    failures: list[str] = []
    if remove:
        for item in local:
            try:
                remove_local(item)
            except OSError as exc:
                failures.append(f"{item.kind} {item.what}: {exc}")
        failures += leftovers.remove(remote)
    if as_json:
        document = {
            "removed": remove,
            "local": [item.as_dict() for item in local],
            "cluster": [item.as_dict() for item in remote] if in_cluster else None,
            "failures": failures,
        }
        click.echo(json.dumps(document, indent=2))
    else:
        verb = "removed" if remove else "leftover"
        for item in local:
            click.echo(f"{verb}  {item.kind:<14} {item.what}  ({item.why})")
        for found in remote:
            click.echo(f"{verb}  {found.kind:<14} {found.namespace}/{found.name}  ({found.why})")
        for failure in failures:
            click.echo(f"could not remove {failure}", err=True)
        if not local and not remote:
            click.echo("nothing left behind" + ("" if in_cluster else " on this machine (cluster not checked)"))
        elif not remove:
            click.echo("run `kaliper gc --delete` to remove these", err=True)
    sys.exit(1 if failures else 0)


@main.command("report")
@click.argument("source")
@run_namespace()
@click.option("--json", "as_json", is_flag=True, help="Print the report's JSON instead of the table.")
@file_to_write("--html", "html_path", help="Also write the HTML report here.")
def report_command(source: str, namespace: str, as_json: bool, html_path: Path | None) -> None:
    """Show a profile report: SOURCE is a saved report.json, or the name of a finished ProfileRun in the
    cluster of $KUBECONFIG (or ~/.kube/config), read from its ConfigMap whether stored plain or gzipped."""
    from kaliper.report.profile_html import write_html
    from kaliper.report.profile_terminal import print_report

    report = _load_report(source, namespace)
    if as_json:
        click.echo(report.model_dump_json(by_alias=True, exclude_none=True, indent=2))
    else:
        print_report(report)
    if html_path:
        click.echo(f"html report: {write_html(report, html_path)}", err=as_json)


def _load_report(source: str, namespace: str):  # type: ignore[no-untyped-def]
    """A profile report: a saved report.json, or a finished ProfileRun's in the cluster of $KUBECONFIG."""
    from pydantic import ValidationError

    from kaliper.report.schema import ProfileReport

    path = Path(source)
    text = path.read_text() if path.is_file() else _cluster_report(source, namespace)
    try:
        return ProfileReport.model_validate_json(text)
    except ValidationError as exc:
        raise click.ClickException(f"{source} is not a Kaliper profile report: {exc.errors()[0]['msg']}") from exc


@main.command("compare")
@click.argument("baseline")
@click.argument("new", required=False)
@run_namespace("The runs' namespace (cluster).")
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0),
    default=None,
    help="A figure worse beyond the noise by more than this fraction of the baseline is a regression (default "
    "0.05); against production, the profile's intervals are widened by it (default 0.1).",
)
@click.option(
    "--fail-if-regressed",
    is_flag=True,
    help="Exit 1 when any figure regressed (a CI gate); against production, when it is slower than profiled.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparisons as JSON.")
@file_to_write(
    "--html",
    "html_path",
    help="Also write NEW's report page with one chart per figure against BASELINE, both with their intervals "
    "(with --from-prometheus: BASELINE's page with production's figures over its curves).",
)
@prometheus_window(
    "Score BASELINE's prediction against production instead: the Prometheus that scrapes the deployed servers.",
    'namespace="prod",pod=~"iris-.*"',
    required=False,
)
@click.option(
    "--runtime",
    default="onnxruntime",
    show_default=True,
    help="With --from-prometheus: the deployed servers' runtime, whose latency histogram is read.",
)
@click.option(
    "--configuration",
    "configuration",
    multiple=True,
    metavar="NAME=VALUE",
    help="With --from-prometheus: the profiled configuration deployed, one parameter each (default: the profile's "
    "choice).",
)
def compare_command(
    baseline: str,
    new: str | None,
    namespace: str,
    tolerance: float | None,
    fail_if_regressed: bool,
    as_json: bool,
    html_path: Path | None,
    prometheus_url: str | None,
    selector: str,
    window: str,
    end_at: str | None,
    runtime: str,
    configuration: tuple[str, ...],
) -> None:
    """Compare a run with a baseline run: for each configuration both measured at the same load, each figure
    (throughput, latency and token percentiles, error rate, cost; the quality score where both runs scored it)
    better, worse or within the noise, from the 95% intervals both runs measured. BASELINE and NEW are saved
    report.json files or names of finished ProfileRuns in the cluster.

    With --from-prometheus, score BASELINE's prediction against production: the load each replica served over
    the window and the latency the servers' own histogram gives, against the profile's figures at that load
    (interpolated between its levels, with their intervals). Says whether the prediction holds, and why not."""
    if prometheus_url is not None:
        if new is not None:
            raise click.UsageError("--from-prometheus scores one profile (BASELINE) against production: drop NEW")
        _compare_with_production(
            _load_report(baseline, namespace),
            baseline,
            prometheus_url,
            selector,
            (window, *_prometheus_window(window, end_at)),
            runtime,
            configuration,
            0.1 if tolerance is None else tolerance,
            fail_if_regressed,
            as_json,
            html_path,
        )
        return
    if new is None:
        raise click.UsageError("give the run to compare (NEW) after BASELINE, or --from-prometheus URL")
    tolerance = 0.05 if tolerance is None else tolerance
    from kaliper.profiling.comparison import compare_reports, regressions, unmatched
    from kaliper.report.comparison_text import comparison_lines

    a, b = _load_report(baseline, namespace), _load_report(new, namespace)
    found = compare_reports(a, b)
    regressed = regressions(found, lambda figure: tolerance)
    if as_json:
        click.echo(json.dumps([c.model_dump(by_alias=True) for c in found], indent=2))
    else:
        for line in comparison_lines(found, unmatched(a.trials, b.trials), regressed):
            click.echo(line)
    if html_path is not None:
        from kaliper.api.profilerun import RegressionTolerance
        from kaliper.profiling.comparison import against_baseline
        from kaliper.report.profile_html import write_html

        gate = RegressionTolerance(default=tolerance)
        b.baseline, b.comparison = against_baseline(baseline, a, b, gate)
        click.echo(f"wrote {write_html(b, html_path)}", err=as_json)
    if fail_if_regressed and regressed:
        raise SystemExit(1)


def _compare_with_production(  # type: ignore[no-untyped-def]
    report,
    source: str,
    prometheus_url: str,
    selector: str,
    window: tuple[str, float, float],
    runtime: str,
    configuration: tuple[str, ...],
    tolerance: float,
    fail_if_slower: bool,
    as_json: bool,
    html_path: Path | None,
) -> None:
    """`kaliper compare PROFILE --from-prometheus URL`: the prediction scored against production's window."""
    from datetime import UTC, datetime

    from kaliper.metrics.production import NotScored, score_production
    from kaliper.metrics.prometheus import PrometheusMetrics
    from kaliper.profiling.prediction import production_status
    from kaliper.report.production_text import production_lines
    from kaliper.runtimes import latency_histograms

    histograms = latency_histograms()
    if runtime not in histograms:
        known = ", ".join(sorted(histograms))
        raise click.BadParameter(
            f"{runtime!r} exports no latency histogram Kaliper reads; one of: {known}", param_hint="--runtime"
        )
    window_text, window_s, end = window
    query = (selector, histograms[runtime], window_s, end)
    asked = _parameters(configuration) if configuration else None
    try:
        found = score_production(report, asked, PrometheusMetrics(prometheus_url), query, tolerance, "--configuration")
    except NotScored as exc:
        if exc.reason == "ProfileUnavailable":
            raise click.UsageError(exc.message) from exc
        raise click.ClickException(exc.message) from exc
    status = production_status(
        found.score,
        found.window,
        found.levels,
        profile=source,
        configuration=found.configuration,
        window_text=window_text,
        checked_at=datetime.fromtimestamp(end, UTC),
    )
    if as_json:
        click.echo(status.model_dump_json(by_alias=True, exclude_none=True, indent=2))
    else:
        for line in production_lines(status):
            click.echo(line)
    if html_path is not None:
        from kaliper.report.profile_html import write_html

        report.production = status
        click.echo(f"wrote {write_html(report, html_path)}", err=as_json)
    if fail_if_slower and found.score.reason == "SlowerThanProfiled":
        raise SystemExit(1)


def _parameters(pairs: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise click.BadParameter(f"{pair!r}: give NAME=VALUE, such as cpu=500m", param_hint="--configuration")
        found[name] = value
    return found


@main.command("recommend")
@click.argument("source")
@run_namespace()
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["patch", "merge-patch", "kustomize", "manifest"]),
    default="patch",
    show_default=True,
    help="patch: JSON for `kubectl patch` (a ModelDeployment's with --type merge, a Deployment's with kubectl's "
    "default, strategic); merge-patch: the same, refused for a Deployment; kustomize: a patch file for "
    "`patches:`; manifest: the target with the recommendation applied.",
)
@file_to_read(
    "--target",
    "target_file",
    help="With --format manifest: the target's manifest as Git holds it (default: the target in the cluster).",
)
def recommend_command(source: str, namespace: str, output_format: str, target_file: Path | None) -> None:
    """Print a finished run's recommendation as a change to its target (a ModelDeployment, or the Deployment
    of a workloadRef), to commit to Git or apply. SOURCE is a saved report.json or the name of a ProfileRun in
    the cluster of $KUBECONFIG."""
    import yaml

    from kaliper.report import recommend

    report = _load_report(source, namespace)
    try:
        target = recommend.target_of(report)
    except recommend.NoRecommendation as exc:
        raise click.ClickException(str(exc)) from exc
    if output_format == "merge-patch" and target.patch_type != "merge":
        raise click.ClickException(
            f"ProfileRun {report.name} profiled {report.target}: a JSON merge patch would replace its whole "
            "containers list; use --format patch (a strategic merge patch, kubectl patch's default type)"
        )
    if output_format in ("patch", "merge-patch"):
        click.echo(recommend.patch_text(recommend.target_patch(report)))
        return
    if output_format == "kustomize":
        click.echo(recommend.kustomize_patch(report), nl=False)
        return
    manifest = yaml.safe_load(target_file.read_text()) if target_file else _cluster_target(target, namespace)
    try:
        click.echo(yaml.safe_dump(recommend.patched_manifest(report, manifest), sort_keys=False), nl=False)
    except recommend.NoRecommendation as exc:
        raise click.ClickException(str(exc)) from exc


def _cluster_target(target: Target, namespace: str) -> dict:
    """The target as the cluster has it, without what the API server adds (status, uid, managedFields...)."""
    from kaliper.controllers import kube

    kind, name = target.kind, target.name
    try:
        found = kube.get(kind, namespace, name)
    except Exception as exc:  # no kubeconfig, an unreachable cluster, a forbidden read
        raise click.ClickException(f"{kind} {namespace}/{name} could not be read: {exc}") from exc
    if found is None:
        raise click.ClickException(f"{kind} {namespace}/{name} does not exist; pass its manifest with --target FILE")
    meta = {k: v for k, v in found["metadata"].items() if k in ("name", "namespace", "labels")}
    tools = ("kubectl.kubernetes.io/", "kopf.zalando.org/")  # what kubectl apply and kopf note on it
    annotations = {k: v for k, v in (found["metadata"].get("annotations") or {}).items() if not k.startswith(tools)}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": found["apiVersion"], "kind": found["kind"], "metadata": meta, "spec": found["spec"]}


def _cluster_report(run: str, namespace: str) -> str:
    from kaliper.controllers import run_baseline

    try:
        text = run_baseline.saved_report_text(namespace, run)
    except Exception as exc:  # no kubeconfig, an unreachable cluster, a forbidden read
        reason = getattr(exc, "reason", None) or exc
        raise click.ClickException(
            f"{run} is not a file, and ProfileRun {namespace}/{run} could not be read from the cluster of "
            f"$KUBECONFIG: {reason}"
        ) from exc
    if text is None:
        raise click.ClickException(
            f"ProfileRun {namespace}/{run} has no report (no ConfigMap {run}-report): a run writes it when it "
            f"finishes; `kubectl get profilerun {run} -n {namespace}` shows where it is"
        )
    return text


EXAMPLE_MODELS = ("iris.onnx", "mlp.onnx", "iris", "tiny-bert", "tiny-llm", "small-llm", "chat-hf", "reasoning-hf")


@main.command("make-example-models")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--only",
    multiple=True,
    type=click.Choice(EXAMPLE_MODELS),
    help="Make only this model (repeatable); by default all of them (about half a minute: the iris MLP and "
    "tiny-bert take most of it).",
)
def make_example_models(directory: Path, only: tuple[str, ...]) -> None:
    """Make the example models (scikit-learn, converted to ONNX here; nothing is downloaded): iris.onnx and
    mlp.onnx for the demo, iris/ (model.joblib, model.onnx, rows.jsonl) for the optimization examples,
    whose `models` volume this folder stands in for (kaliper run --volume models=DIRECTORY), tiny-bert/
    (a small BERT-style text classifier as PyTorch exports one, its tokenizer.json, sentence-pair rows and
    request bodies) for the transformer optimization examples, tiny-llm/ (tiny.gguf for llama.cpp's
    llama-server, and its tokenizer.json) for the LLM examples, small-llm/ (small.gguf, 35 MB, a few
    milliseconds a token) for the LLM demo, and two chat models in the Hugging Face format that vLLM serves:
    chat-hf/ (random weights, for load) and reasoning-hf/ (fixed output: a known thinking part, then a known
    answer)."""
    from kaliper.optimize.tiny_bert import make_tiny_bert
    from kaliper.serving.examples import make_cpu_heavy, make_iris, make_iris_pipeline
    from kaliper.serving.hf_llm import make_hf_chat_model, make_reasoning_model
    from kaliper.serving.tiny_llm import demo_shape, make_tiny_llm

    bert, tiny = directory / "tiny-bert", directory / "tiny-llm"
    makers: dict[str, Callable[[], list[Path]]] = {
        "iris.onnx": lambda: [make_iris(directory / "iris.onnx")],
        "mlp.onnx": lambda: [make_cpu_heavy(directory / "mlp.onnx")],
        "iris": lambda: make_iris_pipeline(directory),
        "tiny-bert": lambda: [
            make_tiny_bert(bert),
            *(bert / name for name in ("tokenizer.json", "rows.jsonl", "requests.jsonl")),
        ],
        "tiny-llm": lambda: [make_tiny_llm(tiny, name="tiny"), tiny / "tokenizer.json"],
        # The LLM demo's model: the same random-weight recipe at a size whose tokens take milliseconds on a core.
        "small-llm": lambda: [make_tiny_llm(directory / "small-llm", demo_shape(), name="small")],
        "chat-hf": lambda: [make_hf_chat_model(directory / "chat-hf")],
        "reasoning-hf": lambda: [make_reasoning_model(directory / "reasoning-hf")],
    }
    for name in EXAMPLE_MODELS:
        if only and name not in only:
            continue
        for path in makers[name]():
            click.echo(f"wrote {path}")


@main.command("make-example-traces")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default="examples/llm/traces")
def make_example_traces(directory: Path) -> None:
    """Write the example request traces (made here, nothing downloaded): burst.jsonl (Mooncake's shape) and
    burst.csv (Azure's LLM inference trace shape), the same 30 s of requests with a 2 s burst in each."""
    from kaliper.loadgen.example_traces import write_examples

    for path in write_examples(directory):
        click.echo(f"wrote {path}")


@main.command("workload")
@prometheus_window(
    "The Prometheus that scrapes the vLLM servers, such as http://prometheus-operated.monitoring:9090.",
    'model_name="llama",namespace="prod"',
)
@file_to_read(
    "--into",
    "base_file",
    help="A ProfileRun manifest whose payload prompts and load model the fitted ones replace (the rest is kept).",
)
@click.option(
    "--tokenizer",
    "tokenizer_file",
    default=None,
    help="The model's tokenizer.json for the synthetic prompts (default: the --into ProfileRun's own).",
)
@file_to_write(
    "--output", "-o", "output", help="Write the manifest (or the sections) here instead of to standard output."
)
def workload_command(
    prometheus_url: str,
    selector: str,
    window: str,
    end_at: str | None,
    base_file: Path | None,
    tokenizer_file: str | None,
    output: Path | None,
) -> None:
    """Fit the workload a vLLM fleet served from its own metrics in Prometheus (prompt and output token
    histograms, finished requests, prefix-cache hits) and write it as a ProfileRun's payload and load
    sections: lognormal prompt and output lengths, the request rate, gamma or Poisson arrivals, the shared
    prefix. Says how well each fit matches the histogram it came from."""
    import httpx
    import yaml

    from kaliper.log import redacted_url
    from kaliper.metrics.prometheus import PrometheusMetrics
    from kaliper.metrics.prometheus_api import PrometheusError
    from kaliper.metrics.workload_query import WorkloadError, read_workload
    from kaliper.profiling.workload import SectionsError, apply_to, fit_lines, sections

    window_s, end = _prometheus_window(window, end_at)
    shown = redacted_url(prometheus_url)  # the manifest and the messages never carry its password
    try:
        fit = read_workload(PrometheusMetrics(prometheus_url), selector, window_s, end)
    except (WorkloadError, PrometheusError) as exc:
        raise click.ClickException(str(exc)) from exc
    except httpx.TransportError as exc:
        raise click.ClickException(f"cannot reach Prometheus at {shown}: {exc}") from exc
    lines = fit_lines(fit)
    for line in lines:
        click.echo(line, err=True)
    tokenizer = {"file": tokenizer_file} if tokenizer_file else None
    try:
        document = (
            apply_to(yaml.safe_load(base_file.read_text()), fit, tokenizer) if base_file else sections(fit, tokenizer)
        )
    except SectionsError as exc:
        raise click.ClickException(str(exc)) from exc
    header = "".join(f"# {line}\n" for line in [f"kaliper workload --from-prometheus {shown}", *lines])
    text = header + yaml.safe_dump(document, sort_keys=False)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"wrote {output}", err=True)


def _prometheus_window(window: str, end_at: str | None) -> tuple[float, float]:
    """--window and --end: the window's seconds and its end in unix seconds (now when --end is not given)."""
    import time
    from datetime import datetime

    from kaliper.api.units import UnitError, parse_duration

    try:
        window_s = parse_duration(window)
    except UnitError as exc:
        raise click.BadParameter(str(exc), param_hint="--window") from exc
    try:
        end = datetime.fromisoformat(end_at).timestamp() if end_at else time.time()
    except ValueError as exc:
        raise click.BadParameter(
            f"{end_at!r}: give an ISO 8601 time such as 2026-11-26T12:00:00Z", param_hint="--end"
        ) from exc
    return window_s, end


@main.command("explain")
@click.argument("field_path")
def explain_command(field_path: str) -> None:
    """Describe a kind or one of its fields, like `kubectl explain`: kaliper explain profilerun.spec.load"""
    from kaliper.api.explain import NoSuchField, explain

    try:
        click.echo(explain(field_path))
    except NoSuchField as exc:
        raise click.BadParameter(str(exc)) from exc


if __name__ == "__main__":
    main()
