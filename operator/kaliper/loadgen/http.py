"""A lean HTTP/1.1 keep-alive client for one connection, built for sending the same few requests fast.

Why not geventhttpclient's HTTPClient (Locust FastHttpUser's client)? It builds and merges headers on every
request; measured on this project's machine it costs about 33 µs per request on one core, which alone caps
a generator at 0.16x wrk. Requests here are serialised once, up front (as wrk does), and responses are parsed
with a few `bytes.find` calls: status line, Content-Length or chunked body, keep-alive or close.
"""

from __future__ import annotations

import select
import socket
import ssl as ssl_module
import struct
import sys
import time
from collections.abc import Callable
from typing import TypeVar

from kaliper.loadgen.backoff import parse_retry_after

_CRLF = b"\r\n"
_T = TypeVar("_T")
_HEADER_END = b"\r\n\r\n"
ERROR_WORDS = 300  # bytes kept of a failing answer's body
# Linux stamps every TCP segment with the time it arrived, and with SO_TIMESTAMPNS a read hands over the stamp
# of its last segment. Pieces of an answer are timed by that stamp rather than by the clock when the read
# returned: whatever held this greenlet between the two (another user's parsing, a garbage collection) is left
# out. Without it about 1% of first tokens read 2-3 ms late. A TLS socket cannot read with its stamps
# (recvmsg), so it is timed when the read returns.
# Python 3.11 lacks the name; 35 is Linux's (asm-generic, x86 and arm), whose stamp on a 64-bit machine is a
# struct timespec of two 64-bit fields.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
_STAMP = struct.Struct("@qq")  # seconds, nanoseconds
if struct.calcsize("P") != 8:
    SO_TIMESTAMPNS = None
_ANCILLARY_BYTES = socket.CMSG_SPACE(_STAMP.size) if hasattr(socket, "CMSG_SPACE") else 0


class HttpError(Exception):
    """A response that is not HTTP/1.x, or a connection closed mid-response."""


class ClosedBeforeResponse(HttpError):
    """The server closed the connection before answering (an idle keep-alive connection, usually)."""


class DeadlinePassed(TimeoutError):
    """The request's whole time (request.timeout) ran out: a server that trickles bytes or keep-alive
    comments never makes a request last longer than that."""


