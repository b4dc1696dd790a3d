"""One request's token figures from what its stream delivered, and their exact merge across windows."""

from __future__ import annotations

import pytest

from kaliper.loadgen.faults import Fault, Stream
from kaliper.loadgen.recorder import Recorder, Window
from kaliper.loadgen.sse import StreamRead, Usage
from kaliper.loadgen.tokens import TokenWindow, request_tokens


def read(times: list[float], completion: int | None = None, chunk_tokens: list[int] | None = None) -> StreamRead:
    usage = Usage(prompt_tokens=10, completion_tokens=completion) if completion is not None else None
    return StreamRead(content_times=times, chunk_tokens=chunk_tokens, usage=usage, finish_reason="length", done=True)


def test_ttft_gaps_and_tpot_of_one_token_per_chunk() -> None:
    figures = request_tokens(read([1.2, 1.3, 1.5, 1.6], completion=4), 1.0, None, 1.7, 4, None, None)
    assert figures.ttft_s == pytest.approx(0.2)
    assert figures.gaps_s == pytest.approx([0.1, 0.2, 0.1])
    assert figures.per_token_gaps_s == pytest.approx([0.1, 0.2, 0.1])  # usage says 4 tokens in 4 chunks
    assert figures.tpot_s == pytest.approx((1.7 - 1.2) / 3)
    assert (figures.output_tokens, figures.input_tokens, figures.source, figures.complete) == (4, 10, "usage", True)
    assert figures.divided is False


def test_without_usage_the_count_made_here_is_used_and_named_by_its_source() -> None:
    counted = request_tokens(read([1.1, 1.2, 1.3]), 1.0, None, 1.3, 8, None, 5, "server tokenize")
    assert (counted.output_tokens, counted.source) == (5, "server tokenize")
    assert counted.per_token_gaps_s is None  # 5 tokens in 3 chunks, and no per-chunk counts: never split
    uncounted = request_tokens(read([1.1, 1.2, 1.3]), 1.0, None, 1.3, 8, None, None, "server tokenize")
    assert (uncounted.output_tokens, uncounted.source) == (3, "chunks")
    with_usage = request_tokens(read([1.1, 1.2, 1.3], completion=3), 1.0, None, 1.3, 8, None, 4)
    assert (with_usage.output_tokens, with_usage.source, with_usage.tokenizer_difference) == (3, "usage", 1)


def test_open_loop_ttft_is_also_taken_from_the_intended_send() -> None:
    figures = request_tokens(read([1.2], completion=1), 1.0, 0.5, 1.3, 1, None, None)
    assert figures.ttft_s == pytest.approx(0.2)
    assert figures.ttft_corrected_s == pytest.approx(0.7)
    assert figures.tpot_s is None  # one token: no time per output token


def test_multi_token_chunks_without_per_chunk_counts_have_no_per_token_gaps() -> None:
    figures = request_tokens(read([1.1, 1.3, 1.4], completion=6), 1.0, None, 1.4, 8, None, None)
    assert figures.gaps_s == pytest.approx([0.2, 0.1])
    assert figures.per_token_gaps_s is None
    assert figures.tpot_s == pytest.approx(0.3 / 5)


def test_server_counts_per_chunk_divide_each_gap_among_its_chunks_tokens_and_say_so() -> None:
    figures = request_tokens(read([1.1, 1.3, 1.4], completion=6, chunk_tokens=[1, 4, 1]), 1.0, None, 1.4, 8, None, None)
    assert figures.per_token_gaps_s == pytest.approx([0.05, 0.05, 0.05, 0.05, 0.1])
    assert figures.divided is True


