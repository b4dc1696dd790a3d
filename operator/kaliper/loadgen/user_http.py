"""Requests over HTTP/1.1 (the Open Inference Protocol's REST API, or any HTTP JSON API): one keep-alive
connection per user, each request serialised once per process, as wrk does (kaliper.loadgen.http)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import gevent

from kaliper.loadgen.generation import classify
from kaliper.loadgen.generator import Generator
from kaliper.loadgen.grpc_calls import Preflight
from kaliper.loadgen.http import Connection
from kaliper.loadgen.pacing import KaliperUser
from kaliper.loadgen.payloads import build_bodies
from kaliper.log import get_logger

log = get_logger("kaliper.loadgen")


@dataclass
class Requests:
    """The process's requests, ready to send, taken in turn by all its users."""

    raw: list[bytes]
    _cycle: Iterator[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cycle = itertools.cycle(range(len(self.raw)))

    def next_index(self) -> int:
        return next(self._cycle)


def first_request_check(generator: Generator, raw: bytes) -> Preflight:
    """Send one request: a slow or failing answer only warns (the run measures exactly that)."""
    connection = Connection(generator.host, generator.port, generator.timeout_s, generator.ssl)
    url = generator.config.url + generator.path
    try:
        status = connection.request(raw)
        if status >= 400:
            log.warning("the first request failed", status=status, url=url)
    except Exception as exc:
        log.warning("the first request failed", error=classify(exc), url=url)
    finally:
        connection.close()
    return Preflight()


class HttpUser(KaliperUser):
    @classmethod
    def prepare(cls, generator: Generator) -> Requests:
        bodies = build_bodies(generator.config.payload, generator.config.seed)
        return Requests([generator.http_request(body) for body in bodies])

    @classmethod
    def check(cls, generator: Generator) -> Preflight:
        return first_request_check(generator, generator.prepared.raw[0])

    def __init__(self, environment: object) -> None:
        super().__init__(environment)  # type: ignore[arg-type]
        generator = self.generator
        self.requests: Requests = generator.prepared
        self.connection = Connection(generator.host, generator.port, generator.timeout_s, generator.ssl)

    def send_one(self, slot: float | None, claimed: float | None) -> bool:
        raw = self.requests.raw[self.requests.next_index()]
        start = time.perf_counter()
        try:
            status = self.connection.request(raw)
            error, received = (None if status < 400 else f"HTTP {status}"), self.connection.last_response_bytes
        except gevent.GreenletExit:
            raise
        except Exception as exc:  # every failure is counted, with its kind
            error, received = classify(exc), 0
        self.generator.recorder.record_send(slot, claimed, start, time.perf_counter(), error, len(raw), received)
        return error is not None

    def close(self) -> None:
        self.connection.close()
