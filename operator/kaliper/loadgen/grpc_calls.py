"""Unary gRPC calls of the Open Inference Protocol (inference.GRPCInferenceService/ModelInfer) for the load
generator: HTTP/2 channels, one call, what a failed call is counted as, and the preflight.

Requests are serialised once, up front, like the HTTP client's (kaliper.loadgen.http): each call hands grpcio
the message's bytes and gets the answer's bytes back, undecoded (its size is all the figures need). The run's
calls are made with grpc.aio in a process of their own (kaliper.loadgen.grpc_process: Locust's gevent-patched
processes cannot run grpc.aio, and their blocking calls cost a thread hand-off each); the preflight's few
calls are made from the Locust process, through grpcio's gevent mode.
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc.experimental import gevent as grpc_gevent

from kaliper.api.units import parse_duration
from kaliper.loadgen.config import LoadGenConfig, request_headers
from kaliper.loadgen.faults import NO_CONNECTION, TIMEOUT, Fault, FaultKind, grpc_status
from kaliper.loadgen.payloads import PayloadError
from kaliper.loadgen.preflight import Preflight
from kaliper.serving.oip_grpc import MODEL_INFER, MODEL_METADATA, infer_request, messages
from kaliper.serving.protocol import ProtocolError

# A gRPC status that answers "this request is wrong": sending it again and again measures nothing.
REFUSALS = frozenset({"INVALID_ARGUMENT", "NOT_FOUND", "UNIMPLEMENTED", "UNAUTHENTICATED", "PERMISSION_DENIED"})
MAX_MESSAGE_BYTES = 64 << 20
# Every channel is one HTTP/2 connection of its own: grpcio pools connections between channels of equal
# settings unless told not to.
CHANNEL_OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
_gevent_ready = False


def grpc_requests(bodies: list[bytes], model_name: str) -> list[bytes]:
    """Each REST body (`{"inputs": [...]}`) as the serialised ModelInferRequest carrying the same tensors."""
    out = []
    for number, body in enumerate(bodies, start=1):
        try:
            out.append(infer_request(json.loads(body), model_name).SerializeToString())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise PayloadError(f"request body {number} is not JSON ({exc}); oip-v2-grpc sends oip-v2 bodies") from exc
        except ProtocolError as exc:
            raise PayloadError(f"request body {number}: {exc}") from exc
    return out


# What gRPC's own transport says when no server answered (the connection could not be made, or broke): a
# server's own UNAVAILABLE ("overloaded, try later") carries its words instead, and is an answer.
TRANSPORT_WORDS = (
    "failed to connect to all addresses",
    "connections to all backends failing",
    "connection refused",
    "connection reset",
    "socket closed",
    "broken pipe",
    "endpoint read failed",
    "goaway",
    "keepalive watchdog timeout",
    "http1.x server",
)


def no_connection(code: grpc.StatusCode, details: str | None) -> bool:
    """Whether a failed call's status is gRPC's transport saying no server answered, not a server's own."""
    words = (details or "").lower()
    return code == grpc.StatusCode.UNAVAILABLE and any(w in words for w in TRANSPORT_WORDS)


def fault_kind(code: grpc.StatusCode, details: str | None = None) -> FaultKind:
    """How a failed call is counted: a deadline passed is a timeout, as for HTTP; no connection is the
    transport's own kind (the target did not answer at all); the rest a status the server sent, by name."""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return TIMEOUT
    return NO_CONNECTION if no_connection(code, details) else grpc_status(code.name)


