"""The project's example trace, burst included, replayed against bench/streamtruth (an OpenAI-compatible stream of
known timing that records when every request arrived and every token left): the requests reach the server on
the trace's clock, each asking the trace's output tokens, and Kaliper's time to first token is the server's.
Quiet (tests/support/tiers.py): it compares latencies and schedules with a server's records."""

from __future__ import annotations

import collections
import json
import math
import shutil
import urllib.request
from pathlib import Path

import pytest

from kaliper.loadgen.traces import read_trace
from kaliper.report.schema import StageResult
from kaliper.serving.tiny_llm import train_tokenizer
from tests.support.groundtruth import STREAM_SOURCE, groundtruth
from tests.support.loadgen_run import run_loadgen
from tests.support.local_run import run_manifests

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "examples" / "llm" / "traces" / "burst.jsonl"
START_S, DURATION_S, SPEEDUP = 6.0, 12.0, 2.0  # trace seconds 6 to 18, the burst (10 to 12) in the middle


def server_records(base: str) -> list[dict]:
    return json.loads(urllib.request.urlopen(f"{base}/_truth/records", timeout=30).read())["records"]


def percentile(values: list[float], p: float) -> float:
    """The smallest value with p% of the values at or below it, as an HDR histogram reads a percentile."""
    return sorted(values)[math.ceil(p / 100 * len(values)) - 1]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_trace_with_a_burst_reaches_the_server_on_its_clock_and_ttft_is_the_servers(
    tmp_path: Path, processes: int
) -> None:
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(1024).save(str(tokenizer))
    # What the test knows from the trace file itself: the window's requests, their output tokens, and how
    # many the replay sends in each of its seconds.
    window = [r for r in read_trace(TRACE, "mooncake") if START_S <= r.at_s < START_S + DURATION_S]
    assert len(window) == 114
    per_second = collections.Counter(int((r.at_s - START_S) / SPEEDUP) for r in window)
    assert sorted(per_second.items()) == [(0, 7), (1, 16), (2, 69), (3, 7), (4, 7), (5, 8)]

    # A first token after 400 ms or so, as a served model's after a prompt of some thousand tokens: the
    # client's own share of the time (sending a prompt of a few kilobytes, reading the first chunk among the
    # burst's streams: 0.3 to 3 ms on one host, up to 5 ms at the p50 of a slower one, seen at 200 ms) is then
    # under 2% of it.
    with groundtruth("-ttft", "400ms", "-ttft-sigma", "0.3", "-gap", "10ms", source=STREAM_SOURCE) as base:
        config = {
            "url": base,
            "request": {"protocol": "openai-completions", "modelName": "truth", "timeout": "10s"},
            "payload": {
                "prompts": {"trace": {"file": str(TRACE), "format": "mooncake"}, "tokenizer": {"file": str(tokenizer)}}
            },
            "load": {
                "trace": {"speedup": SPEEDUP, "start": f"{START_S:g}s", "duration": f"{DURATION_S:g}s"},
                "warmup": "0s",
                "processes": processes,
            },
        }
        process, result = run_loadgen(tmp_path, config)
        assert process.returncode == 0 and result is not None, process.stderr
        records = server_records(base)

    (stage,) = result.stages
    assert stage.stop_reason == "replayed the trace (6s) and none is left in flight"
    assert (stage.requests, stage.errors_by_kind) == (114, {})
    # The trace's own rate over time in the report, window by window (then the windows its answers took).
    scheduled = [w.scheduled for w in stage.windows]
    assert scheduled[:6] == [7, 16, 69, 7, 7, 8] and set(scheduled[6:]) == {0}
    assert stage.late_sends is not None  # counted (a busy machine may delay a few sends of the burst)
    # The server's records of the stage's requests (not of the check the generator makes before the load).
    start_ns = stage.started_at.timestamp() * 1e9
    records = [r for r in records if r["arrived"] >= start_ns]
    assert len(records) == 114
    tokens = stage.tokens
    assert tokens is not None
    # Each request asked the trace's output tokens, and the server answers exactly as many as asked.
    assert tokens.output_tokens == sum(r.output_tokens for r in window) == sum(len(r["chunks"]) for r in records)

    # Arrivals by the server's clock on the trace's: the k-th to arrive against the k-th send the trace asks
    # for, from the stage's start. Counting them per second instead would move a send due 3 ms before an edge
    # to the next second (five of second 1's are due in its last 20 ms, just before the burst). Measured on a
    # slow host: 0.1 ms at least, about 1 ms at the median, 4-22 ms at most (one process in the burst).
    intended = sorted((r.at_s - START_S) / SPEEDUP for r in window)
    arrived = sorted((r["arrived"] - start_ns) / 1e9 for r in records)
    lateness = [a - i for a, i in zip(arrived, intended, strict=True)]
    assert max(abs(x) for x in lateness) < 0.1, lateness

    # Time to first token, the server's own (arrival to first token) against Kaliper's (the send to the first
    # token; and from the trace's intended send, which the burst would move if the generator fell behind).
    truth = [(r["chunks"][0] - r["arrived"]) / 1e6 for r in records]
    for p in (50, 90):
        served, corrected = tokens.ttft_service.at(p), tokens.ttft.at(p)
        assert served is not None and corrected is not None
        assert served.value_ms == pytest.approx(percentile(truth, p), rel=0.02), p
        assert corrected.value_ms == pytest.approx(percentile(truth, p), rel=0.02), p


