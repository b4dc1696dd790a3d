"""A failed request as a value, made where the failure is seen (pure): its kind, a type of one of four families
(transport, HTTP status, gRPC status, stream), which says whether the target answered at all, and the server's
(or the connection's) own words. The kind's name is what reports count it under; nothing reads a kind's name
back to decide anything. What each kind is, on every protocol, is a row of docs/fault-model.md
(tests/loadgen/test_fault_kinds.py ties them); the stopping rule reads `answered`, so a new kind of failure can
never make a server that answers look down."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from enum import StrEnum

import gevent


class Family(StrEnum):
    TRANSPORT = "transport"
    """The connection: refused, reset, lost, or the request's own deadline passed."""
    HTTP_STATUS = "HTTP status"
    """The server answered a status of 400 or above."""
    GRPC_STATUS = "gRPC status"
    """The server answered a gRPC status other than OK."""
    STREAM = "stream"
    """The server answered, and the answer is not a whole generation."""


@dataclass(frozen=True)
class FaultKind:
    family: Family
    name: str
    """What reports count it under: "HTTP 503", "timeout", "ConnectionRefusedError", "stream cut short"."""
    answered: bool
    """The target answered something (a status, part of a stream, an error in its own words), or took the
    request and ran out of time: it is up. False: refused or lost before any answer."""

    def __str__(self) -> str:
        return self.name


class Stream(StrEnum):
    """The stream family's kinds: an answer that came, and is not a whole generation."""

    MALFORMED_SSE = "malformed SSE"
    ERROR_EVENT = "error event mid-stream"
    PROTOCOL_MISMATCH = "protocol mismatch"
    CUT_SHORT_MID_EVENT = "stream cut short mid-event"
    CUT_SHORT = "stream cut short"
    NOT_STREAMED = "not streamed"
    NO_TOKENS = "no tokens generated"
    NOT_JSON = "the answer is not JSON"
    NOT_JSON_OBJECT = "the answer is not a JSON object"
    ERROR_ANSWER = "error answer"

    @property
    def kind(self) -> FaultKind:
        return FaultKind(Family.STREAM, self.value, answered=True)


TIMEOUT = FaultKind(Family.TRANSPORT, "timeout", answered=True)
"""The request's whole time ran out: the target took it, so it is up (slow, not down)."""
NO_CONNECTION = FaultKind(Family.TRANSPORT, "gRPC UNAVAILABLE (no connection)", answered=False)
"""gRPC's own transport saying no server answered: the connection could not be made, or broke."""


def http_status(status: int) -> FaultKind:
    return FaultKind(Family.HTTP_STATUS, f"HTTP {status}", answered=True)


def grpc_status(code_name: str) -> FaultKind:
    """A status the server sent itself (an UNAVAILABLE in its own words is an answer: "overloaded")."""
    return FaultKind(Family.GRPC_STATUS, f"gRPC {code_name}", answered=True)


def transport(exc: BaseException, after_answer: bool = False) -> FaultKind:
    """A request that raised: a timeout is an answer of a kind (the target took the request); anything else
    (refused, reset, unreachable) is none, unless the answer had begun (`after_answer`: a stream reset after
    its status line)."""
    if isinstance(exc, TimeoutError | socket.timeout | gevent.Timeout):
        return TIMEOUT
    return FaultKind(Family.TRANSPORT, type(exc).__name__, answered=after_answer)


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    message: str | None = None

    @property
    def answered(self) -> bool:
        return self.kind.answered

    @property
    def words(self) -> str:
        """The kind and its words on one line, as a warning says them: the kind once (a message that starts
        with it is not prefixed again), and no colon before words that are not there."""
        message = " ".join((self.message or "").split())
        if message.startswith(self.kind.name):
            return message
        return f"{self.kind}: {message}" if message else self.kind.name

    @classmethod
    def of(cls, exc: BaseException, after_answer: bool = False) -> Fault:
        return cls(transport(exc, after_answer), str(exc))

    @classmethod
    def stream(cls, kind: Stream, words: str | None = None) -> Fault:
        """A stream's problem, its message as the results keep it: the kind, then the server's or the parser's
        words ("error event mid-stream: engine dead")."""
        return cls(kind.kind, f"{kind.value}: {words}" if words else kind.value)
