"""Bad servers: each defect gets its own error kind and nothing is miscounted (tests/support/broken_llm.py
plays the defects; one user, so every request of the stage met the same one)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaliper.loadgen.results import summarize
from kaliper.report.schema import LoadTestResult, ProfileReport
from kaliper.serving.tiny_llm import make_tiny_llm
from tests.support.broken_llm import broken_llm_server
from tests.support.groundtruth import STREAM_SOURCE, groundtruth
from tests.support.loadgen_run import run_loadgen
from tests.support.paths import KALIPER

LOAD = {"closedLoop": {"concurrency": 1}, "warmup": "0s", "minDuration": "1s", "maxDuration": "1s"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with broken_llm_server() as base:
        yield base


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tokenizer")
    make_tiny_llm(directory)
    return directory / "tokenizer.json"


def chat_config(tmp_path: Path, url: str, model: str, load: dict[str, Any] = LOAD, **request: Any) -> dict:
    """A load generator's config of one prompt ("hello", written beside it), streamed chat of 4 tokens."""
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    return {
        "url": url,
        "request": {"protocol": "openai-chat", "modelName": model, "generation": {"maxTokens": 4}, **request},
        "payload": {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}}},
        "load": load,
    }


def run(
    tmp_path: Path,
    base: str,
    mode: str,
    tokenizer: Path | None = None,
    protocol: str = "openai-chat",
    load: dict[str, Any] = LOAD,
) -> LoadTestResult:
    config = chat_config(tmp_path, base, mode, load, protocol=protocol)
    if tokenizer is not None:
        config["payload"]["prompts"]["tokenizer"] = {"file": str(tokenizer)}
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 0, process.stderr
    assert result is not None and result.ok and len(result.stages) == 1 and result.stages[0].requests > 0
    return result


@pytest.mark.parametrize(
    ("mode", "errors", "output_per_request", "failed_tokens_per_request"),
    [
        ("well", None, 4, 0),
        ("cut", "stream cut short", 0, 3),
        ("malformed", "malformed SSE", 0, 1),
        ("error-mid", "error event mid-stream", 0, 2),
        ("ignore-max", None, 8, 0),
    ],
)
def test_each_defect_is_its_own_error_kind_with_its_tokens_counted_apart(
    tmp_path: Path, server: str, mode: str, errors: str | None, output_per_request: int, failed_tokens_per_request: int
) -> None:
    stage = run(tmp_path, server, mode).stages[0]
    n = stage.requests
    assert stage.errors_by_kind == ({errors: n} if errors else {})
    tokens = stage.tokens
    assert tokens is not None
    # A failed answer feeds no token figure: what it delivered is counted apart.
    assert tokens.output_tokens == output_per_request * n
    assert tokens.cut_short_tokens == failed_tokens_per_request * n
    assert tokens.cut_short == (n if errors else 0)
    assert tokens.streams == (0 if errors else n)


@pytest.mark.parametrize(
    ("mode", "protocol", "errors"),
    [
        ("error-object", "openai-chat", "error event mid-stream"),
        ("empty", "openai-chat", "no tokens generated"),
    ],
)
def test_an_answer_that_generated_nothing_is_a_failure_never_a_success(
    tmp_path: Path, server: str, mode: str, protocol: str, errors: str
) -> None:
    """A 200 stream whose only event is an engine's error object, an answer with no content, and a chat-shaped
    stream to a completions request each fail every request: no success, no goodput, no tokens per second."""
    stage = run(tmp_path, server, mode, protocol=protocol).stages[0]
    assert stage.errors_by_kind == {errors: stage.requests}
    assert stage.error_rate == 1.0 and stage.throughput_rps == 0.0
    assert stage.tokens is not None and stage.tokens.streams == 0 and stage.tokens.output_tokens_per_s == 0.0


