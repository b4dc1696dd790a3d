# ruff: noqa: I001  (locust must be imported first, see below)
"""`python -m kaliper.loadgen`: the load generator as a command (the container entrypoint of its Jobs).

    python -m kaliper.loadgen run CONFIG [--output result.json]      # one process, or load.processes
    python -m kaliper.loadgen master CONFIG --workers N [--bind HOST:PORT] [--output result.json]
    python -m kaliper.loadgen worker --master HOST:PORT

CONFIG is a YAML or JSON LoadGenConfig (url, request, payload, load, levels). The results document goes to
--output (or stdout with --output -), and with --publish META.yaml also into a ConfigMap (how the Jobs a
ProfileRun starts hand their results to the operator); a short summary goes to stderr. While it runs, `run`
and `master` print progress to stderr, one plain line per update: when a stage starts, once per measurement
window (elapsed time, requests, throughput, the percentile so far, what the stopping rule waits for) and
when it stops (--quiet turns this off). Exit code: 0 when the run completed, 1 when it could not (the
document says why), 2 for bad input.
"""

from __future__ import annotations

import os

# The generator forks only to exec (its gRPC client process, its worker processes). gRPC's fork handlers would
# restart its pollers in such a child between fork and exec, which can abort it there ("Check failed:
# wakeup_fd_->Wakeup().ok()", grpc/grpc#43055: a CI run's gRPC client process died so before it started).
# Read when grpc is first imported, so set before anything imports it.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# Locust first: it monkey-patches the standard library for gevent before anything else opens sockets.
import locust  # noqa: F401

import sys
from pathlib import Path

import click

# Locust first: it monkey-patches the standard library for gevent before anything else opens sockets.
import yaml
from pydantic import ValidationError

from kaliper.api.loader import problems_from
from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.payloads import PayloadError
from kaliper.log import configure_logging


def load_config(path: Path) -> LoadGenConfig:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise click.UsageError(f"cannot read {path}: {exc}") from exc
    try:
        return LoadGenConfig.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(f"  {p}" for p in problems_from(exc, LoadGenConfig))
        raise click.UsageError(f"{path} is not a valid load-generator config:\n{problems}") from exc


def emit(result, output: str, publish_template: Path | None = None) -> None:  # type: ignore[no-untyped-def]
    from kaliper.loadgen.results import summarize

    text = result.model_dump_json(by_alias=True, indent=2)
    if output == "-":
        click.echo(text)
    else:
        Path(output).write_text(text + "\n")
    click.echo(summarize(result), err=True)
    if publish_template is not None:
        from kaliper.report.publish import publish

        click.echo(f"results written to ConfigMap {publish(text, publish_template)}", err=True)
    sys.exit(0 if result.ok else 1)


PUBLISH = click.option(
    "--publish",
    "publish_template",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also write the results into a ConfigMap with this metadata (YAML); how Jobs report to the operator.",
)


@click.group()
@click.option("--log-level", default="warning", type=click.Choice(["debug", "info", "warning", "error"]))
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr while the load test runs.")
def main(log_level: str, quiet: bool) -> None:
    """Kaliper's load generator."""
    from kaliper.loadgen.progress import set_enabled

    configure_logging(log_level)
    set_enabled(not quiet)


@main.command()
@click.argument("config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--output", "-o", default="-", help="Results file (- for stdout).")
@PUBLISH
def run(config_path: Path, output: str, publish_template: Path | None) -> None:
    """Run a load test here (load.processes > 1 starts local worker processes)."""
    from kaliper.loadgen.config import LoadGenError
    from kaliper.loadgen.topology import run as run_load

    config = load_config(config_path)
    try:
        result = run_load(config)
    except (PayloadError, LoadGenError) as exc:
        raise click.UsageError(str(exc)) from exc
    emit(result, output, publish_template)


@main.command()
@click.argument("config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--workers", type=click.IntRange(1, 1024), required=True, help="Workers to wait for.")
@click.option("--bind", default="*:5557", show_default=True, help="Where workers connect.")
@click.option("--join-timeout", default=120.0, show_default=True, help="Seconds to wait for the workers.")
@click.option("--output", "-o", default="-", help="Results file (- for stdout).")
@PUBLISH
def master(
    config_path: Path, workers: int, bind: str, join_timeout: float, output: str, publish_template: Path | None
) -> None:
    """Drive N Locust workers and merge their histograms exactly."""
    from kaliper.loadgen.topology import run_master

    config = load_config(config_path)
    host, _, port = bind.rpartition(":")
    emit(run_master(config, workers, host or "*", int(port), join_timeout), output, publish_template)


@main.command()
@click.option("--master", "master_address", required=True, help="HOST:PORT of the master.")
def worker(master_address: str) -> None:
    """A Locust worker that takes its instructions from the master."""
    from kaliper.loadgen.topology import run_worker

    host, _, port = master_address.rpartition(":")
    run_worker(host, int(port))


if __name__ == "__main__":
    main()