def test_kaliper_run_replays_a_trace_named_relative_to_its_manifest(tmp_path: Path) -> None:
    """A ProfileRun with a URL target, its trace and tokenizer beside the manifest: `kaliper run` finds
    them there, and the report has the trace's rate over time and its verdict on time to first token."""
    shutil.copy(TRACE, tmp_path / "burst.jsonl")
    train_tokenizer(1024).save(str(tmp_path / "tokenizer.json"))
    with groundtruth("-ttft", "50ms", "-gap", "2ms", source=STREAM_SOURCE) as base:
        run = {
            "apiVersion": "kaliper.dev/v1alpha1",
            "kind": "ProfileRun",
            "metadata": {"name": "trace"},
            "spec": {
                "target": {"url": base},
                "request": {"protocol": "openai-chat", "modelName": "truth"},
                "payload": {
                    "prompts": {
                        "trace": {"file": "burst.jsonl", "format": "mooncake"},
                        "tokenizer": {"file": "tokenizer.json"},
                    }
                },
                "load": {"trace": {"speedup": 4, "start": "8s", "duration": "8s"}, "warmup": "0s"},
                "slo": {"latency": [{"metric": "ttft", "percentile": 90, "max": "1s"}]},
            },
        }
        report, _ = run_manifests(tmp_path, [run])
    (trial,) = report.trials
    assert trial.stage is not None and trial.parameters == {"speedup": "4"}
    # Trace seconds 8 to 16 at four times: 2 s of replay, the burst (10-12 s) from 0.5 s to 1 s of it.
    window = [r for r in read_trace(TRACE, "mooncake") if 8 <= r.at_s < 16]
    assert trial.stage.requests == len(window) == 99
    assert [w.scheduled for w in trial.stage.windows][:2] == [85, 14]
    assert trial.slo_verdict == "Met"


def test_a_replay_whose_server_holds_every_request_ends_a_timeout_after_its_last_send(tmp_path: Path) -> None:
    """A server that never answers (it holds every request for an hour): the replay's requests fail as the
    timeouts they are, nothing of them feeds a figure, and the stage ends, not at maxDuration (5 minutes)."""
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(1024).save(str(tokenizer))
    (tmp_path / "three.jsonl").write_text(
        "".join(f'{{"timestamp": {ms}, "input_length": 8, "output_length": 4}}\n' for ms in (0, 200, 400))
    )
    with groundtruth("-stall-every", "1h", "-stall-for", "1h", source=STREAM_SOURCE) as base:
        config = {
            "url": base,
            "request": {"protocol": "openai-completions", "modelName": "truth", "timeout": "2s"},
            "payload": {
                "prompts": {
                    "trace": {"file": str(tmp_path / "three.jsonl"), "format": "mooncake"},
                    "tokenizer": {"file": str(tokenizer)},
                }
            },
            "load": {"trace": {}, "warmup": "0s"},
        }
        process, result = run_loadgen(tmp_path, config)
    assert process.returncode == 0 and result is not None, process.stderr
    (stage,) = result.stages
    assert stage.stop_reason == "replayed the trace (1s) and none is left in flight"
    assert (stage.requests, stage.errors_by_kind) == (3, {"timeout": 3})
    assert stage.throughput_rps == 0 and stage.tokens is not None and stage.tokens.ttft.count == 0
    assert stage.measured_s < 10


# Two conversations and two lone requests (Mooncake's session_id and delay; input_length counts a turn's whole
# prompt, its history included): a's turns add 10 and 20 tokens to their history, b's second adds 6.
CONVERSATIONS = (
    {"session_id": "a", "timestamp": 0, "input_length": 40, "output_length": 5},
    {"timestamp": 50, "input_length": 25, "output_length": 3},
    {"session_id": "b", "timestamp": 100, "input_length": 33, "output_length": 4},
    {"session_id": "a", "delay": 300, "input_length": 55, "output_length": 5},
    {"session_id": "b", "delay": 250, "input_length": 43, "output_length": 4},
    {"session_id": "a", "delay": 200, "input_length": 80, "output_length": 5},
    {"timestamp": 400, "input_length": 27, "output_length": 3},
)


