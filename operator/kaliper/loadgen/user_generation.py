"""Generation requests (openai-chat, openai-completions): streamed answers read as they arrive, their tokens
timed (kaliper.loadgen.generation sends one request and names what went wrong), a chat session's later turns
sent with their history."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kaliper.loadgen.faults import Stream, http_status
from kaliper.loadgen.generation import GenerationSender, LiveStream, Session
from kaliper.loadgen.generator import Generator
from kaliper.loadgen.http import StreamingConnection
from kaliper.loadgen.pacing import KaliperUser
from kaliper.loadgen.preflight import Preflight
from kaliper.loadgen.tokens import Reached
from kaliper.loadgen.traces import PlayedTrace
from kaliper.loadgen.user_http import Requests, path_refusal
from kaliper.log import get_logger

log = get_logger("kaliper.loadgen")
# What the first answer can show about the whole run (every later request would meet the same), with what to
# change where the server's words do not say it.
# A first answer of these kinds refuses the run (every answer would fail the same way), with what to change.
REFUSED_FIRST = {
    Stream.PROTOCOL_MISMATCH.kind: "",
    Stream.NOT_STREAMED.kind: "; the server ignores stream: true: set request.generation.stream to false",
    Stream.NOT_JSON.kind: "; is it a stream? set request.generation.stream to true",
}


@dataclass
class Generation:
    sender: GenerationSender
    requests: Requests
    conversations: PlayedTrace | None = None
    """A trace replayed as conversations (load.trace.conversations): whose turns follow which."""


def first_generation_check(generator: Generator) -> Preflight:
    """Send the first request as the load will, within its deadline, and judge its answer as the load would.
    A path the server lacks (404, 405) or an answer of the other API's shape, or not the stream asked, is
    refused before the load; any other failure only warns (the run measures exactly that)."""
    prepared: Generation = generator.prepared
    target = generator.config.target
    connection = StreamingConnection(generator.host, generator.port, generator.timeout_s, generator.ssl)
    try:
        outcome = prepared.sender.send(connection, prepared.requests.raw[0], 0, None, time.perf_counter)
    finally:
        connection.close()
    if outcome.fault is None:
        return Preflight()
    kind, words = outcome.fault.kind, outcome.fault.message or ""
    if kind in (http_status(404), http_status(405)):
        return Preflight(path_refusal(generator, 404 if kind == http_status(404) else 405, words))
    if kind in REFUSED_FIRST:
        hint = REFUSED_FIRST[kind]
        if kind == Stream.NOT_JSON.kind and prepared.sender.stream:
            hint = (
                "; request.generation.stream is already true: the server must send its stream as "
                "text/event-stream (Server-Sent Events), as the OpenAI API does"
            )
        return Preflight(f"{target}: every answer would fail as the first did: {words}{hint}")
    warning = f"the first request failed: {outcome.fault.words}"
    log.warning(warning, url=target)
    return Preflight(warning=warning)


class GenerationUser(KaliperUser):
    precise = True  # a time to first token of tens of milliseconds would read 1-2% high from gevent's timer
    records_tokens = True

    @classmethod
    def prepare(cls, generator: Generator) -> Generation:
        config = generator.config
        sender = GenerationSender.for_config(config)
        requests = Requests([generator.http_request(body) for body in sender.bodies()])
        conversations = config.load.trace is not None and config.load.trace.conversations
        return Generation(sender, requests, config.played_trace() if conversations else None)

    @classmethod
    def check(cls, generator: Generator) -> Preflight:
        prepared: Generation = generator.prepared
        config = generator.config
        mismatch = prepared.sender.tokenizer_mismatch(config.url, config.request.model_name or "")
        if mismatch:
            return Preflight(mismatch)
        return first_generation_check(generator)

    def __init__(self, environment: object) -> None:
        super().__init__(environment)  # type: ignore[arg-type]
        generator = self.generator
        self.prepared: Generation = generator.prepared
        self.connection = StreamingConnection(generator.host, generator.port, generator.timeout_s, generator.ssl)
        sender = self.prepared.sender
        in_sessions = sender.turns > 1 and sender.session_body is not None
        self.session = Session(sender.turns, sender.keeps_reasoning) if in_sessions else None
        self.live = LiveStream()

    def reached(self) -> Reached | None:
        """The figures the stream being read has reached (kaliper.loadgen.recorder.Reaching)."""
        return self.live.reached()

    def next_turn(self, failed: bool) -> tuple[float, int] | None:
        """A trace's conversation goes on after an answer: its next turn its delay after now (the answer's end)."""
        played = self.prepared.conversations
        if played is None or failed or self.place is None:
            return None
        turn = played.next_turn(self.place)
        return None if turn is None else (time.perf_counter() + turn[0], turn[1])

    def send_one(self, slot: float | None, claimed: float | None) -> bool:
        sender, requests, connection = self.prepared.sender, self.prepared.requests, self.connection
        # A trace's send carries the trace's request for its place; other loads take the requests in turn.
        index = self.place % len(requests.raw) if self.place is not None else requests.next_index()
        played = self.prepared.conversations
        if played is not None and played.previous[index] is None:
            # A conversation's first turn (or a request of no conversation): a session as long as its turns.
            self.session = Session(played.turns_from(index), sender.keeps_reasoning)
        session = self.session
        in_session = session is not None and bool(session.messages)
        if session is not None and in_session:
            assert sender.session_body is not None
            raw = self.generator.http_request(sender.session_body(session.messages, index))
        else:
            raw = requests.raw[index]
        resent_before = connection.resent
        outcome = sender.send(connection, raw, index, slot, time.perf_counter, in_session, self.live)
        self.live.read = None
        if session is not None:
            answer = outcome.answer if not outcome.failed else None
            session.advance(sender.requests[index].messages or [], answer, outcome.thinking)
        self.generator.recorder.record_send(
            slot,
            claimed,
            outcome.sent,
            outcome.ended,
            outcome.fault,
            len(raw),
            connection.last_response_bytes,
            resent=connection.resent - resent_before,
            tokens=outcome.tokens,
            good=outcome.good,
            replica=connection.replica,
        )
        self.retry_after_s = connection.retry_after_s if outcome.failed else None
        return outcome.failed

    def close(self) -> None:
        self.connection.close()