def build_request(method: str, authority: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
    """The bytes of one request, ready to send again and again (`authority`: host:port, as Host says it)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {authority}"]
    lines += [f"{name}: {value}" for name, value in headers.items() if name.lower() not in ("host", "content-length")]
    if body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Connection:
    """One keep-alive connection; reconnects when the server closes it. `timeout` is each request's deadline,
    from its send to its answer's last byte (not a bound on each read)."""

    def __init__(self, host: str, port: int, timeout: float, use_tls: bool = False) -> None:
        self.host, self.port, self.timeout, self.use_tls = host, port, timeout, use_tls
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._deadline = 0.0  # perf_counter time by which the current request must be answered
        self._answer_bytes = 0  # bytes of the current exchange's answer received so far
        self.last_response_bytes = 0  # size of the last response (head and body), for network accounting
        self.error_words = ""  # the start of the last failing answer's body (status >= 400): what the server said
        self.retry_after_s: float | None = None  # the last answer's Retry-After, in seconds
        self.replica: str | None = None  # the last answer's Kaliper-Replica header: the server that answered
        self.resent = 0  # requests sent again on a new connection after a kept-alive one turned out dead
        self.arrived = 0.0  # perf_counter time the bytes of the last read arrived
        self._stamped = False  # the socket's reads carry the kernel's arrival stamps

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._stamped = False
        if SO_TIMESTAMPNS is not None and _ANCILLARY_BYTES and not self.use_tls:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self._stamped = True
            except OSError:
                pass  # timed when each read returns
        if self.use_tls:
            context = ssl_module.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl_module.CERT_NONE  # load testing a known target; no trust decision here
            sock = context.wrap_socket(sock, server_hostname=self.host.rstrip("."))  # SNI: the name, not absolute
        self._sock, self._buffer = sock, b""
        return sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock, self._buffer = None, b""

    def request(self, raw: bytes) -> int:
        """Send a prepared request and read the whole response; returns the status code."""
        return self._once_more_if_stale(lambda: self._exchange(raw))

    def _once_more_if_stale(self, exchange: Callable[[], _T]) -> _T:
        """Run `exchange` within the request's deadline; if a reused connection turns out closed by the server
        before any answer (an idle kept-alive connection), run it once more on a new connection and count it
        in `resent`. Once any byte of an answer has arrived the request is never sent again (a generation is
        not idempotent): the failure is the request's."""
        reused = self._sock is not None
        self._deadline, self._answer_bytes, self.retry_after_s = time.perf_counter() + self.timeout, 0, None
        self.replica = None
        try:
            return exchange()
        except (ConnectionResetError, BrokenPipeError, ClosedBeforeResponse):
            self.close()
            if not reused or self._answer_bytes:
                raise
            self.resent += 1
            try:
                return exchange()
            except BaseException:
                self.close()
                raise
        except BaseException:
            self.close()
            raise

    def _exchange(self, raw: bytes) -> int:
        sock = self._sock or self._connect()
        self._send(sock, raw)
        return self._read_response(sock)

    def _send(self, sock: socket.socket, raw: bytes) -> None:
        sock.settimeout(max(self._deadline - time.perf_counter(), 0.001))
        sock.sendall(raw)
        self.arrived = time.perf_counter()  # no answer arrives before its request: the earliest it can be timed

    def _recv(self, sock: socket.socket, until_close: bool = False) -> bytes:
        """The next bytes of the answer, waiting no later than the request's deadline. An empty result only
        with `until_close` (a body that runs until the server closes); else a close is an error."""
        remaining = self._deadline - time.perf_counter()
        if remaining <= 0:
            raise DeadlinePassed(f"no whole answer within the request's timeout ({self.timeout:g} s)")
        sock.settimeout(remaining)
        try:
            if self._stamped:
                data, ancillary, _, _ = sock.recvmsg(65536, _ANCILLARY_BYTES)
                self.arrived = arrival(ancillary)
            else:
                data = sock.recv(65536)
                self.arrived = time.perf_counter()
        except TimeoutError:
            raise DeadlinePassed(f"no whole answer within the request's timeout ({self.timeout:g} s)") from None
        self._answer_bytes += len(data)
        if not data and not until_close:
            if not self._buffer:
                raise ClosedBeforeResponse("connection closed by the server before it answered")
            raise HttpError("connection closed by the server mid-response")
        return data

    def _read_head(self, sock: socket.socket) -> tuple[bytes, int, int]:
        """The final answer's head (interim 1xx answers, such as 100 Continue, read past), its status, and
        where its body starts in the buffer."""
        buffer = self._buffer
        while True:
            while (end := buffer.find(_HEADER_END)) < 0:
                buffer += self._recv(sock)
                self._buffer = buffer
            head = buffer[:end]
            if not head.startswith(b"HTTP/1."):
                raise HttpError(f"not an HTTP/1.x response: {head[:40]!r}")
            status = int(head[9:12])
            if not 100 <= status < 200:
                lower = head.lower()
                self.retry_after_s = _retry_after(lower) if status >= 400 else None
                replica = _header_value(lower, REPLICA_HEADER)
                self.replica = replica.decode("latin-1") if replica else None
                return head, status, end + 4
            buffer = self._buffer = buffer[end + 4 :]

    def _read_response(self, sock: socket.socket) -> int:
        head, status, body_start = self._read_head(sock)
        buffer = self._buffer
        lower = head.lower()
        close = b"\r\nconnection: close" in lower or head.startswith(b"HTTP/1.0")
        if status in (204, 304):
            consumed = body_start
        elif b"\r\ntransfer-encoding: chunked" in lower:
            consumed = self._read_chunked(sock, buffer, body_start)
            buffer = self._buffer
        elif b"\r\ncontent-length:" in lower:
            at = lower.find(b"\r\ncontent-length:")
            line_end = lower.find(_CRLF, at + 2)
            length = int(head[at + 17 : line_end if line_end >= 0 else len(head)])
            consumed = body_start + length
            while len(buffer) < consumed:
                buffer += self._recv(sock)
                self._buffer = buffer
        else:
            # No length: the body runs until the server closes the connection.
            received = len(buffer)
            while data := self._recv(sock, until_close=True):
                received += len(data)
            self.last_response_bytes = received
            self.close()
            return status
        self._buffer = buffer[consumed:]
        self.last_response_bytes = consumed
        if status >= 400:
            body = buffer[body_start:consumed]
            if b"\r\ntransfer-encoding: chunked" in lower:
                body = body.partition(_CRLF)[2]  # past the first chunk's size line
            self.error_words = body[:ERROR_WORDS].decode("utf-8", errors="replace")
        if close:
            self.close()
        return status

    def _line_end(self, sock: socket.socket, buffer: bytes, position: int) -> tuple[bytes, int]:
        """The buffer, read on until it holds a line end at or after `position`, and where that line ends."""
        line_end = buffer.find(_CRLF, position)
        while line_end < 0:
            buffer += self._recv(sock)
            self._buffer = buffer
            line_end = buffer.find(_CRLF, position)
        return buffer, line_end

    def _read_chunked(self, sock: socket.socket, buffer: bytes, position: int) -> int:
        """Skip a chunked body starting at `position`; returns the offset just after it."""
        while True:
            buffer, line_end = self._line_end(sock, buffer, position)
            size = int(buffer[position:line_end].split(b";", 1)[0], 16)
            position = line_end + 2
            if size == 0:
                # Trailers (usually none) end with an empty line.
                while True:
                    buffer, trailer_end = self._line_end(sock, buffer, position)
                    if trailer_end == position:
                        self._buffer = buffer
                        return position + 2
                    position = trailer_end + 2
            needed = position + size + 2
            while len(buffer) < needed:
                buffer += self._recv(sock)
                self._buffer = buffer
            position = needed


BodySink = Callable[[bytes, float], None]
BodyOpener = Callable[[int, str], BodySink]
"""Called with the status and Content-Type once the head has arrived; returns where the body goes."""


class StreamedResponse:
    """The head of a response whose body went, piece by piece, to a sink."""

    __slots__ = ("content_type", "status")

    def __init__(self, status: int, content_type: str) -> None:
        self.status, self.content_type = status, content_type


class StreamingConnection(Connection):
    """A connection whose answers are read as they arrive: every piece of a body goes to a sink with the
    time it arrived (what token streams are timed by)."""

    def stream(self, raw: bytes, open_body: BodyOpener) -> StreamedResponse:
        """One request. A kept-alive connection found dead before any answer (llama.cpp's server advertises
        keep-alive on connections it has closed) is retried once on a new connection and counted in
        `resent`; the sink has then received nothing."""
        if self._sock is not None and not self.use_tls and _peer_closed(self._sock):
            # Closed by the server since its last answer (llama.cpp's server does this after every stream,
            # while advertising keep-alive): a new connection, not a failed send.
            self.close()
        return self._once_more_if_stale(lambda: self._stream_exchange(self._sock or self._connect(), raw, open_body))

    def _stream_exchange(self, sock: socket.socket, raw: bytes, open_body: BodyOpener) -> StreamedResponse:
        self._send(sock, raw)
        head, status, body_start = self._read_head(sock)
        buffer = self._buffer
        arrived = self.arrived
        lower = head.lower()
        content_type = (_header_value(lower, b"content-type") or b"").decode("latin-1")
        sink = open_body(status, content_type)
        close = b"\r\nconnection: close" in lower or head.startswith(b"HTTP/1.0")
        rest = buffer[body_start:]
        total = body_start
        if b"\r\ntransfer-encoding: chunked" in lower:
            leftover, body_bytes = self._dechunk(sock, rest, sink, arrived)
            total += body_bytes
        elif (length := _header_value(lower, b"content-length")) is not None:
            remaining = int(length)
            total += remaining
            while True:
                piece, rest = rest[:remaining], rest[remaining:]
                if piece:
                    sink(piece, arrived)
                    remaining -= len(piece)
                if remaining <= 0:
                    break
                rest = self._recv(sock)
                arrived = self.arrived
            leftover = rest
        else:  # no length: the body runs until the server closes the connection
            if rest:
                sink(rest, arrived)
            total += len(rest)
            while data := self._recv(sock, until_close=True):
                sink(data, self.arrived)
                total += len(data)
            leftover, close = b"", True
        self._buffer = leftover
        self.last_response_bytes = total
        if close:
            self.close()
        return StreamedResponse(status, content_type)

    def _dechunk(self, sock: socket.socket, buffer: bytes, sink: BodySink, arrived: float) -> tuple[bytes, int]:
        """Deliver a chunked body's data as it arrives (one chunk's data may take several reads); returns what
        follows the body and the body's size on the wire."""
        position = body_bytes = 0

        def more() -> None:
            nonlocal buffer, arrived, position
            buffer = buffer[position:] + self._recv(sock)
            position, arrived = 0, self.arrived

        while True:
            while (line_end := buffer.find(_CRLF, position)) < 0:
                more()
            size = int(buffer[position:line_end].split(b";", 1)[0], 16)
            body_bytes += line_end + 2 - position
            position = line_end + 2
            if size == 0:
                while (trailer_end := buffer.find(_CRLF, position)) < 0:
                    more()
                while trailer_end != position:  # trailers, usually none, end with an empty line
                    position = trailer_end + 2
                    while (trailer_end := buffer.find(_CRLF, position)) < 0:
                        more()
                return buffer[position + 2 :], body_bytes + 2
            remaining = size
            while remaining:
                piece = buffer[position : position + remaining]
                if piece:
                    sink(piece, arrived)
                    remaining -= len(piece)
                    position += len(piece)
                if remaining:
                    more()
            while len(buffer) < position + 2:
                more()
            position += 2
            body_bytes += size + 2


def arrival(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The perf_counter time a read's last segment arrived, from its SO_TIMESTAMPNS stamp (the wall clock); now
    when the read carried none (the end of the stream)."""
    now_ns, wall_ns = time.perf_counter_ns(), time.time_ns()
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            seconds, nanoseconds = _STAMP.unpack_from(data)
            # Both clocks read just now give the wall clock's offset; never later than now (a wall clock
            # stepped between the arrival and the read).
            return min(seconds * 1_000_000_000 + nanoseconds - (wall_ns - now_ns), now_ns) / 1e9
    return now_ns / 1e9


def _peer_closed(sock: socket.socket) -> bool:
    """An idle kept-alive connection is readable only when the server has closed it (or sent stray bytes,
    which would corrupt the next answer just as well)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


# The header a server names itself in (the pod's name: Kaliper's built-in server sends it), so that a rehearsal
# knows when each new replica first answered.
REPLICA_HEADER = b"kaliper-replica"


def _retry_after(lower_head: bytes) -> float | None:
    value = _header_value(lower_head, b"retry-after")
    return parse_retry_after(value.decode("latin-1")) if value is not None else None


def _header_value(lower_head: bytes, name: bytes) -> bytes | None:
    at = lower_head.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    line_end = lower_head.find(_CRLF, start)
    return lower_head[start : line_end if line_end >= 0 else len(lower_head)].strip()
