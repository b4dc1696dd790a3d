"""The stream parser: Server-Sent Events of OpenAI-compatible servers in, arrival times and counts out."""

from __future__ import annotations

import json

from kaliper.loadgen.faults import Fault, Stream
from kaliper.loadgen.sse import StreamParser, read_whole


def event(payload: dict | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return f"data: {data}\n\n".encode()


def chat_chunk(content: str | None = None, role: str | None = None, finish: str | None = None, **extra) -> bytes:
    delta = {}
    if role:
        delta["role"] = role
    if content is not None or role:
        delta["content"] = content
    return event({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})


USAGE = {
    "choices": [],
    "usage": {"prompt_tokens": 19, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}},
}


def test_a_role_only_chunk_is_not_a_token_and_each_content_chunk_keeps_its_arrival() -> None:
    parser = StreamParser(chat=True)
    parser.feed(chat_chunk(role="assistant"), 1.0)
    parser.feed(chat_chunk("ka"), 1.5)
    parser.feed(chat_chunk(" li") + chat_chunk(" per"), 2.0)  # two events in one read: one arrival time
    parser.feed(chat_chunk(finish="length") + event(USAGE) + b"data: [DONE]\n\n", 2.5)
    read = parser.finish()
    assert read.content_times == [1.5, 2.0, 2.0]
    assert (read.finish_reason, read.done, read.error, read.text_chars) == ("length", True, None, 9)
    assert (read.usage.prompt_tokens, read.usage.completion_tokens, read.usage.cached_tokens) == (19, 3, 4)
    assert read.chunk_tokens is None  # the server did not count each chunk's tokens


def test_an_event_split_across_reads_counts_when_its_end_arrives() -> None:
    parser = StreamParser(chat=True)
    whole = chat_chunk("ka")
    parser.feed(whole[:10], 1.0)
    parser.feed(whole[10:-1], 1.2)
    assert parser.read.content_times == []
    parser.feed(whole[-1:], 1.4)
    assert parser.read.content_times == [1.4]


def test_a_stream_fed_one_byte_at_a_time_reads_as_the_whole() -> None:
    """Separators split across reads, and a large event arriving in many pieces."""
    body = (
        chat_chunk(role="assistant")
        + chat_chunk("x" * 200_000)
        + chat_chunk(" li")
        + chat_chunk(finish="stop")
        + b"data: [DONE]\n\n"
    )
    parser = StreamParser(chat=True, keep_text=True)
    for at, byte in enumerate(body[:2000]):
        parser.feed(bytes([byte]), float(at))
    for start in range(2000, len(body), 4096):
        parser.feed(body[start : start + 4096], 5000.0)
    read = parser.finish()
    assert (read.done, read.error, read.finish_reason, len(read.content_times)) == (True, None, "stop", 2)
    assert read.text is not None and [len(piece) for piece in read.text] == [200_000, 3]


def test_crlf_separated_events_and_comments() -> None:
    parser = StreamParser(chat=False)
    parser.feed(b": keep-alive\r\n\r\n", 0.5)
    parser.feed(b'data: {"choices":[{"text":"ka","finish_reason":null}]}\r\n\r\n', 1.0)
    parser.feed(
        b'data: {"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":1}}\r\n\r\n', 1.1
    )
    read = parser.finish()
    assert (read.content_times, read.finish_reason, read.usage.completion_tokens) == ([1.0], "length", 1)


def test_cumulative_usage_in_every_chunk_gives_each_chunks_token_count() -> None:
    parser = StreamParser(chat=True)
    parser.feed(chat_chunk("a", usage={"completion_tokens": 1}), 1.0)
    parser.feed(chat_chunk("bcd", usage={"completion_tokens": 4}), 2.0)
    parser.feed(chat_chunk("ef", usage={"completion_tokens": 6}), 3.0)
    assert parser.finish().chunk_tokens == [1, 3, 2]


def test_llama_cpp_timings_per_token_count_each_chunk_too() -> None:
    parser = StreamParser(chat=True)
    parser.feed(chat_chunk("a", timings={"predicted_n": 1}), 1.0)
    parser.feed(chat_chunk("b", timings={"predicted_n": 3}), 2.0)
    assert parser.finish().chunk_tokens == [1, 2]


