"""streamtruth in another stack: an OpenAI-compatible streaming server of known timing written with Python's
aiohttp (chunked transfer encoding, one Server-Sent Event per token, each written as its own chunk), as many
Python servers stream. Like bench/streamtruth (Go), it draws each answer's first token after a lognormal
delay and each later token after a lognormal gap, and records when each request arrived and when it wrote
every content chunk; the records and their endpoints have the same shape, so the LLM benchmarks read either.

    .venv/bin/python bench/streamtruth_aiohttp.py --port 18092 [--ttft 60ms] [--ttft-sigma 0.3] \\
        [--gap 8ms] [--gap-sigma 0.5] [--word " tok"] [--seed 1] [--reasoning N]

POST /v1/chat/completions and /v1/completions (streamed; max_tokens tokens, 16 when absent), GET /v1/models,
GET /_truth/records, POST /_truth/reset. With --reasoning N a chat answer's first N tokens stream in
delta.reasoning, as vLLM sends a reasoning model's thinking. asyncio's timers wake up to a millisecond late:
the truth is the time each chunk was written, recorded after the write, not the time drawn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import time

from aiohttp import web


def duration(text: str) -> float:
    """Seconds from "60ms", "1.5s"."""
    return float(text[:-2]) / 1000 if text.endswith("ms") else float(text.rstrip("s"))


class Truth:
    def __init__(self, args: argparse.Namespace) -> None:
        self.ttft, self.ttft_sigma = duration(args.ttft), args.ttft_sigma
        self.gap, self.gap_sigma = duration(args.gap), args.gap_sigma
        self.word = args.word
        self.reasoning = args.reasoning
        self.rng = random.Random(args.seed)
        self.records: list[dict] = []
        self.epoch = time.time()

    def draw(self, median: float, sigma: float) -> float:
        return median * math.exp(sigma * self.rng.gauss(0, 1)) if median > 0 else 0.0

    async def serve(self, request: web.Request) -> web.StreamResponse:
        arrived = time.time_ns()
        body = await request.json()
        tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 16
        chat = request.path.endswith("/chat/completions")
        model = body.get("model", "truth")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        object_name = "chat.completion.chunk" if chat else "text_completion"

        async def send(data: str) -> None:
            await response.write(f"data: {data}\n\n".encode())

        def chunk(choice: dict) -> str:
            return json.dumps({"object": object_name, "model": model, "choices": [choice]})

        if chat:
            role = {"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}
            await send(chunk(role))
        chunks: list[int] = []
        wake = arrived / 1e9 + self.draw(self.ttft, self.ttft_sigma)
        thinking = self.reasoning if chat else 0
        for i in range(tokens):
            await asyncio.sleep(max(0.0, wake - time.time()))
            field = "reasoning" if i < thinking else "content"  # vLLM's field for the thinking
            choice = {"index": 0, "delta": {field: self.word}} if chat else {"index": 0, "text": self.word}
            await send(
                json.dumps({"object": object_name, "model": model, "choices": [{**choice, "finish_reason": None}]})
            )
            sent = time.time_ns()
            chunks.append(sent)
            wake = sent / 1e9 + self.draw(self.gap, self.gap_sigma)
        finish = {"index": 0, "delta": {}} if chat else {"index": 0, "text": ""}
        await send(
            json.dumps({"object": object_name, "model": model, "choices": [{**finish, "finish_reason": "length"}]})
        )
        usage = {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1}
        if (body.get("stream_options") or {}).get("include_usage"):
            await send(json.dumps({"object": object_name, "model": model, "choices": [], "usage": usage}))
        await send("[DONE]")
        await response.write_eof()
        self.records.append({"arrived": arrived, "chunks": chunks, "reasoning": min(thinking, tokens)})
        return response

    async def truth(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            self.records = []
            return web.Response(status=204)
        return web.json_response({"epoch": self.epoch, "records": self.records})

    async def models(self, _request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "truth", "object": "model"}]})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=18092)
    parser.add_argument("--ttft", default="60ms")
    parser.add_argument("--ttft-sigma", type=float, default=0.3)
    parser.add_argument("--gap", default="8ms")
    parser.add_argument("--gap-sigma", type=float, default=0.5)
    parser.add_argument("--word", default=" tok")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reasoning", type=int, default=0, help="chat answers think first: their first N tokens")
    args = parser.parse_args()
    truth = Truth(args)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", truth.serve)
    app.router.add_post("/v1/completions", truth.serve)
    app.router.add_get("/v1/models", truth.models)
    app.router.add_route("*", "/_truth/records", truth.truth)
    app.router.add_post("/_truth/reset", truth.truth)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