def replay_conversations(tmp_path: Path, server_flags: tuple[str, ...]) -> tuple[StageResult, list[dict]]:
    """CONVERSATIONS replayed with their turns chained, against bench/streamtruth started with `server_flags`:
    the stage and the server's records of its requests."""
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(1024).save(str(tokenizer))
    trace = tmp_path / "conversations.jsonl"
    trace.write_text("".join(json.dumps(row) + "\n" for row in CONVERSATIONS))
    with groundtruth(*server_flags, source=STREAM_SOURCE) as base:
        config = {
            "url": base,
            "request": {"protocol": "openai-chat", "modelName": "truth", "timeout": "10s"},
            "payload": {
                "prompts": {"trace": {"file": str(trace), "format": "mooncake"}, "tokenizer": {"file": str(tokenizer)}}
            },
            "load": {"trace": {"conversations": True}, "warmup": "0s"},
        }
        process, result = run_loadgen(tmp_path, config)
        assert process.returncode == 0 and result is not None, process.stderr
        (stage,) = result.stages
        start_ns = stage.started_at.timestamp() * 1e9
        return stage, [r for r in server_records(base) if r["arrived"] >= start_ns]


def test_conversations_send_each_turn_its_delay_after_the_answer_with_the_history_before_it(tmp_path: Path) -> None:
    """Replayed as conversations, a later turn reaches the server its delay after the server sent the turn
    before's last token, its prompt the session's earlier questions, the server's own answers and its new
    question; its time to first token counts from that answer's end plus the delay."""
    # The server's prefix cache (blocks of 8 words) tells whether a turn's prompt began with an earlier one's.
    flags = ("-ttft", "200ms", "-ttft-sigma", "0.3", "-gap", "10ms", "-vllm-metrics", "-block-tokens", "8")
    stage, records = replay_conversations(tmp_path, flags)
    start_ns = stage.started_at.timestamp() * 1e9

    assert stage.stop_reason == "replayed the trace (1s) and none is left in flight"
    assert (stage.requests, stage.errors_by_kind) == (7, {})
    tokens = stage.tokens
    assert tokens is not None and tokens.output_tokens == 29 == sum(len(r["chunks"]) for r in records)
    # Each prompt as the server counted its words, and how many of them began an earlier prompt (whole blocks
    # of 8): a later turn begins with the turn before's whole prompt (a's second turn its first's 40 words, then
    # the server's five-word answer and 10 words of its own; a's third the 48 words of whole blocks of the
    # second's 55), where on the trace's clock each would be a prompt of its own. (a's first turn hits 32: the
    # generator's check before the load sent that prompt.)
    by_prompt = {r["prompt"]: r for r in records}
    cached = {prompt: record["cached"] for prompt, record in sorted(by_prompt.items())}
    assert cached == {25: 0, 27: 0, 33: 0, 40: 32, 43: 32, 55: 40, 80: 48}
    # Each later turn arrived its delay after the server sent the turn before's last token (plus the answer's
    # way back and the send: under 20 ms on loopback).
    for before, after, delay_ms in ((40, 55, 300), (55, 80, 200), (33, 43, 250)):
        waited_ms = (by_prompt[after]["arrived"] - by_prompt[before]["chunks"][-1]) / 1e6
        assert delay_ms <= waited_ms < delay_ms + 20, (before, after, waited_ms)
    # The lone requests and the first turns left on the trace's clock (a's first, due as the stage starts, may
    # leave late beside other work while the users start: a late send the stage counts).
    for prompt, at_ms in ((25, 50), (33, 100), (27, 400)):
        assert (by_prompt[prompt]["arrived"] - start_ns) / 1e6 == pytest.approx(at_ms, abs=20), prompt
    # Time to first token from each intended send (the clock's, or an answer's end plus the delay): the
    # server's own, where on the trace's clock a's second turn would read 250 ms more.
    truth = sorted((r["chunks"][0] - r["arrived"]) / 1e6 for r in records)
    assert tokens.ttft.count == 7
    for p in (50, 90):
        corrected = tokens.ttft.at(p)
        assert corrected is not None
        assert corrected.value_ms == pytest.approx(percentile(truth, p), rel=0.03), p


def test_a_failed_turn_ends_its_conversation_and_counts_as_failed(tmp_path: Path) -> None:
    """Every second answer the server streams carries an error object mid-stream: the generator's check before
    the load gets the first (good), a's and b's first turns the second and fourth. Each counts as failed, feeds
    no figure, and ends its conversation: no later turn reaches the server; the lone requests are answered."""
    flags = ("-ttft", "5ms", "-gap", "1ms", "-fault-every", "2", "-fault", "error-object")
    stage, records = replay_conversations(tmp_path, flags)

    assert sorted(r["prompt"] for r in records if r["chunks"]) == [25, 27]  # answered: the lone requests, no later turn
    assert (stage.requests, stage.errors_by_kind) == (4, {"error event mid-stream": 2})
    tokens = stage.tokens
    assert tokens is not None and tokens.ttft.count == 2 and tokens.output_tokens == 3 + 3
