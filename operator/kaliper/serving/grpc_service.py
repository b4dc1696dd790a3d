"""The gRPC side of the built-in server: `inference.GRPCInferenceService` (grpc.aio) on the event loop the
HTTP side runs on, inferring through the same path (batcher or executor) and counted in the same registry."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import numpy as np

from kaliper.serving.batching import Timing
from kaliper.serving.model import OnnxModel
from kaliper.serving.oip_grpc import infer_response, messages, request_arrays, services
from kaliper.serving.protocol import ProtocolError

Infer = Callable[[dict[str, np.ndarray]], Awaitable[tuple[dict[str, np.ndarray], Timing]]]
Count = Callable[[str, Timing | None, float], None]
"""Records one call: its status code's name, the timing of a call that ran the model, and when it arrived
(time.perf_counter())."""


class InferenceService(services.GRPCInferenceServiceServicer):
    """Liveness, readiness, metadata and ModelInfer for the one model this server serves."""

    def __init__(self, model: OnnxModel, name: str, version: str | None, infer: Infer, count: Count) -> None:
        self.model, self.name, self.version = model, name, version or ""
        self.infer, self.count = infer, count

    async def ServerLive(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return messages.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return messages.ServerReadyResponse(ready=True)

    async def ModelReady(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return messages.ModelReadyResponse(ready=request.name == self.name)

    async def ServerMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return messages.ServerMetadataResponse(name="kaliper-onnxruntime", version="2")

    async def ModelMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request.name != self.name:
            await context.abort(grpc.StatusCode.NOT_FOUND, self._unknown(request.name))
        response = messages.ModelMetadataResponse(
            name=self.name, versions=[self.version] if self.version else [], platform="onnxruntime"
        )
        for tensor in self.model.inputs:
            response.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        for tensor in self.model.outputs:
            if tensor.name in self.model.output_names:
                response.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        return response

    async def ModelInfer(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        arrived = time.perf_counter()
        if request.model_name != self.name:
            self.count("NOT_FOUND", None, arrived)
            await context.abort(grpc.StatusCode.NOT_FOUND, self._unknown(request.model_name))
        try:
            inputs = request_arrays(request, self.model.input_specs)
        except ProtocolError as exc:
            self.count("INVALID_ARGUMENT", None, arrived)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        try:
            outputs, timing = await self.infer(inputs)
        except Exception as exc:
            self.count("INTERNAL", None, arrived)
            await context.abort(grpc.StatusCode.INTERNAL, f"inference failed: {exc}")
        answer = infer_response(self.name, self.version, request.id, outputs)
        self.count("OK", timing, arrived)
        return answer

    def _unknown(self, name: str) -> str:
        return f"model {name!r} is not served here; this server serves {self.name!r}"


async def start_grpc_server(service: InferenceService, host: str, port: int, reuse_port: bool) -> grpc.aio.Server:
    """Listening on host:port. grpcio sets SO_REUSEPORT unless told not to, and a server left over on the port
    would then silently take half the connections: only the processes of --workers (or replicas started with
    --reuse-port) share it; any other clash fails the start."""
    options = [("grpc.max_receive_message_length", 64 << 20), ("grpc.so_reuseport", 1 if reuse_port else 0)]
    server = grpc.aio.server(options=options)
    services.add_GRPCInferenceServiceServicer_to_server(service, server)
    try:
        server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # grpcio's way of saying the bind failed
        raise OSError(f"cannot listen for gRPC on {host}:{port}: is the port taken? ({exc})") from None
    await server.start()
    return server