@dataclass(frozen=True)
class GrpcTarget:
    """Where the calls go and what travels with each: host, port, TLS, metadata and deadline."""

    host: str
    port: int
    tls: bool
    metadata: tuple[tuple[str, str], ...] = field(repr=False)  # may carry credentials from Secrets
    timeout_s: float

    @classmethod
    def from_headers(cls, host: str, port: int, tls: bool, headers: dict[str, str], timeout_s: float) -> GrpcTarget:
        """gRPC metadata from the request's headers (names in lower case, as HTTP/2 requires); the HTTP
        framing headers are gRPC's own business."""
        framing = {"content-type", "user-agent", "host", "content-length", "te"}
        metadata = tuple((k.lower(), v) for k, v in headers.items() if k.lower() not in framing)
        return cls(host, port, tls, metadata, timeout_s)

    @classmethod
    def for_config(cls, config: LoadGenConfig) -> GrpcTarget:
        where = config.destination
        tls = where.scheme == "https"
        headers, timeout_s = request_headers(config), parse_duration(config.request.timeout)
        return cls.from_headers(where.connect_host, where.port, tls, headers, timeout_s)

    @property
    def address(self) -> str:
        """The channel's target: the host as the socket resolves it (absolute when it was given so)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def options(self) -> list[tuple[str, Any]]:
        """The channel's options; an absolute name's authority without its trailing dot, as Host says it."""
        if not self.host.endswith("."):
            return CHANNEL_OPTIONS
        return [*CHANNEL_OPTIONS, ("grpc.default_authority", f"{self.host.rstrip('.')}:{self.port}")]

    def channel(self) -> grpc.Channel:
        """A blocking channel for the gevent-patched Locust process (the preflight's calls)."""
        global _gevent_ready
        if not _gevent_ready:
            grpc_gevent.init_gevent()  # before the first channel; once per process
            _gevent_ready = True
        if not self.tls:
            return grpc.insecure_channel(self.address, options=self.options)
        return grpc.secure_channel(self.address, self._credentials(), options=self.options)

    def aio_channel(self) -> grpc.aio.Channel:
        """A grpc.aio channel, for a process gevent has not patched (kaliper.loadgen.grpc_process)."""
        if not self.tls:
            return grpc.aio.insecure_channel(self.address, options=self.options)
        return grpc.aio.secure_channel(self.address, self._credentials(), options=self.options)

    def _credentials(self) -> grpc.ChannelCredentials:
        # Load testing a known target, as the HTTP client does without verifying: trust the certificate the
        # server presents, and check only that it names the host the URL gives.
        certificate = _server_certificate(self.host, self.port, self.timeout_s)
        return grpc.ssl_channel_credentials(root_certificates=certificate)


def _server_certificate(host: str, port: int, timeout_s: float) -> bytes:
    """The certificate the server presents, in PEM (read without verifying it: it is what gets trusted)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with (
        socket.create_connection((host, port), timeout=min(timeout_s, 10.0)) as raw,
        context.wrap_socket(raw, server_hostname=host.rstrip(".")) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    if der is None:
        raise ssl.SSLError(f"{host}:{port} presented no certificate")
    return ssl.DER_cert_to_PEM_cert(der).encode()


async def infer(
    call: Any, raw: bytes, timeout_s: float, metadata: tuple[tuple[str, str], ...]
) -> tuple[Fault | None, int]:
    """One ModelInfer call on a grpc.aio channel's method: its failure (None when it succeeded), with the
    details in the server's words, and the answer's size in bytes."""
    try:
        answer = await call(raw, timeout=timeout_s, metadata=metadata or None)
    except grpc.RpcError as exc:
        details = exc.details() if hasattr(exc, "details") else None
        return Fault(fault_kind(exc.code(), details), details), 0
    return None, len(answer)


def preflight(target: GrpcTarget, model_name: str, first_request: bytes) -> Preflight:
    """Whether a run against this target can measure anything: not when the target does not speak the
    protocol's gRPC service, does not serve the model, or refuses the first request as every later one
    would be (its shape, its datatype, its credentials). A first call that fails otherwise (MLServer answers
    a tensor its model cannot take with INTERNAL) is measured, with the server's message as a warning."""
    address = f"{'https' if target.tls else 'http'}://{target.host}:{target.port}"
    try:
        channel = target.channel()
    except (OSError, ssl.SSLError) as exc:
        return Preflight(f"{address}: no TLS connection ({exc}); does the server speak TLS only if the URL says https?")
    try:
        metadata_call = channel.unary_unary(
            MODEL_METADATA,
            request_serializer=messages.ModelMetadataRequest.SerializeToString,
            response_deserializer=messages.ModelMetadataResponse.FromString,
        )
        try:
            metadata_call(
                messages.ModelMetadataRequest(name=model_name),
                timeout=min(target.timeout_s, 10.0),
                metadata=target.metadata or None,
            )
        except grpc.RpcError as exc:
            problem = _metadata_problem(exc, address, model_name)
            if problem is not None:
                return Preflight(problem)  # else the first ModelInfer call says more
        try:
            channel.unary_unary(MODEL_INFER)(first_request, timeout=target.timeout_s, metadata=target.metadata or None)
        except grpc.RpcError as exc:
            code = exc.code().name
            if code in REFUSALS:
                return Preflight(
                    f"{address} refused the first ModelInfer call for model {model_name!r} with gRPC {code}: "
                    f"{exc.details()}; every request of the run would be refused the same way"
                )
            kind = fault_kind(exc.code(), exc.details())
            return Preflight(warning=f"the first ModelInfer call failed with {kind}: {exc.details()}")
        return Preflight()
    finally:
        channel.close()


def _metadata_problem(exc: Any, address: str, model_name: str) -> str | None:
    code = exc.code()
    if code == grpc.StatusCode.NOT_FOUND:
        return f"{address} does not serve model {model_name!r} (gRPC NOT_FOUND: {exc.details()}); set request.modelName"
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return (
            f"{address} does not serve the Open Inference Protocol's gRPC service (inference.GRPCInferenceService): "
            f"{exc.details()}; is this the server's gRPC port?"
        )
    if no_connection(code, exc.details()):
        return (
            f"{address} does not answer gRPC calls (gRPC UNAVAILABLE: {exc.details()}); is this the server's gRPC "
            "port, and does it speak TLS only if the URL says https?"
        )
    if code.name in REFUSALS:
        return f"{address} refused ModelMetadata for model {model_name!r} with gRPC {code.name}: {exc.details()}"
    return None  # a server without ModelMetadata is still measured: ModelInfer is what the run calls
