"""Traces read in both shapes, cut to a window, sped up, looped and split across processes; their prompts made
to the trace's token counts with shared blocks as shared prefixes; the project's example traces."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from kaliper.loadgen.example_traces import write_examples
from kaliper.loadgen.prompts import trace_prompts
from kaliper.loadgen.traces import Replay, TraceError, TraceRequest, parse_trace, play, trace_send_times
from kaliper.serving.tiny_llm import train_tokenizer

REPO = Path(__file__).resolve().parents[2]

MOONCAKE = """\
{"timestamp": 1000, "input_length": 700, "output_length": 20, "hash_ids": [0, 1]}
{"timestamp": 1250, "input_tokens": 300, "output_tokens": 8}

{"delay": 500, "input_length": 12, "output_length": 3, "hash_ids": [0]}
{"timestamp": 1100, "input_length": 5, "output_length": 1}
"""

AZURE = """\
TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.0000000,396,109
2023-11-16 18:15:47.1805901,879,15
"""


def test_a_mooncake_trace_is_read_in_send_order_from_its_first_request() -> None:
    rows = parse_trace(MOONCAKE, "mooncake", "t.jsonl")
    assert rows == [
        TraceRequest(0.0, 700, 20, (0, 1)),
        TraceRequest(pytest.approx(0.1), 5, 1),
        TraceRequest(0.25, 300, 8),
        TraceRequest(0.75, 12, 3, (0,)),  # a delay counts from the row before it in the file
    ]


def test_a_sessions_next_turn_is_timed_from_that_sessions_turn_before() -> None:
    """Two conversations interleaved (AIPerf's session_id and delay): each turn's delay counts from its own
    session's previous turn, not from the row before it in the file."""
    text = "\n".join(
        json.dumps(row)
        for row in (
            {"session_id": "a", "timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]},
            {"session_id": "b", "timestamp": 300, "input_length": 20, "output_length": 2, "hash_ids": [2]},
            {"session_id": "a", "delay": 1000, "input_length": 30, "output_length": 2, "hash_ids": [1, 3]},
            {"session_id": "b", "delay": 200, "input_length": 40, "output_length": 2, "hash_ids": [2, 4]},
        )
    )
    assert [(r.at_s, r.input_tokens) for r in parse_trace(text, "mooncake", "s.jsonl")] == [
        (0.0, 10),
        (0.3, 20),
        (0.5, 40),  # b's second turn 200 ms after b's first
        (1.0, 30),  # a's second turn 1 s after a's first
    ]


CONVERSATIONS = "\n".join(
    json.dumps(row)
    for row in (
        {"session_id": "a", "timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]},
        {"timestamp": 100, "input_length": 5, "output_length": 1},
        {"session_id": 7, "timestamp": 300, "input_length": 20, "output_length": 2, "hash_ids": [2]},
        {"session_id": "a", "delay": 1000, "input_length": 30, "output_length": 2, "hash_ids": [1, 3]},
        {"session_id": 7, "timestamp": 700, "input_length": 40, "output_length": 2, "hash_ids": [2, 4]},
        {"session_id": "a", "delay": 400, "input_length": 33, "output_length": 2},
    )
)


def test_a_later_turn_keeps_its_session_and_its_wait_after_the_turn_before() -> None:
    rows = parse_trace(CONVERSATIONS, "mooncake", "c.jsonl")
    assert [(r.at_s, r.session, r.delay_s) for r in rows] == [
        (0.0, "a", None),
        (0.1, None, None),
        (0.3, "7", None),
        (0.7, "7", 0.4),  # a timestamp: the gap from the session's turn before
        (1.0, "a", 1.0),  # a delay: as given
        (1.4, "a", 0.4),
    ]


def test_conversations_leave_later_turns_off_the_clock_and_chain_them_after_their_answers() -> None:
    rows = parse_trace(CONVERSATIONS, "mooncake", "c.jsonl")
    on_clock = play(rows, Replay(speedup=2))
    assert [place for _, place in on_clock.sends()] == [0, 1, 2, 3, 4, 5]
    assert on_clock.next_turn(0) is None and on_clock.open_sessions_peak() == 0

    played = play(rows, Replay(speedup=2, conversations=True))
    assert list(played.sends()) == [(0.0, 0), (0.05, 1), (0.15, 2)]  # each session's first turn, the lone row
    assert played.previous == [None, None, None, 2, 0, 4]
    # The waits are sped up like the clock; a looping replay's later laps (places past 6) keep their turns.
    assert [played.next_turn(p) for p in (0, 4, 5, 1, 2)] == [(0.5, 4), (0.2, 5), None, None, (0.2, 3)]
    assert played.next_turn(6 + 4) == (0.2, 6 + 5)
    assert [played.turns_from(p) for p in (0, 4, 5, 1, 2)] == [3, 2, 1, 1, 2]
    assert played.open_sessions_peak() == 2  # a from 0 to 0.7 s, 7 from 0.15 to 0.35 s
    # A window that cuts a session starts it at its first turn inside the window.
    assert play(rows, Replay(start_s=0.5, conversations=True)).previous == [None, None, 1]


def test_conversations_need_sessions_in_the_replayed_window() -> None:
    rows = parse_trace(CONVERSATIONS, "mooncake", "c.jsonl")
    with pytest.raises(TraceError) as error:
        play(rows, Replay(duration_s=0.6, conversations=True))  # only first turns before 0.6 s
    assert str(error.value).startswith("load.trace.conversations: no request of the replayed window follows")


def test_an_azure_trace_is_read_to_the_ten_millionth_of_a_second() -> None:
    rows = parse_trace(AZURE, "azure", "t.csv")
    assert rows == [
        TraceRequest(0.0, 374, 44),
        TraceRequest(0.5000001, 879, 15),
        TraceRequest(3.31941, 396, 109),
    ]


@pytest.mark.parametrize(
    ("text", "trace_format", "message"),
    [
        ('{"timestamp": 0, "input_length": 5}\n', "mooncake", 't.jsonl, line 1: each row needs "output_length"'),
        ('{"input_length": 5, "output_length": 1}\n', "mooncake", 't.jsonl, line 1: each row needs "timestamp"'),
        (
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": 0, '
            '"output_length": 1}\n',
            "mooncake",
            "t.jsonl, line 2: input_length must be a whole number of tokens, 1 or more (got 0)",
        ),
        ("{not json\n", "mooncake", "t.jsonl, line 1: not valid JSON"),
        ("TIMESTAMP,Tokens\n", "azure", "t.jsonl: the header must name TIMESTAMP, ContextTokens, GeneratedTokens; "),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n",
            "azure",
            "t.jsonl, line 2: TIMESTAMP 'yesterday' is not a date and time like 2023-11-16 18:15:46.68",
        ),
        ("\n", "mooncake", "t.jsonl: the trace has no requests (it is empty)"),
        (
            '{"session_id": 1, "timestamp": 500, "input_length": 5, "output_length": 1}\n'
            '{"session_id": 1, "timestamp": 200, "input_length": 9, "output_length": 1}\n',
            "mooncake",
            "t.jsonl, line 2: the timestamp is before its session's turn before it: order a session's turns in time",
        ),
    ],
)
def test_a_trace_that_cannot_be_replayed_is_refused_naming_the_line(text: str, trace_format: str, message: str) -> None:
    with pytest.raises(TraceError) as error:
        parse_trace(text, trace_format, "t.jsonl")  # type: ignore[arg-type]
    assert str(error.value).startswith(message), error.value


def rows_at(*times: float) -> list[TraceRequest]:
    return [TraceRequest(t, 10, 2) for t in times]


def test_a_window_of_the_trace_sped_up_starts_at_the_windows_start() -> None:
    played = play(rows_at(0, 1, 2, 3, 4, 5, 6), Replay(speedup=2, start_s=2, duration_s=3))
    assert [r.at_s for r in played.requests] == [0.0, 0.5, 1.0]
    assert (played.length_s, played.period_s) == (1.0, None)
    assert list(played.offsets()) == [0.0, 0.5, 1.0]


def test_a_looping_replay_repeats_with_the_windows_length_or_one_mean_gap_after_its_last_request() -> None:
    windowed = play(rows_at(0, 1, 2, 3), Replay(duration_s=2.5, loop=True))
    assert list(itertools.islice(windowed.offsets(), 7)) == [0.0, 1.0, 2.0, 2.5, 3.5, 4.5, 5.0]
    whole = play(rows_at(0, 1, 3), Replay(speedup=2, loop=True))
    # Spans 1.5 s over two gaps: one mean gap (0.75 s) after its last request, it starts again.
    assert list(itertools.islice(whole.offsets(), 6)) == [0.0, 0.5, 1.5, 2.25, 2.75, 3.75]


def test_a_window_without_requests_is_refused_saying_where_the_trace_lies() -> None:
    with pytest.raises(TraceError) as error:
        play(rows_at(0, 1, 2), Replay(start_s=5))
    assert str(error.value) == (
        "no request of the trace falls in its window (5 s to the end; the trace spans 0 to 2 s): move "
        "load.trace.start, or lengthen load.trace.duration"
    )


def test_the_peak_is_the_most_sends_in_any_one_second() -> None:
    assert play(rows_at(0, 0.5, 2, 2.1, 2.2, 2.9, 3.05), Replay()).peak_per_second() == 4
    assert play(rows_at(0, 0.5, 2, 2.1, 2.2, 2.9, 3.05), Replay(speedup=2)).peak_per_second() == 5  # 1 to 1.525 s


def test_processes_share_a_replay_each_sending_its_part_with_its_place_in_the_whole() -> None:
    played = play(rows_at(*(i * 0.1 for i in range(10))), Replay())
    start_wall = time.time() + 1
    parts = [list(trace_send_times(played, start_wall, (i, 3))) for i in range(3)]
    assert [[place for _, place in part] for part in parts] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    whole = sorted((place, at) for part in parts for at, place in part)
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(whole)]
    assert gaps == pytest.approx([0.1] * 9, abs=1e-3)  # each process reads its own clock


@pytest.fixture(scope="module")
def tokenizer():  # -> tokenizers.Tokenizer
    return train_tokenizer(1024)


def test_trace_prompts_have_the_traces_token_counts_and_share_exactly_the_blocks_it_shares(tokenizer) -> None:  # type: ignore[no-untyped-def]
    requests = [
        TraceRequest(0, 10, 7, (5, 6, 7)),  # three blocks of 4, cut to 10 tokens
        TraceRequest(0, 6, 3, (5, 9)),  # shares block 5 (4 tokens), then a block of its own
        TraceRequest(0, 9, 2, (5,)),  # block 5, then 5 tokens of its own
        TraceRequest(0, 6, 1),
        TraceRequest(0, 6, 1),
    ]
    prompts = trace_prompts(requests, tokenizer, chat=False, block_tokens=4)
    ids = [tokenizer.encode(p.text, add_special_tokens=False).ids for p in prompts]
    assert [len(i) for i in ids] == [10, 6, 9, 6, 6]
    assert [(p.prompt_tokens, p.max_tokens) for p in prompts] == [(10, 7), (6, 3), (9, 2), (6, 1), (6, 1)]

    def shared(a: list[int], b: list[int]) -> int:
        return next((n for n, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

    assert [shared(ids[0], ids[1]), shared(ids[0], ids[2]), shared(ids[1], ids[2])] == [4, 4, 4]
    assert [shared(ids[3], ids[4]), shared(ids[0], ids[3])] == [0, 0]  # no block: no prefix shared with any
    chat = trace_prompts(requests[:1], tokenizer, chat=True, block_tokens=4)[0]
    assert chat.messages == [{"role": "user", "content": prompts[0].text}] and chat.text is None


def test_a_conversations_later_turn_asks_only_what_its_input_adds_to_the_history(tokenizer) -> None:  # type: ignore[no-untyped-def]
    requests = [
        TraceRequest(0, 10, 7, (5, 6, 7), "a"),
        TraceRequest(1, 25, 3, (5, 6, 7, 8), "a", 1.0),  # 25 - (10 + 7): 8 tokens of its own, no block
        TraceRequest(2, 20, 1, (5,), "a", 1.0),  # shorter than its history: one token
    ]
    prompts = trace_prompts(requests, tokenizer, chat=True, block_tokens=4, previous=[None, 0, 1])
    ids = [tokenizer.encode(p.messages[0]["content"], add_special_tokens=False).ids for p in prompts]
    assert [len(i) for i in ids] == [10, 8, 1]
    assert [(p.prompt_tokens, p.max_tokens) for p in prompts] == [(10, 7), (8, 3), (1, 1)]


def test_the_example_traces_are_the_ones_the_project_makes_and_agree_with_each_other(tmp_path: Path) -> None:
    made = write_examples(tmp_path)
    for path in made:
        assert path.read_text() == (REPO / "examples" / "llm" / "traces" / path.name).read_text(), path.name
    mooncake = parse_trace(made[0].read_text(), "mooncake", "burst.jsonl")
    azure = parse_trace(made[1].read_text(), "azure", "burst.csv")
    assert len(mooncake) == len(azure) == 192
    assert [r.at_s for r in azure] == pytest.approx([r.at_s for r in mooncake], abs=1e-6)
    assert [(r.input_tokens, r.output_tokens) for r in azure] == [(r.input_tokens, r.output_tokens) for r in mooncake]
    # The burst: 2 s of the 30 at ten times the rate around them.
    in_burst = sum(1 for r in mooncake if 10 <= r.at_s + first_offset(made[0]) < 12)
    assert in_burst == 77  # 80 expected at 40 a second
    assert sum(1 for r in mooncake if r.blocks[:1] == (0,)) == 34  # all of them longer than the block
    assert all(r.input_tokens > 512 for r in mooncake if r.blocks[:1] == (0,))


def first_offset(mooncake: Path) -> float:
    """The trace file's own time of its first request (parse_trace counts from it)."""
    import json

    return json.loads(mooncake.read_text().splitlines()[0])["timestamp"] / 1000
