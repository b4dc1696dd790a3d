"""A TCP proxy in front of the test API server that can turn into an API server answering 503.

Passing, it copies bytes both ways (TLS and client certificates end to end, watches streaming). Failing, it
ends the connections it holds and answers every new one itself: TLS with the API server's own serving
certificate (so clients trust it), then `503 Service Unavailable` with a Status body and `Retry-After: 1`, as
kube-apiserver does while it starts or as a load balancer does with no healthy backend.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kaliper.netutil import free_port

STATUS_503 = json.dumps(
    {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "the server is currently unable to handle the request",
        "reason": "ServiceUnavailable",
        "code": 503,
    }
).encode()


class FailingProxy:
    def __init__(self, upstream_port: int, cert: Path, key: Path) -> None:
        self.port = free_port()
        self.upstream_port = upstream_port
        self.failing = False
        self.answered_503 = 0
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(str(cert), str(key))
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()

    def fail(self, failing: bool) -> None:
        """Answer 503 from now on (the connections held are ended), or pass again."""

        def switch() -> None:
            self.failing = failing
            for writer in list(self._writers):
                writer.close()

        self._loop.call_soon_threadsafe(switch)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            if self.failing:
                await self._answer_503(reader, writer)
            else:
                await self._pass(reader, writer)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _answer_503(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await writer.start_tls(self._tls)  # the reader reads the decrypted stream from here on
        await reader.readuntil(b"\r\n\r\n")
        head = (
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            f"Content-Length: {len(STATUS_503)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + STATUS_503)
        await writer.drain()
        self.answered_503 += 1

    async def _pass(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers.add(up_writer)

        async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            finally:
                sink.close()

        try:
            await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer), return_exceptions=True)
        finally:
            self._writers.discard(up_writer)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", self.port))
        started.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())

    @contextmanager
    def running(self) -> Iterator[FailingProxy]:
        started = threading.Event()
        thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        thread.start()
        assert started.wait(10)
        try:
            yield self
        finally:
            self.fail(False)
            self._loop.call_soon_threadsafe(self._loop.stop)
            thread.join(10)