def test_without_usage_the_tokenizer_counts_then_the_chunks() -> None:
    no_usage = StreamRead(content_times=[1.1, 1.2, 1.3], done=True)
    assert request_tokens(no_usage, 1.0, None, 1.3, 8, 7, 5).source == "tokenizer"
    assert request_tokens(no_usage, 1.0, None, 1.3, 8, 7, 5).output_tokens == 5
    assert request_tokens(no_usage, 1.0, None, 1.3, 8, 7, 5).input_tokens == 7  # the synthetic prompt's count
    counted = request_tokens(no_usage, 1.0, None, 1.3, 8, None, None)
    assert (counted.source, counted.output_tokens) == ("chunks", 3)


def test_usage_and_tokenizer_disagreement_and_answers_longer_than_asked() -> None:
    figures = request_tokens(read([1.1, 1.2], completion=12), 1.0, None, 1.2, 8, None, 10)
    assert (figures.tokenizer_difference, figures.over_max_tokens) == (2, True)


def test_a_stream_without_finish_or_done_is_incomplete() -> None:
    cut = StreamRead(content_times=[1.1, 1.2])
    assert request_tokens(cut, 1.0, None, 1.2, 8, None, None).complete is False


def test_windows_count_failed_answers_apart_and_merge_exactly_over_the_wire() -> None:
    recorder = Recorder(window_s=1.0, open_loop=True, tokens=True)
    recorder.begin_stage(0, start_wall=100.0)
    whole = request_tokens(read([1.1, 1.2, 1.4], completion=3), 1.0, 0.9, 1.5, 3, None, None)
    cut = request_tokens(StreamRead(content_times=[1.1, 1.3]), 1.0, 1.0, 1.3, 3, None, None)
    recorder.record(100.7, 0.5, 0.6, None, tokens=whole, good=True)  # meant for 100.1, in the stage
    recorder.record(100.3, 0.3, 0.3, Fault(Stream.CUT_SHORT.kind), tokens=cut, resent=1)
    (window,), _ = recorder.take_closed(101.0)
    merged = Window.from_wire(window.to_wire()).merge(Window.from_wire(window.to_wire()))
    tokens = merged.tokens
    assert isinstance(tokens, TokenWindow)
    # The cut streams feed no figure: only their count and the tokens they delivered.
    assert (tokens.streams, tokens.chunks, tokens.output_tokens) == (2, 6, 6)
    assert (tokens.cut_short, tokens.cut_short_tokens, tokens.good, merged.resent) == (2, 4, 2, 2)
    assert (tokens.per_token_exact, tokens.per_token_unknown) == (2, 0)
    assert dict(tokens.token_sources) == {"usage": 2}
    assert tokens.ttft.count == 2 and tokens.itl_chunk.count == 4
    # Nor does a failure feed the request latency: it has its own histogram.
    assert (merged.service.count, merged.failed.count) == (2, 2)
    # Corrected ttft: 0.2 s after the intended 0.9; from the send it was 0.1.
    assert merged.histogram("ttft").max == pytest.approx(0.2, rel=1e-3)
    assert merged.histogram("ttft", corrected=False).max == pytest.approx(0.1, rel=1e-3)
    assert merged.histogram("itl").max == pytest.approx(0.2, rel=1e-3)


def test_a_usage_the_stream_or_the_tokenizer_contradicts_is_named() -> None:
    times = [1.1, 1.2, 1.3, 1.4]
    # Usage says 0 tokens for four content chunks: the chunks count instead, and it is named.
    below = request_tokens(read(times, completion=0), 1.0, None, 1.5, 8, None, None)
    assert (below.output_tokens, below.source, below.usage_below_chunks) == (4, "chunks", True)
    # Usage 20 against the tokenizer's 10: beyond 10% and 2 tokens.
    off = request_tokens(read(times, completion=20), 1.0, None, 1.5, 32, None, 10)
    assert (off.output_tokens, off.source, off.usage_off_tokenizer, off.tokenizer_difference) == (20, "usage", True, 10)
    # Usage 11 against 10: a re-tokenized word, within the tolerance.
    near = request_tokens(read(times, completion=11), 1.0, None, 1.5, 32, None, 10)
    assert (near.usage_below_chunks, near.usage_off_tokenizer) == (False, False)
    # Usage 0 for four chunks whose text the tokenizer counts as 12: both findings, not the first alone.
    both = request_tokens(read(times, completion=0), 1.0, None, 1.5, 32, None, 12)
    assert (both.output_tokens, both.source, both.usage_below_chunks) == (4, "chunks", True)
    assert (both.usage_off_tokenizer, both.tokenizer_difference) == (True, 12)


