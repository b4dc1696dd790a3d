"""`python -m kaliper.serving`: serve one ONNX model over the Open Inference Protocol v2.

python -m kaliper.serving --model model.onnx --name iris [--port 8080] [--grpc-port 8081] [--intra-op 1] [--inter-op 1]
                          [--max-batch-size 16 --max-queue-delay 2ms]
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import click

from kaliper.api.units import UnitError, parse_duration
from kaliper.log import configure_logging, get_logger
from kaliper.processes import dies_with_this_process


@click.command()
@click.option("--model", "model_path", required=True, type=click.Path(path_type=Path), help="The .onnx file.")
@click.option("--name", required=True, help="Name the model is served under.")
@click.option("--version", "model_version", default=None, help="Model version to report.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 in a pod).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--grpc-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Also serve the Open Inference Protocol's gRPC service (inference.GRPCInferenceService) on this port.",
)
@click.option("--intra-op", type=click.IntRange(1, 256), default=None, help="ONNX Runtime intra-op threads.")
@click.option("--inter-op", type=click.IntRange(1, 256), default=None, help="ONNX Runtime inter-op threads.")
@click.option("--max-batch-size", type=click.IntRange(1, 4096), default=None, help="Dynamic batching: rows.")
@click.option("--max-queue-delay", default="5ms", show_default=True, help="Dynamic batching: longest wait.")
@click.option("--provider", "providers", multiple=True, help="Execution provider (repeatable).")
@click.option("--require-gpu", is_flag=True, help="Exit unless a GPU execution provider runs the model.")
@click.option("--reuse-port", is_flag=True, help="SO_REUSEPORT: replicas share the port; the kernel spreads load.")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes sharing the port (SO_REUSEPORT), each with its own copy of the model.",
)
@click.option(
    "--concurrency", default=1, show_default=True, type=click.IntRange(1, 64), help="Inferences run at the same time."
)
def main(
    model_path: Path,
    name: str,
    model_version: str | None,
    host: str,
    port: int,
    grpc_port: int | None,
    intra_op: int | None,
    inter_op: int | None,
    max_batch_size: int | None,
    max_queue_delay: str,
    providers: tuple[str, ...],
    require_gpu: bool,
    reuse_port: bool,
    workers: int,
    concurrency: int,
) -> None:
    configure_logging()
    if workers > 1:
        # Fork before the model is loaded (an ONNX Runtime session does not survive a fork): every process
        # loads its own and listens on the same port, and the kernel spreads connections among them.
        reuse_port = True
        tie_to_the_first = dies_with_this_process()
        for _ in range(workers - 1):
            if os.fork() == 0:
                tie_to_the_first()  # the kubelet's SIGTERM reaches the first process; the others follow it
                break
    log = get_logger("kaliper.serving")
    try:
        delay_s = parse_duration(max_queue_delay)
    except UnitError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-queue-delay") from exc
    from aiohttp import web

    from kaliper.serving.model import OnnxModel, ProviderUnavailable
    from kaliper.serving.server import build_app, pod_name

    try:
        model = OnnxModel(model_path, intra_op, inter_op, list(providers) or None, require_gpu)
    except ProviderUnavailable as exc:
        log.error("cannot serve on a GPU", error=str(exc))
        _termination_message(str(exc))
        sys.exit(1)
    except Exception as exc:  # a broken or missing model file: say so and exit, do not serve
        log.error("cannot load the model", path=str(model_path), error=str(exc))
        sys.exit(1)
    log.info(
        "serving",
        model=name,
        path=str(model_path),
        inputs=[i.name for i in model.inputs],
        port=port,
        grpc_port=grpc_port,
        max_batch_size=max_batch_size,
    )
    grpc_address = (host, grpc_port) if grpc_port else None
    app = build_app(
        model, name, model_version, max_batch_size, delay_s, concurrency, grpc_address, reuse_port, pod_name()
    )
    try:
        web.run_app(app, host=host, port=port, print=None, access_log=None, reuse_port=reuse_port)
    except OSError as exc:  # a port taken, an address not of this machine
        log.error("cannot listen", error=str(exc))
        _termination_message(str(exc))
        sys.exit(1)


def _termination_message(message: str) -> None:
    """In a pod, Kubernetes shows this file's text as the container's last termination message (what the
    operator reports for a trial that cannot start)."""
    with contextlib.suppress(OSError):
        Path("/dev/termination-log").write_text(message)


if __name__ == "__main__":
    main()
