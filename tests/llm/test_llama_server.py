"""Generation load tests end to end: `python -m kaliper.loadgen run` against llama.cpp's real llama-server
(built from the llama-cpp-python sdist) serving a tiny random-weight model made here. The model never stops
on its own, so every answer is exactly max_tokens long; the server's own usage and /metrics are the truth
the figures are checked against."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaliper.report.schema import LoadTestResult, StageResult
from kaliper.serving.tiny_llm import TinyLlmShape, make_tiny_llm
from tests.support.llama import (
    CHAT_TEMPLATE_TOKENS,
    MODEL_NAME,
    chat_request,
    llama_server,
    server_counters,
    synthetic_payload,
    tiny_model,
)
from tests.support.loadgen_run import run_loadgen

SHORT = {"warmup": "1s", "minDuration": "3s", "maxDuration": "3s", "stopping": {"window": "1s"}}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("tiny-llm"))


@pytest.fixture(scope="module")
def server(model: Path) -> Iterator[str]:
    with llama_server(model, slots=4) as base:
        yield base


def post_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def only_stage(process: subprocess.CompletedProcess, result: LoadTestResult | None) -> StageResult:
    assert process.returncode == 0, process.stderr
    assert result is not None and result.ok and len(result.stages) == 1
    return result.stages[0]


def test_closed_loop_chat_streams_have_exact_lengths_and_the_servers_counts(
    tmp_path: Path, server: str, model: Path
) -> None:
    before = server_counters(server)
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": {
                "protocol": "openai-chat",
                "modelName": MODEL_NAME,
                "generation": {"maxTokens": 16, "ignoreEos": True},
            },
            "payload": {
                "prompts": {
                    "synthetic": {"inputTokens": {"mean": 64}},
                    "tokenizer": {"file": str(model.parent / "tokenizer.json")},
                }
            },
            "load": {"closedLoop": {"concurrency": 4}, **SHORT, "stopping": {"window": "1s", "metric": "ttft"}},
        },
    )
    stage = only_stage(process, result)
    tokens = stage.tokens
    assert tokens is not None and stage.requests > 50
    assert stage.errors_by_kind == {}
    # Every answer: exactly 16 tokens by the server's usage, streamed one token per chunk.
    assert tokens.streams == stage.requests
    assert tokens.output_tokens == 16 * stage.requests
    assert tokens.chunks == 16 * stage.requests
    assert tokens.token_sources == {"usage": stage.requests}
    assert (tokens.per_token_exact, tokens.per_token_divided, tokens.per_token_unknown) == (stage.requests, 0, 0)
    assert (tokens.cut_short, tokens.over_max_tokens) == (0, 0)
    # Every synthetic prompt was 64 tokens as the server counts them (plus its chat template).
    assert tokens.input_tokens == (64 + CHAT_TEMPLATE_TOKENS) * stage.requests
    # One ttft sample per stream, one gap per pair of successive tokens, one tpot per request.
    assert tokens.ttft.count == stage.requests
    assert tokens.itl_chunk.count == 15 * stage.requests
    assert tokens.tpot.count == stage.requests
    # A rate of the measured 3 s: the requests the graceful stop awaited after them are not in it.
    assert tokens.output_tokens_per_s == pytest.approx(16 * (stage.requests - stage.drained) / 3, rel=1e-3)
    # The server counted at least every token measured (it also served the warm-up and the last requests).
    predicted = server_counters(server)["tokens_predicted_total"] - before["tokens_predicted_total"]
    assert predicted >= tokens.output_tokens
    assert "ttft p99" in process.stderr and "tok/s" in process.stderr
    # The self-check read the same counters at the edges of the measured interval. Both sides count an answer's
    # 16 tokens when it ends, so only an answer ending within a hair of an edge falls on different sides of it;
    # the server counts the 80 prompt tokens when it reads the prompt (split between processed and reused from
    # its cache), so the requests in flight at each edge (at most one per user) are counted on one side alone.
    check = tokens.server_check
    assert check is not None and (check.source, check.unavailable) == ("llama.cpp", None)
    counted = {c.figure: c for c in check.comparisons}
    assert list(counted) == ["outputTokens", "inputTokens", "generationSeconds"]
    # The generator's side is the measured windows' own: the answers the graceful stop awaited after the last
    # edge are in the stage's counts, not in the interval both sides read.
    measured = stage.requests - stage.drained
    assert counted["outputTokens"].generator == 16 * measured
    server_answers = counted["outputTokens"].server / 16
    assert server_answers == int(server_answers) and abs(server_answers - measured) <= 4 * 2
    prompt_tokens = (64 + CHAT_TEMPLATE_TOKENS) * measured
    assert counted["inputTokens"].generator == prompt_tokens
    assert abs(counted["inputTokens"].server - prompt_tokens) <= (64 + CHAT_TEMPLATE_TOKENS) * 4 * 2
    assert "server check (llama.cpp" in process.stderr


def test_chat_sessions_grow_their_prompts_on_the_real_server(tmp_path: Path, server: str, model: Path) -> None:
    """Three-turn sessions: the server's usage counts each later turn's history (earlier questions and its own
    answers), so the stage's input tokens exceed what single requests of 32 tokens would carry."""
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": chat_request(8),
            "payload": synthetic_payload({"file": str(model.parent / "tokenizer.json")}, 32, 64, turns=3),
            "load": {"closedLoop": {"concurrency": 1}, **SHORT},
        },
    )
    stage = only_stage(process, result)
    tokens = stage.tokens
    assert tokens is not None and stage.errors_by_kind == {} and stage.requests > 6
    assert tokens.output_tokens == 8 * stage.requests
    assert tokens.token_sources == {"usage": stage.requests}
    assert tokens.input_tokens > (32 + CHAT_TEMPLATE_TOKENS) * stage.requests


