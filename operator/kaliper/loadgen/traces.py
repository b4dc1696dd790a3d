"""Request traces replayed on their own clock: read (the Mooncake JSON Lines shape and the Azure LLM inference
CSV shape), cut to a window, sped up, looped, and split across generator processes.

Each row's time *is* its request's intended send time, so a replayed trace is an open-loop schedule like any
other: latencies are measured from it, and sends that leave late are counted as late. Pure functions over
text, except `read_trace`, which reads the file.

Mooncake rows: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]} (with the aliases
input_tokens, output_tokens, and "delay": ms after the row before instead of a timestamp, or after the same
"session_id"'s row before); equal hash ids are equal blocks of the prompt, `blockTokens` each, which is how the
trace shows shared prefixes.

Azure rows: TIMESTAMP,ContextTokens,GeneratedTokens, the timestamp as "2023-11-16 18:15:46.6805900".

Rows that share a session_id are a conversation's turns. Replayed on the trace's clock (the default), each is
sent at its time. Replayed as conversations (load.trace.conversations), a session's first turn is sent at its
time and each later one its delay after the session's previous answer came in, by the same user, with that
history before it: its intended send time is then that answer's end plus the delay.
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from kaliper.jsonlines import json_lines
from kaliper.loadgen.payloads import PayloadError
from kaliper.loadgen.schedule import Part, Slot

TraceFormat = Literal["mooncake", "azure"]
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(PayloadError):
    """A trace that cannot be replayed; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when it is sent (seconds from the trace's first), its token counts, and the
    ids of the prompt's blocks (Mooncake's hash_ids; empty: a prompt shared with no other)."""

    at_s: float
    input_tokens: int
    output_tokens: int
    blocks: tuple[int, ...] = ()
    session: str | None = None
    """The row's session_id: rows that share one are a conversation's turns."""
    delay_s: float | None = None
    """A later turn's wait after the session's turn before (its "delay", or the gap between their times)."""


def previous_turns(requests: list[TraceRequest]) -> list[int | None]:
    """For each request (in send order), the index of its session's turn before it; None for a session's first
    turn and for a request outside any session."""
    last: dict[str, int] = {}
    previous: list[int | None] = []
    for index, request in enumerate(requests):
        previous.append(last.get(request.session) if request.session is not None else None)
        if request.session is not None:
            last[request.session] = index
    return previous


@dataclass(frozen=True)
class PlayedTrace:
    """The part of a trace that is replayed, on the replay's clock: each request's send time from the stage's
    start, and how long the replay lasts (its last send) and, when it loops, the period it repeats with."""

    requests: list[TraceRequest]
    length_s: float
    period_s: float | None
    conversations: bool = False
    """A session's later turns wait for its earlier answers (they are not on the clock: `sends` leaves them out)."""

    @functools.cached_property
    def previous(self) -> list[int | None]:
        """Each request's session turn before it (kaliper.loadgen.traces.previous_turns); None everywhere when
        the replay stays on the trace's clock."""
        return previous_turns(self.requests) if self.conversations else [None] * len(self.requests)

    @functools.cached_property
    def following(self) -> list[int | None]:
        """Each request's session turn after it, when the replay plays conversations."""
        following: list[int | None] = [None] * len(self.requests)
        for index, before in enumerate(self.previous):
            if before is not None:
                following[before] = index
        return following

    def offsets(self) -> Iterator[float]:
        """Every request's time on the trace's clock from the stage's start, looping when the replay loops
        (what the trace asks for, a conversation's later turns at the times the trace has them)."""
        for lap in itertools.count() if self.period_s else range(1):
            base = lap * (self.period_s or 0.0)
            for request in self.requests:
                yield base + request.at_s

    def sends(self) -> Iterator[tuple[float, int]]:
        """The sends on the clock, each with its place (lap x requests + index: the request it carries): every
        request, or with conversations every one but a session's later turns."""
        count = len(self.requests)
        for lap in itertools.count() if self.period_s else range(1):
            base = lap * (self.period_s or 0.0)
            for index, request in enumerate(self.requests):
                if self.previous[index] is None:
                    yield base + request.at_s, lap * count + index

    def next_turn(self, place: int) -> tuple[float, int] | None:
        """After the answer to the request at `place`: its session's next turn, as (the wait before it, its
        place); None when the session has no more turns (or the replay plays none)."""
        count = len(self.requests)
        after = self.following[place % count]
        if after is None:
            return None
        delay = self.requests[after].delay_s
        return (delay or 0.0), place - place % count + after

    def turns_from(self, place: int) -> int:
        """How many turns the session of the request at `place` has from it on (1 outside a session)."""
        index, turns = place % len(self.requests), 1
        while (after := self.following[index]) is not None:
            index, turns = after, turns + 1
        return turns

    def open_sessions_peak(self) -> int:
        """The most conversations under way at once on the trace's clock (each from its first turn to its
        last): users that each hold a connection through a conversation, beside the trace's lone requests."""
        if not self.conversations:
            return 0
        spans: dict[str, list[float]] = {}
        for request in self.requests:
            if request.session is not None:
                spans.setdefault(request.session, []).append(request.at_s)
        # A start and an end at one instant: the start first (both conversations hold their users then).
        edges = [(times[0], 1) for times in spans.values()] + [(times[-1], -1) for times in spans.values()]
        edges.sort(key=lambda edge: (edge[0], -edge[1]))
        peak = current = 0
        for _, step in edges:
            current += step
            peak = max(peak, current)
        return peak

    def sends_per_window(self, window_s: float, windows: int) -> list[int]:
        """How many sends the replay asks for in each of the first `windows` windows of the stage."""
        counts = [0] * windows
        for at in self.offsets():
            index = int(at // window_s)
            if index >= windows:
                break
            counts[index] += 1
        return counts

    def peak_per_second(self) -> int:
        """The most sends that fall in any one second of the replay (from a send on): what it must keep open."""
        times = [request.at_s for request in self.requests]
        peak, first = 0, 0
        for last, at in enumerate(times):
            while at - times[first] >= 1.0:
                first += 1
            peak = max(peak, last - first + 1)
        return peak


def _whole(value: Any, where: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 1:
        raise TraceError(f"{where}: {name} must be a whole number of tokens, 1 or more (got {value!r})")
    return int(value)


def parse_mooncake(text: str, source: str) -> list[TraceRequest]:
    rows: list[TraceRequest] = []
    clock_ms = 0.0
    sessions: dict[str, float] = {}  # session id -> its last row's time
    for where, row in json_lines(text.splitlines(), source, TraceError):
        if not isinstance(row, dict):
            raise TraceError(f"{where}: each line must be a JSON object")
        if "timestamp" not in row and "delay" not in row:
            raise TraceError(f'{where}: each row needs "timestamp" (milliseconds) or "delay" (ms after the last)')
        moment = row.get("timestamp", row.get("delay"))
        if isinstance(moment, bool) or not isinstance(moment, int | float) or moment < 0:
            raise TraceError(f"{where}: the time must be a number of milliseconds, 0 or more (got {moment!r})")
        # A delay counts from the row before it, or with a session id from that session's row before it (a
        # conversation's next turn). On the trace's clock the replay does not wait for the earlier turn's
        # answer, whose prefix the turn's hash ids already share; as conversations it waits for it.
        session = None if row.get("session_id") is None else str(row["session_id"])
        before = sessions.get(session) if session is not None else None
        clock_ms = moment if "timestamp" in row else (clock_ms if before is None else before) + moment
        delay_ms = None if before is None else (moment if "timestamp" not in row else clock_ms - before)
        if delay_ms is not None and delay_ms < 0:
            raise TraceError(
                f"{where}: the timestamp is before its session's turn before it: order a session's turns in time"
            )
        if session is not None:
            sessions[session] = clock_ms
        lengths = []
        for name, alias in (("input_length", "input_tokens"), ("output_length", "output_tokens")):
            if name not in row and alias not in row:
                raise TraceError(f'{where}: each row needs "{name}" (or "{alias}")')
            lengths.append(_whole(row.get(name, row.get(alias)), where, name))
        blocks = row.get("hash_ids", [])
        if not isinstance(blocks, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in blocks):
            raise TraceError(f'{where}: "hash_ids" must be a list of whole numbers')
        delay_s = None if delay_ms is None else delay_ms / 1000
        rows.append(TraceRequest(clock_ms / 1000, lengths[0], lengths[1], tuple(blocks), session, delay_s))
    return rows


def _azure_time_ns(value: str, where: str) -> int:
    """Nanoseconds since the epoch of "2023-11-16 18:15:46.6805900" (seven digits of the second: more than
    Python's datetime holds, and more than a float of seconds since 1970 keeps)."""
    whole, _, fraction = value.strip().partition(".")
    try:
        moment = datetime.fromisoformat(whole)
    except ValueError as exc:
        raise TraceError(f"{where}: TIMESTAMP {value!r} is not a date and time like 2023-11-16 18:15:46.68") from exc
    if fraction and not fraction.isdigit():
        raise TraceError(f"{where}: TIMESTAMP {value!r} has a fraction of a second that is not digits")
    return int(moment.timestamp()) * 10**9 + (int(fraction[:9].ljust(9, "0")) if fraction else 0)


def parse_azure(text: str, source: str) -> list[TraceRequest]:
    reader = csv.reader(io.StringIO(text))
    header = [name.strip() for name in next(reader, [])]
    missing = [name for name in AZURE_COLUMNS if name not in header]
    if missing:
        raise TraceError(f"{source}: the header must name {', '.join(AZURE_COLUMNS)}; missing {', '.join(missing)}")
    at, context, generated = (header.index(name) for name in AZURE_COLUMNS)
    rows: list[tuple[int, int, int]] = []
    for number, fields in enumerate(reader, start=2):
        if not fields:
            continue
        where = f"{source}, line {number}"
        if len(fields) < len(header):
            raise TraceError(f"{where}: {len(fields)} fields, the header names {len(header)}")
        try:
            counts = [int(fields[context]), int(fields[generated])]
        except ValueError as exc:
            raise TraceError(f"{where}: ContextTokens and GeneratedTokens must be whole numbers") from exc
        inputs, outputs = _whole(counts[0], where, "ContextTokens"), _whole(counts[1], where, "GeneratedTokens")
        rows.append((_azure_time_ns(fields[at], where), inputs, outputs))
    first = min((ns for ns, _, _ in rows), default=0)
    return [TraceRequest((ns - first) / 1e9, inputs, outputs) for ns, inputs, outputs in rows]


def parse_trace(text: str, trace_format: TraceFormat, source: str) -> list[TraceRequest]:
    """A trace's requests in send order, times from its first request (TraceError: what is wrong, where)."""
    rows = parse_mooncake(text, source) if trace_format == "mooncake" else parse_azure(text, source)
    if not rows:
        raise TraceError(f"{source}: the trace has no requests (it is empty)")
    rows.sort(key=lambda row: row.at_s)  # stable: rows of one instant keep the file's order
    first = rows[0].at_s
    return [replace(row, at_s=row.at_s - first) for row in rows]


def read_trace(path: Path, trace_format: TraceFormat) -> list[TraceRequest]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror or exc}") from exc
    return parse_trace(text, trace_format, str(path))


@dataclass(frozen=True)
class Replay:
    """How load.trace replays a trace: the window [start_s, start_s + duration_s) of its clock (default: to its
    end), `speedup` times faster, looping or not, rows as conversations or not."""

    speedup: float = 1.0
    start_s: float = 0.0
    duration_s: float | None = None
    loop: bool = False
    conversations: bool = False


def play(requests: list[TraceRequest], replay: Replay) -> PlayedTrace:
    """The requests of the replay's window of the trace's clock, their times (and a conversation's waits)
    from the window's start divided by the speedup. A looping replay repeats with the window's length (without
    a duration: the span of its requests and one mean gap more, so that its last and first requests do not
    leave together). A session cut by the window starts at its first turn inside it."""
    speedup, start_s, duration_s = replay.speedup, replay.start_s, replay.duration_s
    end_s = math.inf if duration_s is None else start_s + duration_s
    chosen = [
        replace(r, at_s=(r.at_s - start_s) / speedup, delay_s=None if r.delay_s is None else r.delay_s / speedup)
        for r in requests
        if start_s <= r.at_s < end_s
    ]
    if not chosen:
        span = f"{start_s:g} s to {'the end' if duration_s is None else f'{end_s:g} s'}"
        raise TraceError(
            f"no request of the trace falls in its window ({span}; the trace spans 0 to {requests[-1].at_s:g} s): "
            "move load.trace.start, or lengthen load.trace.duration"
        )
    if replay.conversations and all(before is None for before in previous_turns(chosen)):
        raise TraceError(
            "load.trace.conversations: no request of the replayed window follows an earlier one of its session "
            '(rows that share a "session_id"): give the trace\'s turns session ids, or set conversations to false'
        )
    length_s = chosen[-1].at_s
    period_s = None
    if replay.loop:
        if duration_s is not None:
            period_s = duration_s / speedup
        else:
            gap = length_s / (len(chosen) - 1) if len(chosen) > 1 else 1.0
            period_s = length_s + (gap or 1.0)
    return PlayedTrace(chosen, length_s, period_s, replay.conversations)


@functools.lru_cache(maxsize=4)
def played_trace(file: str, trace_format: TraceFormat, replay: Replay) -> PlayedTrace:
    """The replayed part of the trace in `file`, read once per process however often it is asked for."""
    return play(read_trace(Path(file), trace_format), replay)


def trace_send_times(played: PlayedTrace, start_wall: float, part: Part) -> Iterator[Slot]:
    """This process's part of the replay on its perf_counter clock, from the stage's wall-clock start: sends
    i, i + n, i + 2n, ... of the clock's schedule, each with its place (the request it carries). A
    conversation's later turns follow its first to whichever process sent that."""
    base = time.perf_counter() + (start_wall - time.time())
    index, count = part
    return ((base + offset, place) for offset, place in itertools.islice(played.sends(), index, None, count))
