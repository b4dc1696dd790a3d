"""The lean HTTP/1.1 client against a real TCP server that answers with hand-written responses."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from kaliper.loadgen.http import Connection, DeadlinePassed, HttpError, StreamingConnection, build_request

SEEN: Counter[bytes] = Counter()  # requests the server read, by path
PARTIAL_READ = threading.Event()  # the client has read the partial answer of /reset-mid-answer
READER_HELD = threading.Event()  # /held-reader: the client holds its reader after the first piece
SECOND_SENT = threading.Event()  # /held-reader: the server has sent the second piece
SECOND_SENDING: list[float] = []  # /held-reader: when the server began sending it (perf_counter)

RESPONSES = {
    b"/length": [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"],
    b"/chunked": [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"3\r\nabc\r\n",
        b"4;ext=1\r\ndefg\r\n",
        b"0\r\nX-Trailer: 1\r\n\r\n",
    ],
    b"/close": [b"HTTP/1.1 503 Busy\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno"],
    b"/no-content": [b"HTTP/1.1 204 No Content\r\n\r\n"],
    b"/until-close": [b"HTTP/1.0 200 OK\r\n\r\nstreamed body"],
    b"/interim": [b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"],
    b"/garbage": [b"SSH-2.0-OpenSSH\r\n\r\n"],
    b"/named": [b"HTTP/1.1 200 OK\r\nKaliper-Replica: iris-7d9f8-x2k4q\r\nContent-Length: 2\r\n\r\nok"],
}


class Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        buffer = b""
        served = 0
        while True:
            while b"\r\n\r\n" not in buffer:
                data = self.request.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            path = head.split(b" ")[1]
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            while len(buffer) < length:
                if not (data := self.request.recv(65536)):
                    return  # closed mid-body: reading on would spin on b"" in this process
                buffer += data
            buffer = buffer[length:]
            SEEN[path] += 1
            if path == b"/slow":
                threading.Event().wait(2)
            if path == b"/trickle":  # a byte every 0.1 s of a 40-byte body: each read is quick, the whole is not
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n")
                for _ in range(40):
                    time.sleep(0.1)
                    self.request.sendall(b"x")
                continue
            if path == b"/held-reader":  # a piece, then (while the client holds its reader) another
                self.request.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
                READER_HELD.wait(5)
                SECOND_SENDING.append(time.perf_counter())
                self.request.sendall(b"6\r\nsecond\r\n0\r\n\r\n")
                SECOND_SENT.set()
                continue
            if path == b"/reset-mid-answer":  # part of an answer, then, once it was read, a reset (RST, not FIN)
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
                PARTIAL_READ.wait(5)
                self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.request.close()
                return
            for part in RESPONSES.get(path, RESPONSES[b"/length"]):
                self.request.sendall(part)
            served += 1
            if path in (b"/close", b"/until-close", b"/garbage") or (path == b"/idle-close" and served == 1):
                return  # close the connection (after one answer for /idle-close: a kept-alive one going idle)


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    socketserver.ThreadingTCPServer.allow_reuse_address = True
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def request(port: int, path: str) -> bytes:
    return build_request("POST", f"127.0.0.1:{port}", path, {}, b"{}")


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/length", 200),
        ("/chunked", 200),
        ("/close", 503),
        ("/no-content", 204),
        ("/until-close", 200),
        ("/interim", 201),
    ],
)
def test_status_and_keep_alive(server: int, path: str, status: int) -> None:
    connection = Connection("127.0.0.1", server, timeout=5)
    assert connection.request(request(server, path)) == status
    # The next request on the same object works whether the connection was kept or closed.
    assert connection.request(request(server, "/length")) == 200
    connection.close()


def test_response_sizes_are_counted(server: int) -> None:
    connection = Connection("127.0.0.1", server, timeout=5)
    connection.request(request(server, "/length"))
    assert connection.last_response_bytes == len(RESPONSES[b"/length"][0])
    connection.request(request(server, "/chunked"))
    assert connection.last_response_bytes == sum(len(part) for part in RESPONSES[b"/chunked"])


def test_the_server_that_answered_is_read_from_its_kaliper_replica_header(server: int) -> None:
    connection = Connection("127.0.0.1", server, timeout=5)
    assert connection.request(request(server, "/named")) == 200
    assert connection.replica == "iris-7d9f8-x2k4q"
    connection.request(request(server, "/length"))
    assert connection.replica is None  # this answer names nobody
    connection.close()


def test_keep_alive_reuses_one_socket(server: int) -> None:
    connection = Connection("127.0.0.1", server, timeout=5)
    connection.request(request(server, "/chunked"))
    first = connection._sock
    for _ in range(20):
        assert connection.request(request(server, "/length")) == 200
    assert connection._sock is first and connection._buffer == b""


def test_server_closing_an_idle_connection_is_retried_once(server: int) -> None:
    connection = Connection("127.0.0.1", server, timeout=5)
    assert connection.request(request(server, "/idle-close")) == 200  # the server closes after answering
    assert connection.request(request(server, "/length")) == 200  # found closed, sent again on a new one


def test_timeout_raises(server: int) -> None:
    connection = Connection("127.0.0.1", server, timeout=0.2)
    with pytest.raises(TimeoutError):
        connection.request(request(server, "/slow"))


def test_not_http_is_an_error(server: int) -> None:
    with pytest.raises(HttpError, match=r"not an HTTP/1\.x response"):
        Connection("127.0.0.1", server, timeout=5).request(request(server, "/garbage"))


def test_refused_connection() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(ConnectionRefusedError):
            Connection("127.0.0.1", port, timeout=2).request(request(port, "/"))


def test_the_timeout_bounds_the_whole_request_not_each_read(server: int) -> None:
    # Every byte arrives 0.1 s after the last, well inside 0.5 s; the whole answer would take 4 s.
    connection = Connection("127.0.0.1", server, timeout=0.5)
    with pytest.raises(DeadlinePassed, match=r"no whole answer within the request's timeout \(0\.5 s\)"):
        connection.request(request(server, "/trickle"))


def test_a_request_whose_answer_had_begun_is_never_sent_again(server: int) -> None:
    connection = StreamingConnection("127.0.0.1", server, timeout=5)
    received: list[bytes] = []
    assert connection.stream(request(server, "/length"), lambda *_: lambda piece, _: None).status == 200
    before = SEEN[b"/reset-mid-answer"]

    # A reused connection reset after answer bytes: the request's failure, not a dead kept-alive connection.
    def sink(piece: bytes, _arrived: float) -> None:
        received.append(piece)
        PARTIAL_READ.set()

    with pytest.raises(ConnectionResetError):
        connection.stream(request(server, "/reset-mid-answer"), lambda *_: sink)
    assert (SEEN[b"/reset-mid-answer"] - before, connection.resent, received) == (1, 0, [b"partial"])


def test_the_streaming_client_reads_past_an_interim_answer(server: int) -> None:
    connection = StreamingConnection("127.0.0.1", server, timeout=5)
    heads: list[tuple[int, str]] = []
    answer = connection.stream(
        request(server, "/interim"), lambda status, kind: heads.append((status, kind)) or (lambda *_: None)
    )
    assert (answer.status, heads) == (201, [(201, "")])


def test_a_piece_is_timed_when_it_arrived_not_when_a_held_reader_read_it(server: int) -> None:
    """The second piece arrives while the reader is held (as a greenlet is by another user's work or a garbage
    collection): it is timed by its arrival (the kernel's stamp), before the reader was even released; timed
    when the read returned, it would read after."""
    pieces: list[tuple[bytes, float]] = []
    released: list[float] = []

    def sink(piece: bytes, arrived: float) -> None:
        pieces.append((piece, arrived))
        if len(pieces) == 1:
            READER_HELD.set()
            SECOND_SENT.wait(5)
            released.append(time.perf_counter())

    connection = StreamingConnection("127.0.0.1", server, timeout=5)
    assert connection.stream(request(server, "/held-reader"), lambda *_: sink).status == 200
    (first, _), (second, second_arrived) = pieces
    assert (first, second) == (b"first", b"second")
    assert SECOND_SENDING[0] <= second_arrived < released[0]