def test_counts_missing_from_one_chunk_leave_no_per_chunk_counts() -> None:
    parser = StreamParser(chat=True)
    parser.feed(chat_chunk("a", usage={"completion_tokens": 1}), 1.0)
    parser.feed(chat_chunk("b"), 2.0)
    parser.feed(chat_chunk("c", usage={"completion_tokens": 3}), 3.0)
    assert parser.finish().chunk_tokens is None


def test_an_error_event_mid_stream_ends_the_read_with_the_servers_message() -> None:
    parser = StreamParser(chat=True)
    parser.feed(chat_chunk("a"), 1.0)
    parser.feed(event({"error": {"message": "slot unavailable", "type": "server_error"}}), 2.0)
    parser.feed(chat_chunk("b"), 3.0)
    read = parser.finish()
    assert read.error == Fault(Stream.ERROR_EVENT.kind, "error event mid-stream: slot unavailable")
    assert read.content_times == [1.0]


def test_an_error_object_in_vllms_older_shape_is_an_error_and_error_null_is_not() -> None:
    died = StreamParser(chat=True)
    died.feed(event({"object": "error", "message": "engine dead", "type": "InternalServerError", "code": 500}), 1.0)
    died.feed(event("[DONE]"), 1.1)
    assert died.finish().error == Fault(Stream.ERROR_EVENT.kind, "error event mid-stream: engine dead")
    fine = StreamParser(chat=True)
    fine.feed(chat_chunk("a", error=None), 1.0)
    fine.feed(event("[DONE]"), 1.1)
    read = fine.finish()
    assert (read.error, read.content_times, read.done) == (None, [1.0], True)


def test_events_after_done_are_ignored_and_counted() -> None:
    parser = StreamParser(chat=True)
    for arrived, piece in ((1.0, chat_chunk("a")), (1.1, event("[DONE]")), (1.2, chat_chunk("b")), (1.3, USAGE)):
        parser.feed(piece if isinstance(piece, bytes) else event(piece), arrived)
    read = parser.finish()
    assert (read.content_times, read.events_after_done, read.usage) == ([1.0], 2, None)


def test_the_other_apis_shape_is_a_protocol_mismatch() -> None:
    completions = StreamParser(chat=False)
    completions.feed(chat_chunk("a"), 1.0)
    assert completions.finish().error == Fault(
        Stream.PROTOCOL_MISMATCH.kind,
        "protocol mismatch: a chat-shaped answer (choices[].delta) to a completions request; set request.protocol "
        "openai-chat",
    )
    chat = StreamParser(chat=True)
    chat.feed(event({"choices": [{"index": 0, "text": "a", "finish_reason": None}]}), 1.0)
    assert chat.finish().error == Fault(
        Stream.PROTOCOL_MISMATCH.kind,
        "protocol mismatch: a completions-shaped answer (choices[].text) to a chat request; set request.protocol "
        "openai-completions",
    )


def test_malformed_events_are_named() -> None:
    parser = StreamParser(chat=True)
    parser.feed(b"data: {not json\n\n", 1.0)
    assert parser.finish().error == Fault(
        Stream.MALFORMED_SSE.kind, "malformed SSE: an event whose data is not JSON: b'{not json'"
    )
    parser = StreamParser(chat=True)
    parser.feed(b"garbage line\n\n", 1.0)
    assert parser.finish().error == Fault(
        Stream.MALFORMED_SSE.kind, "malformed SSE: a line that is not a field: b'garbage line'"
    )


def test_a_stream_cut_inside_an_event_says_so() -> None:
    parser = StreamParser(chat=True)
    parser.feed(chat_chunk("a") + b'data: {"choices":[{"delta":{"content":"b', 1.0)
    read = parser.finish()
    assert (read.content_times, read.error) == (
        [1.0],
        Fault(Stream.CUT_SHORT_MID_EVENT.kind, "stream cut short mid-event"),
    )


def test_kept_text_is_what_the_chunks_carried() -> None:
    parser = StreamParser(chat=True, keep_text=True)
    parser.feed(chat_chunk("ka") + chat_chunk(" li"), 1.0)
    assert parser.finish().text == ["ka", " li"]