def test_error_null_in_ordinary_chunks_is_no_error(tmp_path: Path, server: str) -> None:
    stage = run(tmp_path, server, "error-null").stages[0]
    assert stage.errors_by_kind == {}
    assert stage.tokens is not None and stage.tokens.output_tokens == 4 * stage.requests


def test_chunks_after_done_are_ignored_and_named(tmp_path: Path, server: str) -> None:
    result = run(tmp_path, server, "after-done")
    stage = result.stages[0]
    n = stage.requests
    assert stage.errors_by_kind == {}
    assert stage.tokens is not None and (stage.tokens.chunks, stage.tokens.events_after_done) == (4 * n, 3 * n)
    assert result.warnings == [
        f"stage 0: {3 * n} events arrived after [DONE] and were ignored; the server goes on after saying its "
        "answer is over"
    ]


def test_a_server_that_ignores_max_tokens_is_named_in_the_warnings(tmp_path: Path, server: str) -> None:
    result = run(tmp_path, server, "ignore-max")
    n = result.stages[0].requests
    assert result.stages[0].tokens is not None and result.stages[0].tokens.over_max_tokens == n
    assert result.warnings == [
        f"stage 0: {n} answers were longer than the max_tokens they asked for; the server ignores max_tokens"
    ]


def test_without_usage_tokens_are_counted_with_the_tokenizer_or_flagged_as_chunks(
    tmp_path: Path, server: str, tokenizer: Path
) -> None:
    counted = run(tmp_path, server, "no-usage", tokenizer).stages[0]
    assert counted.tokens is not None and counted.errors_by_kind == {}
    # Four chunks of " no ka": eight tokens by the tokenizer, where the chunks alone would say four.
    assert counted.tokens.output_tokens == 8 * counted.requests
    assert counted.tokens.token_sources == {"tokenizer": counted.requests}
    assert counted.tokens.per_token_unknown == counted.requests  # two tokens a chunk, no per-chunk counts
    assert counted.tokens.itl_token.count == 0
    # The dataset's prompt "hello" is five tokens by the tiny model's tokenizer (one per letter).
    assert counted.tokens.input_tokens == 5 * counted.requests

    guessed = run(tmp_path, server, "no-usage")
    stage = guessed.stages[0]
    assert stage.tokens is not None and stage.tokens.output_tokens == 4 * stage.requests
    assert stage.tokens.token_sources == {"chunks": stage.requests}
    assert guessed.warnings == [
        f"stage 0: {stage.requests} answers came without usage and no tokenizer was given: their output tokens are "
        "the number of chunks (a lower bound); set payload.prompts.tokenizer"
    ]


def test_a_refusing_server_counts_http_errors_and_no_tokens(tmp_path: Path, server: str) -> None:
    stage = run(tmp_path, server, "http-503").stages[0]
    assert stage.errors_by_kind == {"HTTP 503": stage.requests}
    assert stage.tokens is not None and stage.tokens.streams == 0 and stage.tokens.output_tokens == 0
    # The server's words are kept: once, however many requests said them.
    assert stage.error_messages == {"HTTP 503": ['{"error": {"message": "overloaded", "code": 503}}']}


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("error-mid", {"error event mid-stream": ["out of memory"]}),
        ("error-object", {"error event mid-stream": ["engine dead"]}),
    ],
)
def test_an_error_event_keeps_the_servers_message(tmp_path: Path, server: str, mode: str, said: dict) -> None:
    result = run(tmp_path, server, mode)
    assert result.stages[0].error_messages == said
    kind, (text,) = next(iter(said.items()))
    assert f"    {kind}: {text}" in summarize(result).splitlines()


def test_a_stream_slower_than_the_request_timeout_is_a_timeout(tmp_path: Path, server: str) -> None:
    """Tokens 400 ms apart, a timeout of 1 s: each stream had tokens when its deadline passed, and is counted
    as the timeout it is (not as a stream cut short), with its time to first token kept for what it reached."""
    config = chat_config(tmp_path, server, "slow", {**LOAD, "minDuration": "2s", "maxDuration": "2s"}, timeout="1s")
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 0 and result is not None, process.stderr
    (stage,) = result.stages
    assert set(stage.errors_by_kind) == {"timeout"} and stage.errors == stage.requests >= 2
    assert stage.error_messages == {"timeout": ["no whole answer within the request's timeout (1 s)"]}
    assert 950 <= stage.failure_time.at(50).value_ms <= 1100


