"""Reading one OpenAI-compatible response, streamed (Server-Sent Events) or not, into what a request measured.

Pure: bytes and the time they arrived go in, timings and token counts come out. This is on the generator's
hot path (every chunk of every stream passes through `feed`), so it does the least work that keeps every
figure exact: one `bytes.find` per event boundary and one `json.loads` per event.

Definitions (the report repeats them):
- a *content chunk* carries generated output: non-empty `delta.content`, `delta.tool_calls`, or a reasoning
  model's thinking (chat), or non-empty `text` (completions). The first chunk of a chat stream usually
  carries only the role; it is not a token.
- thinking is `delta.reasoning` (vLLM since it renamed the field, SGLang, Ollama's OpenAI API) or
  `delta.reasoning_content` (DeepSeek's API, llama.cpp, vLLM before); some servers send both with the same
  text, so the first non-empty one is read, never both. A *reasoning chunk* carries thinking and no answer;
- time to first token ends when the first content chunk of any kind has fully arrived, time to first output
  token when the first chunk carrying answer (content or a tool call) has;
- the inter-chunk gaps are the times between successive content chunks' arrivals;
- per-chunk token counts come only from the server (a cumulative `usage.completion_tokens` in every chunk,
  as vLLM's continuous usage stats give, or llama.cpp's `timings.predicted_n` with timings_per_token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kaliper.loadgen.faults import Fault, Stream

_DONE = b"[DONE]"


@dataclass
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    """usage.completion_tokens_details.reasoning_tokens: of completion_tokens, those spent thinking."""


@dataclass
class StreamRead:
    """What one response delivered, as the parser saw it."""

    content_times: list[float] = field(default_factory=list)
    """Arrival time of every content chunk (perf_counter seconds)."""
    reasoning_chunks: list[bool] | None = None
    """Beside content_times, once a reasoning chunk arrived: whether each chunk carried thinking only."""
    chunk_tokens: list[int] | None = None
    """Tokens each content chunk carried, where the server said so for every chunk."""
    usage: Usage | None = None
    finish_reason: str | None = None
    done: bool = False
    """`data: [DONE]` arrived."""
    error: Fault | None = None
    """Why the response is not a complete answer (an error event, malformed SSE, not a stream, the other
    API's shape): a fault of the stream family."""
    events_after_done: int = 0
    """Events that arrived after `data: [DONE]`: ignored (the stream said it was over)."""
    text_chars: int = 0
    text: list[str] | None = None
    """The answer's text (content, tool-call arguments), piece by piece, when the parser was asked to keep
    it (to count its tokens, and for a chat session's next turn)."""
    reasoning_text: list[str] | None = None
    """The thinking's text, piece by piece, kept likewise."""

    @property
    def first_answer(self) -> int | None:
        """The index of the first content chunk that carried answer, not thinking only."""
        if self.reasoning_chunks is None:
            return 0 if self.content_times else None
        return next((i for i, thinking in enumerate(self.reasoning_chunks) if not thinking), None)


class StreamParser:
    """Feed it the response body as it arrives; `finish()` says what the response delivered."""

    __slots__ = ("_counts_complete", "_cumulative", "_pending", "chat", "read")

    def __init__(self, chat: bool, keep_text: bool = False) -> None:
        self.chat = chat
        self.read = StreamRead(text=[] if keep_text else None, reasoning_text=[] if keep_text else None)
        self._pending: list[bytes] = []  # the pieces of an event not yet ended
        self._cumulative = 0
        self._counts_complete = True

    def feed(self, data: bytes, arrived: float) -> None:
        pending = self._pending
        if pending:
            # An event still open: look for its end in the new piece only (and the 3 bytes before it, where a
            # separator may begin), so that a huge event costs its size once, not once per piece.
            probe = b"".join(pending[-3:])[-3:] + data  # the last three pieces hold the last three bytes
            if b"\n\n" not in probe and b"\r\n\r\n" not in probe:
                pending.append(data)
                return
            buffer = b"".join(pending) + data
        else:
            buffer = data
        start = 0
        while True:
            end = buffer.find(b"\n\n", start)
            separator = 2
            if end < 0:
                end = buffer.find(b"\r\n\r\n", start)
                separator = 4
                if end < 0:
                    break
            self._event(buffer[start:end], arrived)
            start = end + separator
        rest = buffer[start:]
        self._pending = [rest] if rest else []

    def _event(self, raw: bytes, arrived: float) -> None:
        if self.read.error is not None:
            return
        payload = b""
        kind = b""
        for line in raw.splitlines():
            if line.startswith(b"data:"):
                piece = line[5:]
                payload = payload + b"\n" + piece.lstrip(b" ") if payload else piece.lstrip(b" ")
            elif line.startswith(b"event:"):
                kind = line[6:].strip()
            elif line and not line.startswith(b":") and b":" not in line:
                self.read.error = Fault.stream(Stream.MALFORMED_SSE, f"a line that is not a field: {line[:60]!r}")
                return
        if not payload:
            return
        if self.read.done:
            self.read.events_after_done += 1
            return
        if payload == _DONE:
            self.read.done = True
            return
        try:
            message = json.loads(payload)
        except ValueError:
            self.read.error = Fault.stream(Stream.MALFORMED_SSE, f"an event whose data is not JSON: {payload[:60]!r}")
            return
        if not isinstance(message, dict):
            self.read.error = Fault.stream(
                Stream.MALFORMED_SSE, f"an event whose data is not a JSON object: {payload[:60]!r}"
            )
            return
        if kind == b"error" or is_error_object(message):
            self.read.error = Fault.stream(Stream.ERROR_EVENT, _error_text(message.get("error") or message))
            return
        self.message(message, arrived)

    def message(self, message: dict[str, Any], arrived: float) -> None:
        """One chunk (or a whole non-streamed answer) with the time it arrived."""
        read = self.read
        usage = message.get("usage")
        cumulative = None
        if isinstance(usage, dict):
            read.usage = _usage(usage)
            cumulative = read.usage.completion_tokens
        timings = message.get("timings")
        if cumulative is None and isinstance(timings, dict) and "predicted_n" in timings:
            cumulative = timings.get("predicted_n")
        for choice in message.get("choices") or ():
            mismatch = _shape_mismatch(choice, self.chat)
            if mismatch:
                read.error = Fault.stream(Stream.PROTOCOL_MISMATCH, mismatch)
                return
            if choice.get("finish_reason"):
                read.finish_reason = choice["finish_reason"]
            thinking, content = _pieces(choice, self.chat)
            if content or thinking:
                read.text_chars += len(content) + len(thinking)
                if read.text is not None and content:
                    read.text.append(content)
                if read.reasoning_text is not None and thinking:
                    read.reasoning_text.append(thinking)
                if thinking and not content and read.reasoning_chunks is None:
                    read.reasoning_chunks = [False] * len(read.content_times)
                if read.reasoning_chunks is not None:
                    read.reasoning_chunks.append(not content)
                read.content_times.append(arrived)
                if isinstance(cumulative, int) and self._counts_complete:
                    read.chunk_tokens = read.chunk_tokens if read.chunk_tokens is not None else []
                    read.chunk_tokens.append(cumulative - self._cumulative)
                    self._cumulative = cumulative
                else:
                    self._counts_complete = False
                    read.chunk_tokens = None

    def finish(self) -> StreamRead:
        if b"".join(self._pending).strip() and self.read.error is None:
            # An event without its closing blank line: the stream was cut while the event was being written.
            self.read.error = Fault.stream(Stream.CUT_SHORT_MID_EVENT)
        return self.read


def read_whole(body: bytes, chat: bool, arrived: float) -> StreamRead:
    """A non-streamed answer: one JSON object, all of it arriving at once."""
    parser = StreamParser(chat, keep_text=True)
    try:
        message = json.loads(body)
    except ValueError:
        parser.read.error = Fault.stream(Stream.NOT_JSON, f"{body[:60]!r}")
        return parser.read
    if not isinstance(message, dict):
        parser.read.error = Fault.stream(Stream.NOT_JSON_OBJECT, f"{body[:60]!r}")
    elif is_error_object(message):
        parser.read.error = Fault.stream(Stream.ERROR_ANSWER, _error_text(message.get("error") or message))
    else:
        parser.message(message, arrived)
        if parser.read.finish_reason is not None:
            parser.read.done = True
    return parser.read


def is_error_object(message: dict[str, Any]) -> bool:
    """An error in an answer's body, in either shape servers send: {"error": {...}} (OpenAI, llama.cpp, vLLM
    since it nested its ErrorResponse), or {"object": "error", "message": ...} (vLLM's ErrorResponse before).
    An ordinary chunk that carries "error": null is no error."""
    return message.get("error") is not None or message.get("object") == "error"


def _shape_mismatch(choice: dict[str, Any], chat: bool) -> str | None:
    """A choice in the other API's shape: chat answers carry delta (or message), completions answers text."""
    chat_shaped = "delta" in choice or "message" in choice
    if chat and not chat_shaped and "text" in choice:
        return "a completions-shaped answer (choices[].text) to a chat request; set request.protocol openai-completions"
    if not chat and chat_shaped and "text" not in choice:
        return "a chat-shaped answer (choices[].delta) to a completions request; set request.protocol openai-chat"
    return None


def _pieces(choice: dict[str, Any], chat: bool) -> tuple[str, str]:
    """(thinking, answer): the generated text a choice carries ("" for none: a role-only chunk, the finish)."""
    if not chat:
        text = choice.get("text")
        return "", text if isinstance(text, str) else ""
    delta = choice.get("delta") or choice.get("message")
    if not isinstance(delta, dict):
        return "", ""
    thinking = delta.get("reasoning") or delta.get("reasoning_content") or ""  # the first that says something
    if not isinstance(thinking, str):
        thinking = ""
    content = delta.get("content")
    pieces = [content] if isinstance(content, str) else []
    for call in delta.get("tool_calls") or ():
        arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
        pieces.append(arguments if isinstance(arguments, str) and arguments else "\u2026")
    return thinking, "".join(pieces)


def _usage(usage: dict[str, Any]) -> Usage:
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    completion = usage.get("completion_tokens_details")
    reasoning = completion.get("reasoning_tokens") if isinstance(completion, dict) else None
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_int(cached),
        reasoning_tokens=_int(reasoning),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)[:200]
    return str(error)[:200]
