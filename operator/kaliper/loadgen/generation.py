"""Sending one generation request (openai-chat, openai-completions) and judging what came back.

The prepared bodies come from kaliper.loadgen.prompts; each answer is read as it arrives
(StreamingConnection), parsed (kaliper.loadgen.sse) and turned into the request's figures
(kaliper.loadgen.tokens). What counts as an error is a fault of one of the kinds of kaliper.loadgen.faults
(errorsByKind in the results): an HTTP status, a stream's (not streamed, cut short, malformed, an error event,
...), or the transport's (a timeout, or the exception's name), as for every protocol.
A kept-alive connection found closed before any answer is resent on a new one, and counted apart (resent),
never as an error.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent

from kaliper.api.profilerun import GenerationSpec
from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.faults import TIMEOUT, Fault, Stream, http_status
from kaliper.loadgen.http import ERROR_WORDS, BodySink, StreamingConnection
from kaliper.loadgen.prompts import GenerationRequest, Prompt, generation_requests, load_tokenizer, request_body
from kaliper.loadgen.sse import StreamParser, StreamRead, read_whole
from kaliper.loadgen.tokens import Reached, RequestTokens, reached_so_far, request_tokens
from kaliper.measure.figures import figure
from kaliper.measure.judgement import Bound


@dataclass(frozen=True)
class RequestOutcome:
    sent: float
    ended: float
    fault: Fault | None
    tokens: RequestTokens | None
    good: bool
    answer: str | None = None
    """The answer's text, for a chat session's next turn (payload.prompts.turns > 1, or a trace's conversation)."""
    thinking: str | None = None
    """A reasoning model's thinking before that answer, for a session that keeps it."""

    @property
    def failed(self) -> bool:
        return self.fault is not None


@dataclass
class LiveStream:
    """The stream a user is reading now, so that a stage that ends with it in flight can record the figures
    it has reached (kaliper.loadgen.recorder.Reaching)."""

    read: StreamRead | None = None
    sent: float = 0.0
    intended: float | None = None

    def reached(self) -> Reached | None:
        return reached_so_far(self.read, self.sent, self.intended) if self.read is not None else None


@dataclass
class Session:
    """One user's chat session (payload.prompts.turns > 1): the messages so far, answers included."""

    turns: int
    keeps_reasoning: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    taken: int = 0

    def advance(self, asked: list[dict[str, Any]], answer: str | None, thinking: str | None = None) -> None:
        """After a turn: keep what was asked and answered (the thinking too where the session keeps it), or
        start over after a failed turn or the last."""
        self.taken += 1
        if answer is None or self.taken >= self.turns:
            self.messages, self.taken = [], 0
            return
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        if self.keeps_reasoning and thinking:
            message["reasoning"] = thinking  # vLLM's field for it (reasoning_content before)
        self.messages = [*self.messages, *asked, message]


class GenerationSender:
    """What every user of a generator process shares to send generation requests."""

    def __init__(
        self,
        requests: list[GenerationRequest],
        chat: bool,
        stream: bool,
        tokenizer: Any | None,
        objectives: list[Bound],
        turns: int = 1,
        keeps_reasoning: bool = False,
        session_body: Callable[[list[dict[str, Any]], int], bytes] | None = None,
        tokenize_url: str | None = None,
        model: str = "",
        conversations: bool = False,
    ) -> None:
        self.requests, self.chat, self.stream = requests, chat, stream
        self.tokenizer = tokenizer
        self.objectives = objectives
        self.turns, self.keeps_reasoning = turns, keeps_reasoning
        self.remembers = turns > 1 or conversations
        """Answers are kept for the turn after them: sessions of several turns, or a trace's conversations."""
        self.session_body = session_body
        """A later turn's body: the session's messages, then request `index`'s own."""
        self.tokenize_url, self.model = tokenize_url, model
        """The server's tokenize endpoint, asked only for answers without usage when there is no tokenizer."""

    @classmethod
    def for_config(cls, config: LoadGenConfig) -> GenerationSender:
        prompts = config.payload.prompts
        assert prompts is not None and config.request.model_name  # LoadGenConfig insists on both
        tokenizer = None
        if prompts.tokenizer is not None:
            if prompts.tokenizer.file is None:
                from kaliper.loadgen.payloads import PayloadError

                raise PayloadError("prompts.tokenizer.configMap is read inside the cluster; locally, use file")
            tokenizer = load_tokenizer(Path(prompts.tokenizer.file))
        generation = config.request.generation or GenerationSpec()
        objectives = config.bounds()  # each request judged against them (goodput)
        model = config.request.model_name
        trace = config.played_trace() if prompts.trace is not None else None
        requests = generation_requests(prompts, config.request, model, tokenizer, trace)

        def session_body(history: list[dict[str, Any]], index: int) -> bytes:
            own = requests[index]
            asked = Prompt([*history, *(own.messages or [])], None, own.max_tokens)
            return request_body(asked, config.request, model)

        chat = config.request.protocol == "openai-chat"
        tokenize_url = f"{str(config.url).rstrip('/')}/tokenize"
        return cls(
            requests,
            chat,
            generation.stream,
            tokenizer,
            objectives,
            prompts.turns,
            prompts.history_keeps_reasoning,
            session_body,
            tokenize_url,
            model,
            config.load.trace is not None and config.load.trace.conversations,
        )

    def tokenizer_mismatch(self, base_url: str, model: str) -> str | None:
        """Where the server can tokenize (llama.cpp's and vLLM's /tokenize), a prompt's ids from prompts.tokenizer
        must be the server's: synthetic prompt lengths and local token counts mean nothing otherwise."""
        if self.tokenizer is None:
            return None
        probe = self._probe_text()
        body = json.dumps({"content": probe, "prompt": probe, "model": model, "add_special_tokens": False}).encode()
        request = urllib.request.Request(
            base_url.rstrip("/") + "/tokenize", body, {"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                served = json.loads(answer.read()).get("tokens")
        except (OSError, ValueError, AttributeError):
            return None  # no tokenize endpoint (OpenAI, TGI): nothing to compare with
        if not isinstance(served, list) or not all(isinstance(t, int) for t in served):
            return None
        local = self.tokenizer.encode(probe, add_special_tokens=False).ids
        if local == served:
            return None
        return (
            f"payload.prompts.tokenizer does not match the served model: a {len(local)}-token probe from it became "
            f"{len(served)} tokens at the server's /tokenize (first ids {local[:5]} here, {served[:5]} there); "
            "give the model's own tokenizer.json"
        )

    def _probe_text(self) -> str:
        from kaliper.loadgen.prompts import single_token_words

        return "".join(single_token_words(self.tokenizer)[:32]) or " hello world"

    def bodies(self) -> list[bytes]:
        return [request.body for request in self.requests]

    def send(
        self,
        connection: StreamingConnection,
        raw: bytes,
        index: int,
        intended: float | None,
        clock: Callable[[], float],
        in_session: bool = False,
        live: LiveStream | None = None,
    ) -> RequestOutcome:
        """Send request `index` (its prepared bytes `raw`); `intended` is its intended send time (open loop).
        `in_session`: a later turn of a chat session, whose prompt is more than request `index`'s own."""
        parser = StreamParser(self.chat, keep_text=True)
        whole: list[bytes] = []
        answer: dict[str, Any] = {}

        def open_body(status: int, content_type: str) -> BodySink:
            answer["status"], answer["streamed"] = status, content_type.startswith("text/event-stream")
            answer["content_type"] = content_type
            if answer["streamed"] and status < 400:
                return parser.feed
            return lambda piece, _arrived: whole.append(piece)

        sent = clock()
        if live is not None:
            live.read, live.sent, live.intended = parser.read, sent, intended
        raised: BaseException | None = None
        try:
            connection.stream(raw, open_body)
        except gevent.GreenletExit:
            raise
        except Exception as exc:  # every failure is counted, with its kind and its words
            raised = exc
        ended = clock()
        status = answer.get("status")
        if status is None:  # nothing answered: no tokens to count
            return RequestOutcome(sent, ended, Fault.of(raised) if raised is not None else None, None, False)
        if status >= 400:
            said = b"".join(whole)[:ERROR_WORDS].decode("utf-8", errors="replace")
            fault = Fault.of(raised, after_answer=True) if raised is not None else Fault(http_status(status), said)
            return RequestOutcome(sent, ended, fault, None, False)
        # Answered from here on: whatever went wrong, the target is up.
        read = parser.finish() if answer["streamed"] else read_whole(b"".join(whole), self.chat, ended)
        fault = Fault.of(raised, after_answer=True) if raised is not None else None
        timed_out = fault is not None and fault.kind == TIMEOUT  # the request's whole time ran out
        if read.error is not None and not timed_out:  # what the answer itself said went wrong comes first
            fault = read.error
            if not answer["streamed"]:
                fault = Fault(fault.kind, f"{fault.message} (Content-Type {answer['content_type'] or 'absent'})")
        elif fault is not None:
            if read.content_times and not timed_out:  # the connection failed after tokens had arrived
                fault = Fault(Stream.CUT_SHORT.kind, fault.message)
        elif self.stream and not answer["streamed"]:
            content_type = answer["content_type"] or "absent"
            fault = Fault(
                Stream.NOT_STREAMED.kind, f"the answer's Content-Type is {content_type}, not text/event-stream"
            )
        elif not (read.done or read.finish_reason is not None):
            fault = Fault(Stream.CUT_SHORT.kind, "the stream ended without a finish reason or [DONE]")
        elif not read.content_times:  # a whole answer that says nothing is not a generation
            fault = Fault(Stream.NO_TOKENS.kind)
        request = self.requests[index]
        prompt_tokens = None if in_session else request.prompt_tokens
        (count, thinking_count), count_source = self._count(read)
        tokens = request_tokens(
            read, sent, intended, ended, request.max_tokens, prompt_tokens, count, count_source, thinking_count
        )
        good = fault is None and self._good(tokens, sent, intended, ended)
        answer = thinking = None
        if self.remembers and read.text is not None:  # a session's memory
            answer, thinking = "".join(read.text), "".join(read.reasoning_text or [])
        return RequestOutcome(sent, ended, fault, tokens, good, answer=answer, thinking=thinking)

    def _count(self, read: StreamRead) -> tuple[tuple[int | None, int | None], str]:
        """((output tokens, of them thinking), how) counted here: with the local tokenizer, or, where there is
        none and the server sent no usage, with the server's own tokenize endpoint (llama.cpp, vLLM). The
        thinking and the answer are counted each on its own, as they were generated."""
        if read.text is None:
            return (None, None), "tokenizer"
        if self.tokenizer is not None:
            count, how = self._tokenizer_count, "tokenizer"
        elif read.usage is not None and read.usage.completion_tokens is not None:
            return (None, None), "tokenizer"  # the server counted; no request to its tokenize endpoint
        else:
            count, how = self._server_count, "server tokenize"
        thinking = "".join(read.reasoning_text or [])
        thinking_tokens = count(thinking) if thinking else None
        answer_tokens = count("".join(read.text))
        if answer_tokens is None or (thinking and thinking_tokens is None):
            return (None, None), how
        return (answer_tokens + (thinking_tokens or 0), thinking_tokens), how

    def _tokenizer_count(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def _server_count(self, text: str) -> int | None:
        if self.tokenize_url is None:
            return None
        body = json.dumps({"content": text, "prompt": text, "model": self.model, "add_special_tokens": False})
        request = urllib.request.Request(
            self.tokenize_url, body.encode(), {"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                tokens = json.loads(answer.read()).get("tokens")
        except (OSError, ValueError, AttributeError):
            tokens = None
        if not isinstance(tokens, list):
            self.tokenize_url = None  # no tokenize endpoint (OpenAI, TGI): count chunks, and stop asking
            return None
        return len(tokens)

    def _good(self, tokens: RequestTokens, sent: float, intended: float | None, ended: float) -> bool:
        for objective in self.objectives:
            row = figure(objective.metric)
            if row.request is None:  # the whole request
                value = ended - (intended if objective.corrected and intended is not None else sent)
            else:
                own = getattr(tokens, row.request)
                corrected = getattr(tokens, row.request_corrected) if row.request_corrected else None
                if own is None and row.absent_fails:
                    return False
                value = corrected if objective.corrected and corrected is not None else (own or 0.0)
            if value > objective.bound_s:
                return False
        return True
