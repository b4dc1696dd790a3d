"""A round-robin TCP proxy for replicas that cannot share a port (MLServer, custom servers): each new
connection goes to the next replica, as a Kubernetes Service spreads connections over its pods."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading


class RoundRobinProxy:
    def __init__(self, listen_port: int, backend_ports: list[int], host: str = "127.0.0.1") -> None:
        self.listen_port, self.backends, self.host = listen_port, backend_ports, host
        self._next = itertools.cycle(backend_ports)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kaliper-proxy", daemon=True)
        self.connections = dict.fromkeys(backend_ports, 0)

    def start(self) -> RoundRobinProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, self.host, self.listen_port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._loop.close()

    async def _handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        port = next(self._next)
        self.connections[port] += 1
        try:
            backend_reader, backend_writer = await asyncio.open_connection(self.host, port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, backend_writer), _pipe(backend_reader, client_writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(Exception):
        writer.close()