def test_a_stream_served_as_text_plain_is_refused_naming_its_content_type(tmp_path: Path, server: str) -> None:
    """stream: true already, the server streams Server-Sent Events as text/plain: refused before the load with
    what to change on the server, not with advice to set stream to true."""
    process, result = run_loadgen(tmp_path, chat_config(tmp_path, server, "plain-sse"))
    assert process.returncode == 1 and result is not None and result.stages == []
    assert result.error.startswith(
        f"{server}/v1/chat/completions: every answer would fail as the first did: the answer is not JSON: b'data: "
    )
    assert result.error.endswith(
        "(Content-Type text/plain); request.generation.stream is already true: the server must send its stream as "
        "text/event-stream (Server-Sent Events), as the OpenAI API does"
    ), result.error


def test_chat_sessions_carry_every_earlier_turn_and_answer_then_start_over(tmp_path: Path, server: str) -> None:
    """Three-turn sessions over two dataset rows, one user: the server saw each turn carry the session's
    earlier questions and the answers it gave (" no" per token, two tokens each), and a fourth request open
    a new session."""
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "first"}\n{"prompt": "second"}\n')
    before = len(json.loads(urllib.request.urlopen(f"{server}/received", timeout=5).read()))
    config = {
        "url": server,
        "request": {"protocol": "openai-chat", "modelName": "well", "generation": {"maxTokens": 2}},
        "payload": {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}, "turns": 3}},
        "load": LOAD,
    }
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 0, process.stderr
    assert result is not None and result.stages[0].errors_by_kind == {}
    received = json.loads(urllib.request.urlopen(f"{server}/received", timeout=5).read())[before:]
    assert len(received) > 8

    def user(text: str) -> dict[str, str]:
        return {"role": "user", "content": text}

    answer = {"role": "assistant", "content": " no no"}
    # Then the load: the dataset cycles first, second, first, ... while sessions take three turns each.
    assert received[0] == [user("first")]  # the preflight request, alone
    assert received[1:6] == [
        [user("first")],
        [user("first"), answer, user("second")],
        [user("first"), answer, user("second"), answer, user("first")],
        [user("second")],
        [user("second"), answer, user("first")],
    ]
    # The input tokens come from the server's usage (7 a request here), never from the last row alone.
    tokens = result.stages[0].tokens
    assert tokens is not None and tokens.token_sources == {"usage": result.stages[0].requests}


def test_sessions_need_the_chat_protocol(tmp_path: Path, server: str) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "first"}\n')
    config = {
        "url": server,
        "request": {"protocol": "openai-completions", "modelName": "well"},
        "payload": {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}, "turns": 2}},
        "load": LOAD,
    }
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 2 and result is None
    # The ProfileRun's own rule, stated once (kaliper.api.profilerun.rules.SESSIONS_NEED_CHAT).
    assert (
        "multi-turn sessions carry earlier answers as chat messages; set request.protocol to openai-chat or "
        "payload.prompts.turns to 1" in process.stderr
    )


def test_a_base_url_ending_in_v1_is_refused_before_the_load_naming_the_url_called(tmp_path: Path, server: str) -> None:
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"prompt": "hi"}) + "\n")
    config = {
        "url": f"{server}/v1",  # as OpenAI SDKs take it
        "request": {"protocol": "openai-chat", "modelName": "well", "generation": {"maxTokens": 4}},
        "payload": {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}}},
        "load": LOAD,
    }
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 1 and result is not None and result.stages == []
    assert result.error == (
        f'{server}/v1/v1/chat/completions answered HTTP 404 to the first request: {{"detail":"Not Found"}}; url '
        f"ends in /v1 and the request path /v1/chat/completions starts with it again: give url without /v1 (such "
        f"as {server})"
    )
    assert result.target == f"{server}/v1/v1/chat/completions"


