"""The project's own example traces (nothing downloaded): a 30-second trace with a burst, written in both shapes
that payload.prompts.trace reads, the same requests in each. examples/llm/traces/ holds them, made by
`kaliper make-example-traces`.

The trace: Poisson arrivals at 4 requests a second, then a burst of 40 a second from 10 s to 12 s, then 4 a
second again to 30 s. Prompts of 100 to 1,500 tokens (lognormal, median about 400), answers of 16 to 64 tokens;
about half the prompts longer than 512 tokens open with the same 512-token block (a shared system prompt,
Mooncake's hash id 0), so a server's prefix cache has something to serve.
"""

from __future__ import annotations

import csv
import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kaliper.loadgen.traces import TraceRequest

BASE_RATE, BURST_RATE = 4.0, 40.0
BURST_S = (10.0, 12.0)
LENGTH_S = 30.0
BLOCK_TOKENS = 512
AZURE_START = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)


def arrivals(rng: random.Random) -> list[float]:
    """Poisson arrivals at each part's own rate: before the burst, in it, after it."""
    times: list[float] = []
    for start, end, rate in ((0.0, BURST_S[0], BASE_RATE), (*BURST_S, BURST_RATE), (BURST_S[1], LENGTH_S, BASE_RATE)):
        at = start + rng.expovariate(rate)
        while at < end:
            times.append(round(at, 3))
            at += rng.expovariate(rate)
    return times


def burst_trace(seed: int = 41) -> list[TraceRequest]:
    rng = random.Random(seed)
    requests: list[TraceRequest] = []
    next_block = 1
    for at in arrivals(rng):
        inputs = int(min(1500, max(100, rng.lognormvariate(math.log(400), 0.6))))
        outputs = rng.randint(16, 64)
        # As in Mooncake's traces, every block but a prompt's last is whole: only a prompt longer than the
        # shared block can open with it.
        shared = rng.random() < 0.5 and inputs > BLOCK_TOKENS
        own_blocks = math.ceil(inputs / BLOCK_TOKENS) - (1 if shared else 0)
        blocks = ((0,) if shared else ()) + tuple(range(next_block, next_block + own_blocks))
        next_block += own_blocks
        requests.append(TraceRequest(at, inputs, outputs, blocks))
    return requests


def write_mooncake(path: Path, requests: list[TraceRequest]) -> Path:
    rows = [
        {
            "timestamp": round(r.at_s * 1000),
            "input_length": r.input_tokens,
            "output_length": r.output_tokens,
            "hash_ids": list(r.blocks),
        }
        for r in requests
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_azure(path: Path, requests: list[TraceRequest]) -> Path:
    with path.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        for r in requests:
            moment = AZURE_START + timedelta(milliseconds=round(r.at_s * 1000))
            # Azure's own shape: seven digits of the second's fraction.
            writer.writerow([moment.strftime("%Y-%m-%d %H:%M:%S.%f") + "0", r.input_tokens, r.output_tokens])
    return path


def write_examples(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    requests = burst_trace()
    return [write_mooncake(directory / "burst.jsonl", requests), write_azure(directory / "burst.csv", requests)]