def thinking_read(
    flags: list[bool], completion: int | None, reasoning: int | None, chunk_tokens: list[int] | None = None
) -> StreamRead:
    times = [1.0 + 0.1 * (i + 1) for i in range(len(flags))]
    usage = Usage(prompt_tokens=10, completion_tokens=completion, reasoning_tokens=reasoning)
    return StreamRead(
        content_times=times,
        reasoning_chunks=flags,
        chunk_tokens=chunk_tokens,
        usage=usage if completion is not None else None,
        finish_reason="length",
        done=True,
    )


def test_ttft_ends_at_the_first_thought_and_ttfot_at_the_first_answer() -> None:
    figures = request_tokens(thinking_read([True, True, True, False, False], 5, 3), 1.0, 0.9, 1.6, 8, None, None)
    assert figures.ttft_s == pytest.approx(0.1)
    assert figures.ttfot_s == pytest.approx(0.4)
    assert figures.ttfot_corrected_s == pytest.approx(0.5)
    assert figures.gaps_s == pytest.approx([0.1] * 4)  # the thinking's gaps are gaps between tokens too
    assert figures.tpot_s == pytest.approx((1.6 - 1.1) / 4)
    assert (figures.output_tokens, figures.reasoning_tokens, figures.reasoning_source) == (5, 3, "usage")


def test_reasoning_tokens_come_from_the_best_count_there_is() -> None:
    flags = [True, True, False]
    # A usage of 0 while thinking streamed is contradicted by the stream: per-chunk counts stand instead.
    per_chunk = request_tokens(thinking_read(flags, 5, 0, [2, 2, 1]), 1.0, None, 1.4, 8, None, None)
    assert (per_chunk.reasoning_tokens, per_chunk.reasoning_source) == (4, "usage per chunk")
    counted = request_tokens(thinking_read(flags, None, None), 1.0, None, 1.4, 8, None, 7, "tokenizer", 5)
    assert (counted.output_tokens, counted.reasoning_tokens, counted.reasoning_source) == (7, 5, "tokenizer")
    chunks = request_tokens(thinking_read(flags, 3, None), 1.0, None, 1.4, 8, None, None)
    assert (chunks.reasoning_tokens, chunks.reasoning_source) == (2, "chunks")
    plain = request_tokens(read([1.1, 1.2], completion=2), 1.0, None, 1.3, 8, None, None)
    assert (plain.ttfot_s, plain.reasoning_tokens, plain.reasoning_source) == (pytest.approx(0.1), 0, None)
    only_thinking = request_tokens(thinking_read([True, True], 2, 2), 1.0, None, 1.3, 8, None, None)
    assert (only_thinking.ttft_s, only_thinking.ttfot_s) == (pytest.approx(0.1), None)


def test_windows_hold_ttfot_and_the_reasoning_counts_and_merge_them() -> None:
    window = TokenWindow.for_load(open_loop=False)
    window.record(request_tokens(thinking_read([True, True, False], 3, 2), 1.0, None, 1.4, 8, None, None), True)
    window.record(request_tokens(read([1.1, 1.2], completion=2), 1.0, None, 1.3, 8, None, None), True)
    merged = TokenWindow.from_wire(window.to_wire()).merge(TokenWindow.from_wire(window.to_wire()))
    assert (merged.ttfot.count, merged.reasoning_requests, merged.reasoning_tokens) == (4, 2, 4)
    assert dict(merged.reasoning_sources) == {"usage": 2}
    assert merged.ttfot.max == pytest.approx(0.3, rel=1e-3)
