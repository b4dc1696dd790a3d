"""Per-request token-stream figures, and the per-window record of them that merges exactly across processes.

Definitions (each figure in the report names its own):
- ttft: from the send (or, open loop, from the intended send time) until the first content chunk arrived,
  thinking included;
- ttfot (time to first output token): the same until the first chunk carrying answer, after the thinking
  (ttft itself where the model did not think);
- itl per chunk: every gap between successive content chunks, exactly as they arrived;
- itl per token: the same gaps where each chunk carried one token (the server's count equals the number of
  content chunks), or, where the server counted every chunk's tokens, each gap divided evenly among its
  chunk's k tokens (recorded k times, and counted as divided). Otherwise it is not recorded: a chunk's gap
  is never split among tokens on a guess;
- tpot: (end-to-end - ttft) / (output tokens - 1), for requests of two tokens or more;
- token counts: the server's `usage`; where it sent none, the tokenizer's count of the text (prompt
  tokens from the synthetic prompt's own count); failing both, the number of content chunks (a lower bound).
  Output tokens include the thinking's (as `usage.completion_tokens` does); reasoning tokens are counted
  apart: the server's `completion_tokens_details.reasoning_tokens` where it is at least the reasoning chunks
  (some servers send 0 while they stream thinking), else the server's per-chunk counts, else the tokenizer's
  count of the thinking's text, else the reasoning chunks.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kaliper.loadgen.sse import StreamRead
from kaliper.measure.figures import TOKEN_FIGURES, Figure
from kaliper.measure.histogram import LatencyHistogram

TOKEN_SOURCES = ("usage", "tokenizer", "chunks")
REASONING_SOURCES = ("usage", "usage per chunk", "tokenizer", "server tokenize", "chunks")


@dataclass
class RequestTokens:
    """One generation request's figures (seconds and token counts)."""

    ttft_s: float | None
    ttft_corrected_s: float | None
    ttfot_s: float | None
    ttfot_corrected_s: float | None
    gaps_s: list[float]
    per_token_gaps_s: list[float] | None
    divided: bool
    tpot_s: float | None
    input_tokens: int | None
    output_tokens: int
    source: str
    complete: bool
    over_max_tokens: bool
    tokenizer_difference: int | None = None
    """|server's count - tokenizer's count| of the output, where both exist."""
    events_after_done: int = 0
    """Events the server sent after `data: [DONE]` (ignored)."""
    usage_below_chunks: bool = False
    """The server's usage counted fewer output tokens than the content chunks it sent (each carries at least
    one): the chunks' count stands instead."""
    usage_off_tokenizer: bool = False
    """The server's usage and the tokenizer's count differ by more than USAGE_TOLERANCE."""
    cached_input_tokens: int | None = None
    """Prompt tokens the server took from its prefix cache, where its usage said."""
    reasoning_tokens: int = 0
    reasoning_source: str | None = None
    """Where reasoning_tokens came from (REASONING_SOURCES); None: the answer did not think."""

    @property
    def largest_gap_s(self) -> float:
        """The request's own inter-token latency, as an objective judges it: its largest gap."""
        return max(self.gaps_s, default=0.0)


# How far the server's usage may differ from the tokenizer's count of the same answer before it is named:
# detokenizing and re-tokenizing text need not give back the same tokens (a word split differently), rarely
# by more than a token or two.
USAGE_TOLERANCE = 0.1


