"""Generation requests (openai-chat, openai-completions): streamed answers read as they arrive, their tokens
timed (kaliper.loadgen.generation sends one request and names what went wrong), a chat session's later turns
sent with their history."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kaliper.loadgen.generation import GenerationSender, Session
from kaliper.loadgen.generator import Generator
from kaliper.loadgen.grpc_calls import Preflight
from kaliper.loadgen.http import StreamingConnection
from kaliper.loadgen.pacing import KaliperUser
from kaliper.loadgen.user_http import Requests, first_request_check


@dataclass
class Generation:
    sender: GenerationSender
    requests: Requests


class GenerationUser(KaliperUser):
    precise = True  # a time to first token of tens of milliseconds would read 1-2% high from gevent's timer
    records_tokens = True

    @classmethod
    def prepare(cls, generator: Generator) -> Generation:
        sender = GenerationSender.for_config(generator.config)
        return Generation(sender, Requests([generator.http_request(body) for body in sender.bodies()]))

    @classmethod
    def check(cls, generator: Generator) -> Preflight:
        prepared: Generation = generator.prepared
        config = generator.config
        mismatch = prepared.sender.tokenizer_mismatch(config.url, config.request.model_name or "")
        if mismatch:
            return Preflight(mismatch)
        return first_request_check(generator, prepared.requests.raw[0])

    def __init__(self, environment: object) -> None:
        super().__init__(environment)  # type: ignore[arg-type]
        generator = self.generator
        self.prepared: Generation = generator.prepared
        self.connection = StreamingConnection(generator.host, generator.port, generator.timeout_s, generator.ssl)
        sender = self.prepared.sender
        self.session = Session(sender.turns) if sender.turns > 1 and sender.session_body else None

    def send_one(self, slot: float | None, claimed: float | None) -> bool:
        sender, requests, session, connection = (
            self.prepared.sender,
            self.prepared.requests,
            self.session,
            self.connection,
        )
        index = requests.next_index()
        in_session = session is not None and bool(session.messages)
        if session is not None and in_session:
            assert sender.session_body is not None
            raw = self.generator.http_request(sender.session_body(session.messages, index))
        else:
            raw = requests.raw[index]
        resent_before = connection.resent
        outcome = sender.send(connection, raw, index, slot, time.perf_counter, in_session)
        if session is not None:
            answer = outcome.answer if outcome.error is None else None
            session.advance(sender.requests[index].messages or [], answer)
        self.generator.recorder.record_send(
            slot,
            claimed,
            outcome.sent,
            outcome.ended,
            outcome.error,
            len(raw),
            connection.last_response_bytes,
            resent=connection.resent - resent_before,
            tokens=outcome.tokens,
            good=outcome.good,
            message=outcome.message,
        )
        self.retry_after_s = connection.retry_after_s if outcome.error else None
        return outcome.error is not None

    def close(self) -> None:
        self.connection.close()