def test_a_rate_limit_is_honoured_as_its_retry_after_asks_and_reported_by_name(tmp_path: Path, server: str) -> None:
    """One user, two seconds, a server that answers 429 with Retry-After: 1: the user waits a second after each
    refusal (a handful of requests, not thousands) and says so."""
    stage = run(tmp_path, server, "http-429", load={**LOAD, "minDuration": "2s", "maxDuration": "2s"}).stages[0]
    assert stage.errors_by_kind == {"HTTP 429": stage.requests} and stage.requests <= 3
    assert stage.backoffs is not None and stage.backoffs.retry_after == stage.backoffs.waits >= 1
    # Each wait 1 s, counted in the windows it spans up to the measured end: never more time than there was
    # (one user for 2 s), and the last wait only as far as the stage's end.
    assert stage.backoffs.waits - 1 < stage.backoffs.seconds <= min(stage.backoffs.waits, stage.measured_s)
    assert stage.error_messages == {"HTTP 429": ['{"error": {"message": "rate limit reached", "code": 429}}']}


@pytest.mark.parametrize(
    ("mode", "observed"),
    [
        # Every answer is a 200 stream with no token: fast, and every one of them a failure.
        ("empty", "every one of the {n} requests failed"),
        # Every answer is a 200 stream whose only event is the engine's error object.
        ("error-object", "every one of the {n} requests failed"),
    ],
)
def test_a_profilerun_against_answers_without_tokens_is_never_met(
    tmp_path: Path, server: str, mode: str, observed: str
) -> None:
    """Through `kaliper run`, with a latency-only SLO the failures alone could once meet: NotMet, with the
    deciding trial's reason, and no best trial."""
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "broken"},
        "spec": {
            "target": {"url": server},
            "request": {"protocol": "openai-chat", "modelName": mode, "generation": {"maxTokens": 4}},
            "payload": {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}}},
            "load": {**LOAD, "minDuration": "2s", "maxDuration": "2s"},
            "slo": {"latency": [{"percentile": 99, "max": "500ms"}]},
        },
    }
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(run))
    out = tmp_path / "reports"
    process = subprocess.run(
        [str(KALIPER), "run", str(manifest), "--output-dir", str(out)], capture_output=True, text=True, timeout=300
    )
    assert process.returncode == 0, process.stderr
    report = ProfileReport.model_validate_json((out / "report.json").read_text())
    (trial,) = report.trials
    assert trial.stage is not None and trial.stage.requests == trial.stage.errors > 0
    n = trial.stage.requests
    assert (trial.slo_verdict, report.verdict, report.best_trial) == ("NotMet", "NotMet", None)
    # (A request still in flight when the stage ended, if one was, is named after the failures.)
    ((objective, said),) = [(c.objective, c.observed) for c in trial.slo]
    assert objective == "p99 <= 500ms" and said.startswith(observed.format(n=n)), said
    assert report.verdict_reason == f"trial {trial.name}: p99 <= 500ms: {said} (NotMet)"


def test_a_usage_the_stream_contradicts_is_named_and_the_chunks_count_instead(tmp_path: Path, server: str) -> None:
    result = run(tmp_path, server, "usage-zero")
    stage = result.stages[0]
    n = stage.requests
    assert stage.errors_by_kind == {}
    assert stage.tokens is not None and (stage.tokens.output_tokens, stage.tokens.usage_below_chunks) == (4 * n, n)
    assert stage.tokens.output_tokens_per_s > 0
    assert result.warnings == [
        f"stage 0: {n} answers' usage counted fewer output tokens than the content chunks they carried; their "
        "tokens are the chunks' count instead (a lower bound)"
    ]