def test_a_whole_answer_is_one_arrival() -> None:
    body = json.dumps(
        {
            "choices": [{"message": {"role": "assistant", "content": "ka li"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2},
        }
    ).encode()
    read = read_whole(body, chat=True, arrived=7.0)
    assert (read.content_times, read.done, read.usage.completion_tokens, read.error) == ([7.0], True, 2, None)
    assert read_whole(b"<html>", chat=True, arrived=1.0).error == Fault(
        Stream.NOT_JSON.kind, "the answer is not JSON: b'<html>'"
    )


def test_crlf_events_fed_one_byte_at_a_time() -> None:
    body = b'data: {"choices":[{"text":"ka","finish_reason":"length"}]}\r\n\r\ndata: [DONE]\r\n\r\n'
    parser = StreamParser(chat=False)
    for at, byte in enumerate(body):
        parser.feed(bytes([byte]), float(at))
    read = parser.finish()
    # The content event ended with its separator's last byte, the 62nd (index 61).
    assert (read.content_times, read.done, read.error) == ([61.0], True, None)


def thinking_chunk(text: str, field: str = "reasoning", **more: str) -> bytes:
    return event({"choices": [{"index": 0, "delta": {field: text, **more}, "finish_reason": None}]})


def test_thinking_in_delta_reasoning_is_generated_output_and_the_answer_starts_after_it() -> None:
    """vLLM 0.32's stream with --reasoning-parser (captured here): the thinking in delta.reasoning, then
    content; <think> and </think> themselves send no chunk."""
    parser = StreamParser(chat=True, keep_text=True)
    parser.feed(chat_chunk("", role="assistant"), 1.0)
    parser.feed(thinking_chunk(" ka"), 1.1)
    parser.feed(thinking_chunk(" li"), 1.2)
    parser.feed(chat_chunk(" ti"), 1.3)
    parser.feed(chat_chunk(" ser", finish="length"), 1.4)
    usage = {"prompt_tokens": 24, "completion_tokens": 16, "completion_tokens_details": {"reasoning_tokens": 6}}
    parser.feed(event({"choices": [], "usage": usage}) + b"data: [DONE]\n\n", 1.5)
    read = parser.finish()
    assert read.content_times == [1.1, 1.2, 1.3, 1.4]
    assert read.reasoning_chunks == [True, True, False, False]
    assert read.first_answer == 2
    assert (read.text, read.reasoning_text) == ([" ti", " ser"], [" ka", " li"])
    assert (read.usage.completion_tokens, read.usage.reasoning_tokens) == (16, 6)


def test_reasoning_content_counts_the_same_and_a_chunk_carrying_both_names_is_read_once() -> None:
    parser = StreamParser(chat=True, keep_text=True)
    parser.feed(thinking_chunk(" ka", "reasoning_content"), 1.0)
    parser.feed(thinking_chunk(" li", "reasoning", reasoning_content=" li"), 1.1)  # both, one text
    parser.feed(thinking_chunk(" mo", "reasoning", content=" ti"), 1.2)  # the turn: thinking and answer at once
    read = parser.finish()
    assert read.reasoning_text == [" ka", " li", " mo"]
    assert read.text == [" ti"]
    assert read.reasoning_chunks == [True, True, False]
    assert (read.first_answer, read.text_chars) == (2, 12)


def test_a_stream_that_only_thinks_has_no_first_answer_and_one_that_never_thinks_answers_first() -> None:
    thinking = StreamParser(chat=True)
    thinking.feed(thinking_chunk(" ka") + thinking_chunk(" li"), 1.0)
    assert thinking.finish().first_answer is None
    plain = StreamParser(chat=True)
    plain.feed(chat_chunk("ka") + chat_chunk(" li"), 1.0)
    assert (plain.finish().reasoning_chunks, plain.read.first_answer) == (None, 0)


def test_an_unstreamed_answer_with_message_reasoning() -> None:
    body = json.dumps(
        {
            "choices": [
                {"message": {"role": "assistant", "content": " ti ser", "reasoning": " ka li"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6, "completion_tokens_details": {"reasoning_tokens": 3}},
        }
    ).encode()
    read = read_whole(body, chat=True, arrived=2.0)
    assert (read.text, read.reasoning_text, read.reasoning_chunks) == ([" ti ser"], [" ka li"], None)
    assert read.usage.reasoning_tokens == 3