def request_tokens(
    read: StreamRead,
    sent: float,
    intended: float | None,
    ended: float,
    max_tokens: int,
    prompt_tokens: int | None,
    tokenizer_count: int | None,
    count_source: str = "tokenizer",
    reasoning_count: int | None = None,
) -> RequestTokens:
    """The figures of one request from what its stream delivered (times on one perf_counter clock).
    `tokenizer_count`: the output's tokens (thinking and answer) as `count_source` counted them (the local
    tokenizer, or the server's tokenize endpoint), used where the server sent no usage; `reasoning_count`: the
    thinking's alone, counted likewise."""
    times = read.content_times
    usage = read.usage
    below_chunks = False
    if usage is not None and usage.completion_tokens is not None and usage.completion_tokens < len(times):
        output, source, below_chunks = len(times), "chunks", True  # a count the stream itself contradicts
    elif usage is not None and usage.completion_tokens is not None:
        output, source = usage.completion_tokens, "usage"
    elif tokenizer_count is not None:
        output, source = tokenizer_count, count_source
    else:
        output, source = len(times), "chunks"
    # The usage against the tokenizer, whenever both counted: also where the stream contradicts the usage (its
    # chunks then count), so that both findings are shown, not the first alone.
    reported = usage.completion_tokens if usage is not None else None
    difference = abs(reported - tokenizer_count) if reported is not None and tokenizer_count is not None else None
    off_tokenizer = difference is not None and difference > max(2, USAGE_TOLERANCE * (tokenizer_count or 0))
    input_tokens = usage.prompt_tokens if usage is not None and usage.prompt_tokens is not None else prompt_tokens
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    per_token: list[float] | None = None
    divided = False
    if len(times) < 2:
        pass  # no gap between tokens to time
    elif read.chunk_tokens is not None and len(read.chunk_tokens) == len(times):
        divided = any(k > 1 for k in read.chunk_tokens[1:])
        per_token = []
        for gap, tokens in zip(gaps, read.chunk_tokens[1:], strict=True):
            per_token.extend([gap / tokens] * tokens if tokens > 0 else [])
    elif source == "usage" and output == len(times):
        per_token = gaps
    ttft = times[0] - sent if times else None
    tpot = (ended - times[0]) / (output - 1) if times and output >= 2 else None
    first_answer = read.first_answer
    answered_at = times[first_answer] if first_answer is not None else None
    reasoning, reasoning_source = _reasoning_tokens(read, reasoning_count, count_source)
    return RequestTokens(
        ttft_s=ttft,
        ttft_corrected_s=times[0] - intended if times and intended is not None else None,
        ttfot_s=answered_at - sent if answered_at is not None else None,
        ttfot_corrected_s=answered_at - intended if answered_at is not None and intended is not None else None,
        cached_input_tokens=usage.cached_tokens if usage is not None else None,
        reasoning_tokens=reasoning,
        reasoning_source=reasoning_source,
        gaps_s=gaps,
        per_token_gaps_s=per_token,
        divided=divided,
        tpot_s=tpot,
        input_tokens=input_tokens,
        output_tokens=output,
        source=source,
        complete=read.error is None and (read.done or read.finish_reason is not None),
        over_max_tokens=output > max_tokens,
        events_after_done=read.events_after_done,
        tokenizer_difference=difference,
        usage_below_chunks=below_chunks,
        usage_off_tokenizer=off_tokenizer,
    )


def _reasoning_tokens(read: StreamRead, counted: int | None, count_source: str) -> tuple[int, str | None]:
    """The answer's reasoning tokens and where the count came from (the module's docstring gives the order)."""
    flags = read.reasoning_chunks or []
    thinking_chunks = sum(flags)
    reported = read.usage.reasoning_tokens if read.usage is not None else None
    if reported is not None and reported >= thinking_chunks and (reported > 0 or not thinking_chunks):
        return reported, ("usage" if reported else None)
    if not thinking_chunks:
        return 0, None
    if read.chunk_tokens is not None and len(read.chunk_tokens) == len(flags):
        return sum(k for k, thinking in zip(read.chunk_tokens, flags, strict=True) if thinking), "usage per chunk"
    if counted is not None:
        return counted, count_source
    return thinking_chunks, "chunks"


def _histogram_or_none(encoded: str | None) -> LatencyHistogram | None:
    return LatencyHistogram.decode(encoded) if encoded else None


@dataclass(frozen=True)
class Reached:
    """How far a request still in flight has come: its time to first token and to first answer token, where
    they came (seconds from its send, and from its intended send under open loop)."""

    ttft_s: float | None = None
    ttft_corrected_s: float | None = None
    ttfot_s: float | None = None
    ttfot_corrected_s: float | None = None


