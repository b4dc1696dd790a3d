"""The HTTP side: Open Inference Protocol v2 REST routes, health, and Prometheus metrics (aiohttp); with a
gRPC port, the protocol's gRPC service too (serving/grpc_service.py) on the same event loop."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import grpc
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kaliper.serving.batching import DynamicBatcher, Timing
from kaliper.serving.grpc_service import InferenceService, start_grpc_server
from kaliper.serving.model import OnnxModel
from kaliper.serving.protocol import ProtocolError, decode_inputs, encode_outputs

GRPC_SERVER = web.AppKey("grpc_server", grpc.aio.Server)
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = self._counter("kaliper_server_requests", "Inference requests by model and HTTP status.")
        self.grpc_requests = self._counter(
            "kaliper_server_grpc_requests", "ModelInfer calls over gRPC by model and status code."
        )
        self.latency = self._histogram(
            "kaliper_server_request_seconds",
            "Time from an inference request's arrival to its answer, for the requests answered (HTTP 200, gRPC OK).",
            BUCKETS,
        )
        self.queue = self._histogram("kaliper_server_queue_seconds", "Time a request waited for its batch.", BUCKETS)
        self.inference = self._histogram(
            "kaliper_server_inference_seconds", "Time the model ran for a request's batch.", BUCKETS
        )
        self.batch = self._histogram(
            "kaliper_server_batch_rows", "Rows in each batch run.", (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
        )

    def exported(self) -> tuple[Counter | Histogram, ...]:
        """Every metric the server exports, in the order docs/reference/metrics.md lists them."""
        return (self.requests, self.grpc_requests, self.latency, self.queue, self.inference, self.batch)

    def _counter(self, name: str, documentation: str) -> Counter:
        return Counter(name, documentation, ["model", "code"], registry=self.registry)

    def _histogram(self, name: str, documentation: str, buckets: tuple[float, ...]) -> Histogram:
        return Histogram(name, documentation, ["model"], buckets=buckets, registry=self.registry)


def build_app(
    model: OnnxModel,
    name: str,
    version: str | None = None,
    max_batch_size: int | None = None,
    max_queue_delay_s: float = 0.005,
    concurrency: int = 1,
    grpc_address: tuple[str, int] | None = None,
    reuse_port: bool = False,
    replica: str | None = None,
) -> web.Application:
    """The server's aiohttp application; with `grpc_address` (host, port), its gRPC service starts and stops
    with it, sharing the port with other processes only under `reuse_port`, as the HTTP side does; with
    `replica`, every answer names it (the Kaliper-Replica header)."""
    metrics = Metrics()
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="onnxruntime")
    batcher = (
        DynamicBatcher(model.infer, max_batch_size, max_queue_delay_s, executor)
        if max_batch_size and max_batch_size > 1
        else None
    )

    async def run(inputs: dict) -> tuple[dict, Timing]:
        if batcher is not None:
            return await batcher.infer(inputs)
        started = time.perf_counter()
        outputs = await asyncio.get_running_loop().run_in_executor(executor, model.infer, inputs)
        rows = next(iter(inputs.values())).shape[0] if inputs else 0
        return outputs, Timing(0.0, time.perf_counter() - started, rows)

    def observe(timing: Timing) -> None:
        metrics.queue.labels(name).observe(timing.queue_s)
        metrics.inference.labels(name).observe(timing.inference_s)
        metrics.batch.labels(name).observe(timing.batch_rows)

    def count_grpc(code: str, timing: Timing | None, arrived: float) -> None:
        metrics.grpc_requests.labels(name, code).inc()
        if timing is not None:
            observe(timing)
            metrics.latency.labels(name).observe(time.perf_counter() - arrived)

    def error(status: int, message: str) -> web.Response:
        metrics.requests.labels(name, str(status)).inc()
        return web.json_response({"error": message}, status=status)

    async def infer(request: web.Request) -> web.Response:
        arrived = time.perf_counter()
        if request.match_info["model"] != name:
            return error(404, f"model {request.match_info['model']!r} is not served here; this server serves {name!r}")
        try:
            body = json.loads(await request.read())
            inputs = decode_inputs(body, model.input_specs)
        except json.JSONDecodeError as exc:
            return error(400, f"the body is not JSON: {exc}")
        except ProtocolError as exc:
            return error(400, str(exc))
        try:
            outputs, timing = await run(inputs)
        except Exception as exc:
            return error(500, f"inference failed: {exc}")
        answer = web.json_response(encode_outputs(name, outputs, body.get("id")))
        metrics.requests.labels(name, "200").inc()
        observe(timing)
        metrics.latency.labels(name).observe(time.perf_counter() - arrived)
        return answer

    async def model_metadata(request: web.Request) -> web.Response:
        if request.match_info["model"] != name:
            return web.json_response({"error": "unknown model"}, status=404)
        tensor = lambda t: {"name": t.name, "datatype": t.datatype, "shape": t.shape}  # noqa: E731
        return web.json_response(
            {
                "name": name,
                "versions": [version] if version else [],
                "platform": "onnxruntime",
                "inputs": [tensor(t) for t in model.inputs],
                "outputs": [tensor(t) for t in model.outputs if t.name in model.output_names],
            }
        )

    async def ok(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def server_metadata(request: web.Request) -> web.Response:
        return web.json_response({"name": "kaliper-onnxruntime", "version": "2", "extensions": []})

    async def prometheus(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def on_startup(app: web.Application) -> None:
        if batcher is not None:
            batcher.start()
        if grpc_address is not None:
            service = InferenceService(model, name, version, run, count_grpc)
            app[GRPC_SERVER] = await start_grpc_server(service, *grpc_address, reuse_port)

    async def on_cleanup(app: web.Application) -> None:
        if GRPC_SERVER in app:
            await app[GRPC_SERVER].stop(grace=1)
        if batcher is not None:
            await batcher.stop()
        executor.shutdown(wait=False, cancel_futures=True)

    app = web.Application(client_max_size=64 << 20)
    app.router.add_get("/v2", server_metadata)
    app.router.add_get("/v2/health/live", ok)
    app.router.add_get("/v2/health/ready", ok)
    app.router.add_get("/v2/models/{model}", model_metadata)
    app.router.add_get("/v2/models/{model}/ready", ok)
    app.router.add_post("/v2/models/{model}/infer", infer)
    app.router.add_post("/v2/models/{model}/versions/{version}/infer", infer)
    app.router.add_get("/metrics", prometheus)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    if replica is not None:
        app.on_response_prepare.append(partial(_name_replica, replica))
    return app


def pod_name() -> str | None:
    """The pod this server runs in (its hostname, in a Kubernetes pod), None elsewhere: a rehearsal reads which
    replica answered from the Kaliper-Replica header."""
    return socket.gethostname() if "KUBERNETES_SERVICE_HOST" in os.environ else None


async def _name_replica(replica: str, request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Kaliper-Replica"] = replica
