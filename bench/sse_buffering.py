"""SSE buffering: is the stream parser linear in an event's size?

One `data:` event of N MB (a chat chunk whose content is N MB of text) is fed to kaliper.loadgen.sse's
StreamParser in 64 KiB pieces, as the streaming client delivers a socket's reads, for N = 1 and N = 30. A
linear parser takes 30x as long for the larger event; one that re-joins and re-scans its whole buffer on
every piece (the parser before issue 38) takes about 900x, seconds of the generator's only event loop.

    .venv/bin/python bench/sse_buffering.py [--repeat 5]

Goal: the ratio within 2x of 30 (linear), and a 30 MB event parsed in well under a second.
"""

from __future__ import annotations

import argparse
import json
import time

from kaliper.loadgen.sse import StreamParser

PIECE = 64 * 1024


def event_of(megabytes: int) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": "x" * (megabytes * 2**20)}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def parse_seconds(body: bytes) -> float:
    parser = StreamParser(chat=True)
    started = time.perf_counter()
    for start in range(0, len(body), PIECE):
        parser.feed(body[start : start + PIECE], 0.0)
    elapsed = time.perf_counter() - started
    assert len(parser.read.content_times) == 1 and parser.read.error is None
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    small, large = event_of(1), event_of(30)
    best_small = min(parse_seconds(small) for _ in range(args.repeat))
    best_large = min(parse_seconds(large) for _ in range(args.repeat))
    ratio = best_large / best_small
    print(f"1 MB event: {best_small * 1000:.1f} ms   30 MB event: {best_large * 1000:.1f} ms   ratio {ratio:.1f}")
    print(f"goal (ratio within 2x of 30, linear): {'met' if 15 <= ratio <= 60 else 'missed'}")


if __name__ == "__main__":
    main()
