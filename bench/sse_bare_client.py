"""The floor of the LLM fidelity benchmark: the least a client can do to time a token stream. Bare asyncio
streams, one kept-alive HTTP/1.1 connection per stream, a closed loop of POSTs to /v1/completions, the chunked
body read as it arrives and each `data:` event that carries text timed on arrival with time.time(). No
tokenizer, no histogram, no validation: what is left is the operating system, the event loop and Python.

    from sse_bare_client import run_bare
    requests = run_bare("http://127.0.0.1:18091", streams=8, seconds=30, warmup=3, max_tokens=64)
    # [(sent unix s, [content event arrived unix s, ...]), ...] of the requests sent after the warm-up
"""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import urlsplit


async def _one_stream(host: str, port: int, body: bytes, until: float, out: list, path: str) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        while time.time() < until:
            sent = time.time()
            writer.write(head + body)
            await writer.drain()
            while (await reader.readline()) not in (b"\r\n", b""):
                pass  # the status line and headers
            arrivals: list[float] = []
            pending = b""
            while True:
                size = int((await reader.readline()).strip() or b"0", 16)
                if size == 0:
                    await reader.readline()  # the chunked body's last CRLF
                    break
                data = await reader.readexactly(size + 2)
                arrived = time.time()
                pending += data[:-2]
                while b"\n\n" in pending:
                    event, pending = pending.split(b"\n\n", 1)
                    if event.startswith(b"data: {"):
                        choice = (json.loads(event[6:]).get("choices") or [{}])[0]
                        delta = choice.get("delta") or {}
                        if choice.get("text") or delta.get("content") or delta.get("reasoning"):
                            arrivals.append(arrived)
            out.append((sent, arrivals))
    finally:
        writer.close()


async def _run(base: str, streams: int, seconds: float, max_tokens: int, chat: bool) -> list:
    url = urlsplit(base)
    asked = {"messages": [{"role": "user", "content": "hello"}]} if chat else {"prompt": "hello"}
    body = json.dumps(
        {"model": "truth", **asked, "max_tokens": max_tokens, "stream": True, "ignore_eos": True}
    ).encode()
    path = "/v1/chat/completions" if chat else "/v1/completions"
    until = time.time() + seconds
    out: list = []
    await asyncio.gather(
        *(_one_stream(url.hostname or "127.0.0.1", url.port or 80, body, until, out, path) for _ in range(streams))
    )
    return out


def run_bare(base: str, streams: int, seconds: float, warmup: float, max_tokens: int, chat: bool = False) -> list:
    """Requests sent between the end of the warm-up and the end, each (sent, [arrivals]); `chat`: the chat API,
    its thinking (delta.reasoning) timed like its answer."""
    start = time.time() + warmup
    done = asyncio.run(_run(base, streams, warmup + seconds, max_tokens, chat))
    return [(sent, arrivals) for sent, arrivals in done if sent >= start and arrivals]