def reached_so_far(read: StreamRead, sent: float, intended: float | None) -> Reached:
    """What a stream still being read has delivered of its figures (times on one perf_counter clock)."""
    times = read.content_times
    if not times:
        return Reached()
    first_answer = read.first_answer
    answered_at = times[first_answer] if first_answer is not None and first_answer < len(times) else None
    return Reached(
        ttft_s=times[0] - sent,
        ttft_corrected_s=times[0] - intended if intended is not None else None,
        ttfot_s=answered_at - sent if answered_at is not None else None,
        ttfot_corrected_s=answered_at - intended if answered_at is not None and intended is not None else None,
    )


@dataclass
class TokenWindow:
    """The token-stream figures of one window: histograms and counts, all mergeable."""

    ttft: LatencyHistogram = field(default_factory=LatencyHistogram)
    ttft_corrected: LatencyHistogram | None = None
    ttfot: LatencyHistogram = field(default_factory=LatencyHistogram)
    ttfot_corrected: LatencyHistogram | None = None
    itl_chunk: LatencyHistogram = field(default_factory=LatencyHistogram)
    itl_token: LatencyHistogram = field(default_factory=LatencyHistogram)
    tpot: LatencyHistogram = field(default_factory=LatencyHistogram)
    streams: int = 0
    """Requests that delivered at least one content chunk."""
    chunks: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    """Output tokens of complete answers (failed answers' tokens are counted apart)."""
    token_sources: Counter[str] = field(default_factory=Counter)
    cached_reported: int = 0
    """Successful answers whose usage said how many prompt tokens came from the prefix cache."""
    cached_input_tokens: int = 0
    reasoning_requests: int = 0
    """Successful answers that thought (reasoning tokens above 0)."""
    reasoning_tokens: int = 0
    reasoning_sources: Counter[str] = field(default_factory=Counter)
    per_token_exact: int = 0
    per_token_divided: int = 0
    per_token_unknown: int = 0
    cut_short: int = 0
    cut_short_tokens: int = 0
    over_max_tokens: int = 0
    events_after_done: int = 0
    usage_below_chunks: int = 0
    usage_off_tokenizer: int = 0
    tokenizer_compared: int = 0
    tokenizer_difference: int = 0
    good: int = 0
    """Requests that met every objective (goodput)."""
    resent: int = 0
    """Requests sent again on a fresh connection after a kept-alive one was found dead before any answer."""

    @classmethod
    def for_load(cls, open_loop: bool) -> TokenWindow:
        """An empty window; under open loop it also holds the figures corrected for coordinated omission."""
        window = cls()
        for name in _CORRECTED:
            setattr(window, name, LatencyHistogram() if open_loop else None)
        return window

    def record_reached(self, reached: Reached) -> list[str]:
        """A request still in flight when its stage ended: the instants it reached (a time to first token, a
        time to first answer token) are in their distributions; returns their figures' names. It is no stream
        yet."""
        found = []
        for row in INSTANTS:
            value = getattr(reached, row.request)  # type: ignore[arg-type]
            if value is not None:
                self._record(row, value, getattr(reached, row.request_corrected))  # type: ignore[arg-type]
                found.append(row.name)
        return found

    def _record(self, row: Figure, value: float, corrected: float | None) -> None:
        getattr(self, row.window).record(value)
        if row.window_corrected is not None and (histogram := getattr(self, row.window_corrected)) is not None:
            histogram.record(corrected if corrected is not None else value)

    def record(self, figures: RequestTokens, good: bool, failed: bool = False) -> None:
        """One answer's figures, each token figure of the catalogue (kaliper.measure.figures) from the values
        its row names. A failed answer (an error of any kind: cut short, an error event, no tokens, not
        streamed) feeds no latency figure, token count or rate: it is counted apart, with the tokens it
        delivered."""
        self.over_max_tokens += figures.over_max_tokens
        self.events_after_done += figures.events_after_done
        self.usage_below_chunks += figures.usage_below_chunks
        self.usage_off_tokenizer += figures.usage_off_tokenizer
        if failed or not figures.complete:
            self.cut_short += 1
            self.cut_short_tokens += figures.output_tokens
            return
        for row in TOKEN_FIGURES:
            values = getattr(figures, row.samples)  # type: ignore[arg-type]
            if isinstance(values, list):
                record = getattr(self, row.window).record  # gaps: many per answer, the hot path
                for value in values:
                    record(value)
            elif values is not None:
                corrected = getattr(figures, row.request_corrected) if row.request_corrected else None
                self._record(row, values, corrected)
        self.streams += figures.ttft_s is not None
        if figures.cached_input_tokens is not None:
            self.cached_reported += 1
            self.cached_input_tokens += figures.cached_input_tokens
        if figures.reasoning_source is not None:
            self.reasoning_requests += figures.reasoning_tokens > 0
            self.reasoning_tokens += figures.reasoning_tokens
            self.reasoning_sources[figures.reasoning_source] += 1
        self.chunks += len(figures.gaps_s) + (1 if figures.ttft_s is not None else 0)
        if figures.per_token_gaps_s is not None:
            if figures.divided:
                self.per_token_divided += 1
            else:
                self.per_token_exact += 1
        elif figures.gaps_s:
            self.per_token_unknown += 1
        self.input_tokens += figures.input_tokens or 0
        self.output_tokens += figures.output_tokens
        self.token_sources[figures.source] += 1
        if figures.tokenizer_difference is not None:
            self.tokenizer_compared += 1
            self.tokenizer_difference += figures.tokenizer_difference
        self.good += good

    def merge(self, other: TokenWindow) -> TokenWindow:
        for name in _HISTOGRAMS:
            getattr(self, name).add(getattr(other, name))
        for name in _CORRECTED:
            if (theirs := getattr(other, name)) is not None:
                setattr(self, name, (getattr(self, name) or LatencyHistogram()).add(theirs))
        for name in WINDOW_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.token_sources.update(other.token_sources)
        self.reasoning_sources.update(other.reasoning_sources)
        return self

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {name: getattr(self, name).encode() for name in _HISTOGRAMS}
        wire |= {name: h.encode() if (h := getattr(self, name)) is not None else None for name in _CORRECTED}
        wire.update({name: getattr(self, name) for name in WINDOW_COUNTS})
        wire["token_sources"] = dict(self.token_sources)
        wire["reasoning_sources"] = dict(self.reasoning_sources)
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TokenWindow:
        window = cls(token_sources=Counter(data["token_sources"]), reasoning_sources=Counter(data["reasoning_sources"]))
        for name in _HISTOGRAMS:
            setattr(window, name, LatencyHistogram.decode(data[name]))
        for name in _CORRECTED:
            setattr(window, name, _histogram_or_none(data[name]))
        for name in WINDOW_COUNTS:
            setattr(window, name, data[name])
        return window


# Which histograms a window holds: the catalogue's token figures, as measured and, under open loop, corrected.
_HISTOGRAMS = tuple(f.window for f in TOKEN_FIGURES)
INSTANTS = tuple(f for f in TOKEN_FIGURES if f.instant)
_CORRECTED = tuple(f.window_corrected for f in TOKEN_FIGURES if f.window_corrected)
WINDOW_COUNTS = (
    "streams",
    "chunks",
    "input_tokens",
    "output_tokens",
    "cached_reported",
    "cached_input_tokens",
    "reasoning_requests",
    "reasoning_tokens",
    "per_token_exact",
    "per_token_divided",
    "per_token_unknown",
    "cut_short",
    "cut_short_tokens",
    "over_max_tokens",
    "events_after_done",
    "usage_below_chunks",
    "usage_off_tokenizer",
    "tokenizer_compared",
    "tokenizer_difference",
    "good",
    "resent",
)