def test_without_usage_or_tokenizer_the_servers_tokenize_endpoint_counts(tmp_path: Path, server: str) -> None:
    """No stream_options.include_usage asked, so llama-server sends no usage; no tokenizer given: each answer's
    text is counted by the server's own /tokenize, and the report names that source. Greedy sampling makes
    every answer the same text, whose count the test asks /tokenize for itself. Re-tokenizing generated text
    need not give back the generated tokens; the self-check sets the server's own count beside it."""
    messages = [{"role": "user", "content": "no ka li per"}]
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"messages": messages}) + "\n")
    greedy = {"temperature": 0.0, "cache_prompt": False}
    request = chat_request(16)
    request["generation"].update(includeUsage=False, extraBody=greedy)
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": request,
            "payload": {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}}},
            "load": {"closedLoop": {"concurrency": 1}, **SHORT},
        },
    )
    stage = only_stage(process, result)
    tokens = stage.tokens
    assert tokens is not None and stage.errors_by_kind == {}
    assert tokens.token_sources == {"server tokenize": stage.requests}
    body = {"model": MODEL_NAME, "messages": messages, "max_tokens": 16, "ignore_eos": True, **greedy}
    answer = post_json(f"{server}/v1/chat/completions", body)["choices"][0]["message"]["content"]
    counted = len(post_json(f"{server}/tokenize", {"content": answer, "add_special_tokens": False})["tokens"])
    assert tokens.output_tokens == counted * stage.requests
    check = tokens.server_check
    assert check is not None and check.comparisons[0].figure == "outputTokens"
    assert check.comparisons[0].server % 16 == 0  # what the server generated: 16 tokens an answer


def test_open_loop_completions_from_a_dataset_with_per_row_max_tokens(tmp_path: Path, server: str) -> None:
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text(
        json.dumps({"prompt": " no ka li", "max_tokens": 5}) + "\n" + json.dumps({"prompt": " per", "max_tokens": 5})
    )
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": {
                "protocol": "openai-completions",
                "modelName": MODEL_NAME,
                "generation": {"maxTokens": 99, "ignoreEos": True, "extraBody": {"cache_prompt": False}},
            },
            "payload": {"prompts": {"dataset": {"file": str(dataset)}}},
            "load": {"openLoop": {"rate": 40, "arrival": "poisson"}, **SHORT},
            "seed": 3,
        },
    )
    stage = only_stage(process, result)
    tokens = stage.tokens
    assert tokens is not None and stage.requests > 60 and stage.errors_by_kind == {}
    assert tokens.output_tokens == 5 * stage.requests  # the rows' max_tokens, not generation.maxTokens
    assert tokens.token_sources == {"usage": stage.requests}
    # Corrected time to first token counts from the intended send: never below the time from the send.
    for p in (50, 90, 99):
        corrected, service = tokens.ttft.at(p), tokens.ttft_service.at(p)
        assert corrected is not None and service is not None
        assert corrected.value_ms >= service.value_ms
    # Late sends are accounted for (whether any are late depends on how busy the machine is).
    late = stage.late_sends
    assert late is not None and late.count == late.no_free_connection + late.generator_lag


def test_an_answer_not_streamed_when_not_asked_is_one_arrival(tmp_path: Path, server: str, model: Path) -> None:
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": {
                "protocol": "openai-chat",
                "modelName": MODEL_NAME,
                "generation": {"maxTokens": 8, "ignoreEos": True, "stream": False},
            },
            "payload": {
                "prompts": {
                    "synthetic": {"inputTokens": {"mean": 16}},
                    "tokenizer": {"file": str(model.parent / "tokenizer.json")},
                }
            },
            "load": {"closedLoop": {"concurrency": 2}, **SHORT},
        },
    )
    stage = only_stage(process, result)
    tokens = stage.tokens
    assert tokens is not None and stage.errors_by_kind == {}
    assert tokens.output_tokens == 8 * stage.requests
    assert tokens.ttft.count == stage.requests
    assert tokens.itl_chunk.count == 0  # the whole answer arrived at once: no gaps between tokens to time
    assert tokens.per_token_unknown == 0 and tokens.per_token_exact == 0


def test_a_tokenizer_of_another_model_is_refused_before_any_load(tmp_path: Path, server: str) -> None:
    other = tmp_path / "other"
    make_tiny_llm(other, TinyLlmShape(vocab=1024), seed=11)
    process, result = run_loadgen(
        tmp_path,
        {
            "url": server,
            "request": {"protocol": "openai-chat", "modelName": MODEL_NAME},
            "payload": {
                "prompts": {
                    "synthetic": {"inputTokens": {"mean": 16}},
                    "tokenizer": {"file": str(other / "tokenizer.json")},
                }
            },
            "load": {"closedLoop": {"concurrency": 1}, **SHORT},
        },
    )
    assert process.returncode == 1
    assert result is not None and result.stages == []
    assert result.error is not None
    assert result.error.startswith(
        "payload.prompts.tokenizer does not match the served model: a 32-token probe from it became "
    )
    assert result.error.endswith("give the model's own tokenizer.json")
