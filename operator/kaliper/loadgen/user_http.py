"""Requests over HTTP/1.1 (the Open Inference Protocol's REST API, or any HTTP JSON API): one keep-alive
connection per user, each request serialised once per process, as wrk does (kaliper.loadgen.http)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import gevent

from kaliper.loadgen.faults import Fault, http_status
from kaliper.loadgen.generator import Generator
from kaliper.loadgen.http import BodySink, Connection, StreamingConnection
from kaliper.loadgen.pacing import KaliperUser
from kaliper.loadgen.payloads import build_bodies
from kaliper.loadgen.preflight import Preflight
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


FIRST_WORDS = 300  # bytes of the first answer kept to say what the server said


def first_request_check(generator: Generator, raw: bytes) -> Preflight:
    """Send one request, within the request's deadline. A path the server does not have (404, 405) is refused
    before the load, naming the URL called and what the server said; any other failing or slow answer only
    warns (the run measures exactly that)."""
    url = generator.config.target
    connection = StreamingConnection(generator.host, generator.port, generator.timeout_s, generator.ssl)
    said = bytearray()

    def keep_first_words(status: int, content_type: str) -> BodySink:
        return lambda piece, _arrived: said.extend(piece[: max(0, FIRST_WORDS - len(said))])

    try:
        status = connection.stream(raw, keep_first_words).status
    except Exception as exc:
        return _warned(Fault.of(exc), url)
    finally:
        connection.close()
    words = said.decode("utf-8", errors="replace").strip()
    if status in (404, 405):
        return Preflight(path_refusal(generator, status, words))
    if status >= 400:
        return _warned(Fault(http_status(status), words), url)
    return Preflight()


def _warned(fault: Fault, url: str) -> Preflight:
    """A first request that failed in a way the run measures: logged, and the results' first warning."""
    warning = f"the first request failed: {fault.words}"
    log.warning(warning, url=url)
    return Preflight(warning=warning)


def path_refusal(generator: Generator, status: int, words: str) -> str:
    """Why a first answer of 404 or 405 stops the run before the load: the URL called, the server's words."""
    said = f": {words.strip()}" if words.strip() else ""
    return f"{generator.config.target} answered HTTP {status} to the first request{said}; {path_hint(generator)}"


def path_hint(generator: Generator) -> str:
    config = generator.config
    base_path = urlsplit(config.url).path.rstrip("/")
    if base_path and config.path.startswith(base_path + "/"):
        return (
            f"url ends in {base_path} and the request path {config.path} starts with it again: give url without "
            f"{base_path} (such as {config.url.rstrip('/')[: -len(base_path)]})"
        )
    return "the server has no such path: check url and request.path (or request.protocol, which sets the path)"


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
        fault: Fault | None = None
        resent_before = self.connection.resent
        try:
            status = self.connection.request(raw)
            received = self.connection.last_response_bytes
            if status >= 400:
                fault = Fault(http_status(status), self.connection.error_words)
        except gevent.GreenletExit:
            raise
        except Exception as exc:  # every failure is counted, with its kind and its words
            fault, received = Fault.of(exc), 0
        resent = self.connection.resent - resent_before
        self.generator.recorder.record_send(
            slot,
            claimed,
            start,
            time.perf_counter(),
            fault,
            len(raw),
            received,
            resent,
            replica=self.connection.replica,
        )
        self.retry_after_s = self.connection.retry_after_s if fault else None
        return fault is not None

    def close(self) -> None:
        self.connection.close()
