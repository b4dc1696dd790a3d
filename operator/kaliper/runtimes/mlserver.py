"""Seldon's MLServer (scikit-learn models by default): the Open Inference Protocol over REST and gRPC, from its
upstream image on Kubernetes and from the `mlserver` beside this Python locally.

Its settings are decided once (`settings`) and written in the form each path reads: MLSERVER_* variables in
a pod (MLServer reads them for the server and for a single model), settings files in its folder locally."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kaliper.api.units import parse_duration
from kaliper.netutil import free_port
from kaliper.runtimes.base import MODEL_DIR, Launch, Runtime, ServerCommand

DEFAULT_IMPLEMENTATION = "mlserver_sklearn.SKLearnModel"


def settings(launch: Launch) -> tuple[dict[str, Any], dict[str, Any]]:
    """(server settings, model settings) in MLServer's own names, as far as the spec sets them."""
    spec = launch.spec
    server: dict[str, Any] = {"http_port": launch.port, "grpc_port": launch.grpc_port}
    model: dict[str, Any] = {
        "name": launch.served_name,
        "implementation": spec.runtime.implementation or DEFAULT_IMPLEMENTATION,
        "uri": launch.model_path,
    }
    if spec.threads and spec.threads.workers:
        server["parallel_workers"] = spec.threads.workers
    if spec.batching:
        model["max_batch_size"] = spec.batching.max_batch_size
        model["max_batch_time"] = parse_duration(spec.batching.max_queue_delay)
    return server, model


class MlServer(Runtime):
    type = "mlserver"
    display_name = "MLServer"
    image = "docker.io/seldonio/mlserver:1.7.1-sklearn"
    grpc_port = 8081
    serves_grpc_locally = True

    def server_command(self, launch: Launch) -> ServerCommand:
        server, model = settings(launch)
        if launch.place == "pod":
            env = {f"MLSERVER_{k.upper()}": str(v) for k, v in server.items()}
            env |= {f"MLSERVER_MODEL_{k.upper()}": str(v) for k, v in model.items()}
            return ServerCommand(["mlserver", "start", MODEL_DIR], env=env)
        assert launch.workdir is not None, "a local MLServer has a folder for its settings"
        # Locally MLServer always serves gRPC (on a free port unless given one), every replica needs a metrics
        # port of its own (MLServer's default, 8082, would collide), and it runs no worker processes unless
        # asked (MLServer's default is one per core of the machine).
        server = {
            "parallel_workers": 0,
            **server,
            "grpc_port": launch.grpc_port or free_port(),
            "metrics_port": free_port(),
            "load_models_at_startup": True,
        }
        model_settings = {k: v for k, v in model.items() if k != "uri"} | {"parameters": {"uri": model["uri"]}}
        files = {
            "settings.json": json.dumps(server, indent=2),
            "model-settings.json": json.dumps(model_settings, indent=2),
        }
        mlserver = str(Path(sys.executable).with_name("mlserver"))
        return ServerCommand([mlserver, "start", launch.workdir], files=files)


RUNTIME = MlServer()
