"""A failed request as a value, made where the failure is seen (pure): the kind it is counted under, whether
the target answered at all, and the server's (or the connection's) own words. What a failure is on every
protocol is docs/fault-model.md; the stopping rule reads `answered`, never the kind's text, so a new kind of
failure can never make a server that answers look down."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import gevent


@dataclass(frozen=True)
class Fault:
    kind: str
    """What reports count it under: "HTTP 503", "timeout", "ConnectionRefusedError", "stream cut short"."""
    answered: bool
    """The target answered something (a status, part of a stream, an error in its own words), or took the
    request and ran out of time: it is up. False: refused or lost before any answer."""
    message: str | None = None

    @property
    def words(self) -> str:
        """The kind and its words on one line, as a warning says them: the kind once (a message that starts
        with it is not prefixed again), and no colon before words that are not there."""
        message = " ".join((self.message or "").split())
        if message.startswith(self.kind):
            return message
        return f"{self.kind}: {message}" if message else self.kind

    @classmethod
    def of(cls, exc: BaseException) -> Fault:
        """A request that raised before any answer: a timeout is an answer of a kind (the target took the
        request), anything else (refused, reset, unreachable) is none."""
        kind = kind_of(exc)
        return cls(kind, answered=kind == "timeout", message=str(exc))


def kind_of(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | socket.timeout | gevent.Timeout):
        return "timeout"
    return type(exc).__name__
