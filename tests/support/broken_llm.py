"""A deliberately broken OpenAI-compatible server (a test double: no real server misbehaves on request).

It speaks the chat completions wire format as llama.cpp's server does (role-only first chunk, one chunk per
token, a finish chunk, then a usage chunk with empty choices, then [DONE]) and breaks it the way the
request's `model` says:
  well          no defect (the control)
  no-stream     answers application/json although stream: true was asked
  cut           three tokens, then closes the connection mid-stream
  malformed     one token, then an event whose data is not JSON
  error-mid     two tokens, then an error event, then closes
  ignore-max    four tokens more than max_tokens, counted in usage
  no-usage      every chunk carries two words and no usage is ever sent
  http-503      refuses with 503 and a JSON error
  usage-zero    four content chunks, then a usage that says completion_tokens 0
  http-429      refuses with 429, Retry-After: 1 and a JSON error
  error-object  200, then an error object in vLLM's ErrorResponse shape before it nested it under "error"
                ({"object": "error", "message", "type", "param", "code"}), then [DONE]: an engine that died
  empty         200, the role, the finish and usage of 0 tokens, then [DONE]: an answer that says nothing
  error-null    every chunk carries "error": null beside its choices, as some servers' chunks do
  after-done    the whole answer and [DONE], then three more content chunks
A completions request (no `messages`) is answered in the chat shape all the same: the protocol mismatch.
Every request's chat messages are kept, in order: GET /received returns them (chat sessions' tests).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kaliper.netutil import free_port
from tests.support.serving import serving


def _chunk(delta: dict | None = None, finish: str | None = None, **extra: object) -> bytes:
    choices = [] if delta is None and finish is None else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return b"data: " + json.dumps({"object": "chat.completion.chunk", "choices": choices, **extra}).encode() + b"\n\n"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _send_chunked(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_GET(self) -> None:
        if self.path != "/received":  # no /metrics, /tokenize or anything else
            self.send_error(404)
            return
        self._json(200, json.dumps(self.server.received).encode())  # type: ignore[attr-defined]

    def _json(self, status: int, answer: bytes, **headers: str) -> None:
        self.send_response(status)
        for name, value in {**headers, "Content-Type": "application/json"}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._json(404, b'{"detail":"Not Found"}')  # what vLLM's FastAPI app answers on a path it lacks
            return
        self.server.received.append(body.get("messages"))  # type: ignore[attr-defined]
        mode, wanted = body["model"], body["max_tokens"]
        if mode == "http-429":  # a rate limit that says when to come back
            error = {"error": {"message": "rate limit reached", "code": 429}}
            self._json(429, json.dumps(error).encode(), **{"Retry-After": "1"})
            return
        if mode == "http-503":
            self._json(503, json.dumps({"error": {"message": "overloaded", "code": 503}}).encode())
            return
        usage = {"prompt_tokens": 7, "completion_tokens": wanted}
        if mode == "no-stream":
            answer = json.dumps(
                {
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "ka " * wanted},
                            "finish_reason": "length",
                        }
                    ],
                    "usage": usage,
                }
            ).encode()
            self._json(200, answer)
            return
        self.send_response(200)
        # plain-sse: a stream served as text/plain, as some proxies and hand-written servers do
        self.send_header("Content-Type", "text/plain" if mode == "plain-sse" else "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        send = self._send_chunked
        if mode == "error-object":
            died = {"object": "error", "message": "engine dead", "type": "InternalServerError", "param": None}
            send(b"data: " + json.dumps({**died, "code": 500}).encode() + b"\n\n")
            send(b"data: [DONE]\n\n")
            send(b"")
            return
        extra = {"error": None} if mode == "error-null" else {}
        send(_chunk({"role": "assistant", "content": None}, **extra))
        tokens = {"cut": 3, "malformed": 1, "error-mid": 2, "ignore-max": wanted + 4, "empty": 0}.get(mode, wanted)
        word = " no ka" if mode == "no-usage" else " no"
        for _ in range(tokens):
            if mode == "slow":  # a stream slower than the request's timeout: 400 ms between tokens
                time.sleep(0.4)
            send(_chunk({"content": word}, **extra))
        if mode == "cut":
            self.close_connection = True
            return  # the chunked body never ends: the connection closes under it
        if mode == "malformed":
            send(b"data: {oops\n\n")
        if mode == "error-mid":
            send(b"data: " + json.dumps({"error": {"message": "out of memory"}}).encode() + b"\n\n")
            self.close_connection = True
            return
        send(_chunk({}, finish="length", **extra))
        if mode == "usage-zero":  # a usage that contradicts the 4 content chunks just sent
            send(_chunk(usage={**usage, "completion_tokens": 0}))
        elif mode != "no-usage":
            send(_chunk(usage={**usage, "completion_tokens": tokens}, **extra))
        send(b"data: [DONE]\n\n")
        if mode == "after-done":
            for _ in range(3):
                send(_chunk({"content": word}))
        send(b"")  # the last chunk of the chunked body


@contextmanager
def broken_llm_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
    server.daemon_threads = True
    server.received = []  # type: ignore[attr-defined]
    with serving(server) as url:
        yield url