@pytest.mark.parametrize(
    ("mode", "protocol", "said"),
    [
        (
            "well",
            "openai-completions",
            "protocol mismatch: a chat-shaped answer (choices[].delta) to a completions request; set "
            "request.protocol openai-chat",
        ),
        (
            "no-stream",
            "openai-chat",
            "the answer's Content-Type is application/json, not text/event-stream; the server ignores stream: "
            "true: set request.generation.stream to false",
        ),
    ],
)
def test_an_answer_of_the_wrong_shape_is_refused_before_the_load(
    tmp_path: Path, server: str, mode: str, protocol: str, said: str
) -> None:
    """The other API's stream, or a whole JSON answer where a stream was asked: every answer would be the same,
    so the first check refuses the run, naming what the server sent."""
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    config = {
        "url": server,
        "request": {"protocol": protocol, "modelName": mode, "generation": {"maxTokens": 4}},
        "payload": {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}}},
        "load": LOAD,
    }
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 1 and result is not None and result.stages == []
    path = "/v1/completions" if protocol == "openai-completions" else "/v1/chat/completions"
    assert result.error == f"{server}{path}: every answer would fail as the first did: {said}"


@pytest.mark.parametrize(
    ("fault", "kind", "tokens_each"),
    [
        ("error-object", "error event mid-stream", 0),
        ("empty", "no tokens generated", 0),
        ("cut", "stream cut short", 2),
    ],
)
def test_the_streaming_ground_truth_server_misbehaving_one_answer_in_four(
    tmp_path: Path, fault: str, kind: str, tokens_each: int
) -> None:
    """bench/streamtruth with a fault mode: a quarter of its answers fail as `fault` says, each counted by its
    kind, and only the other three quarters feed the token figures."""
    flags = ("-ttft", "5ms", "-gap", "1ms", "-fault-every", "4", "-fault", fault)
    with groundtruth(*flags, source=STREAM_SOURCE) as base:
        process, result = run_loadgen(tmp_path, chat_config(tmp_path, base, "truth"))
    assert process.returncode == 0, process.stderr
    stage = result.stages[0]
    failed = stage.errors_by_kind.get(kind, 0)
    assert set(stage.errors_by_kind) == {kind} and abs(failed - stage.requests / 4) <= 1
    tokens = stage.tokens
    assert tokens is not None and tokens.streams == tokens.ttft.count == stage.requests - failed
    assert (tokens.output_tokens, tokens.cut_short, tokens.cut_short_tokens) == (
        4 * (stage.requests - failed),
        failed,
        tokens_each * failed,
    )
    if fault == "error-object":
        assert stage.error_messages == {kind: ["EngineCore encountered an issue"]}


def test_a_first_request_that_fails_leads_the_warnings_naming_its_kind_once(tmp_path: Path, server: str) -> None:
    """Every answer cut short (the connection closed after some tokens): the run measures it, and the first
    request's failure is the results' first warning, as gRPC's first call's is, its kind once, with words."""
    result = run(tmp_path, server, "cut")
    assert result.warnings[0] == (
        "the first request failed: stream cut short: connection closed by the server mid-response"
    )


def test_goodput_counts_the_requests_within_every_objective(tmp_path: Path, server: str) -> None:
    """Each answered request is judged against every latency objective as it ends: all within a generous first
    token bound is a goodput share of 1; a whole-request bound no answer can meet makes it 0."""
    config = chat_config(tmp_path, server, "error-null")
    config["objectives"] = [{"metric": "ttft", "percentile": 90, "max": "30s"}]
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 0, process.stderr
    assert result is not None and result.stages[0].tokens is not None
    assert result.stages[0].tokens.goodput_share == 1.0
    config["objectives"].append({"metric": "latency", "percentile": 90, "max": "1us"})
    process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 0, process.stderr
    assert result is not None and result.stages[0].tokens is not None and result.stages[0].requests > 0
    assert (result.stages[0].tokens.goodput_share, result.stages[0].tokens.goodput_rps) == (0.0, 0.0)
