"""A real vLLM (its CPU build) serving the deterministic reasoning model made here, started once for this
module with the command line Kaliper's vllm runtime writes: the server's own record of its settings, its
reasoning parser's streams measured exactly (every answer is <think>, six thinking words, </think>, then
the answer's words), and its own counters and gauges beside the generator's figures."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.manifests.modeldeployment import build_deployment
from kaliper.metrics.prometheus import PrometheusMetrics
from kaliper.metrics.workload_query import read_workload
from kaliper.report.schema import StageResult
from kaliper.runtimes.vllm import VLLM_SERVE_FLAGS
from kaliper.serving.hf_llm import ANSWER_WORDS, REASONING_WORDS, make_reasoning_model
from tests.support.controlplane import wait_for
from tests.support.loadgen_run import run_loadgen
from tests.support.prometheus import prometheus
from tests.support.runtimes import help_flags
from tests.support.vllm import vllm_server, vllm_spec

# 2 s windows: under eight users on two cores vLLM answers its /metrics up to 1.5 s after a window's edge (seen in
# a quiet phase), and a reading answered past the next edge is no reading of its own.
SHORT = {"warmup": "2s", "minDuration": "4s", "maxDuration": "4s", "stopping": {"window": "2s"}}
SETTINGS = {"slots": 2, "maxModelLength": 512, "maxBatchedTokens": 1024, "prefixCaching": True}
SETTINGS |= {"reasoningParser": "deepseek_r1", "dtype": "float32"}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_reasoning_model(tmp_path_factory.mktemp("models") / "reasoning-hf")


@pytest.fixture(scope="module")
def served(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    workdir = tmp_path_factory.mktemp("vllm")
    with vllm_server(vllm_spec(model, "reasoning", **SETTINGS), workdir) as base:
        yield base, workdir / "vllm.log"


def stage_of(tmp_path: Path, base: str, request: dict, payload: dict, concurrency: int = 4) -> StageResult:
    config = {"url": base, "request": request, "payload": payload, "load": {"closedLoop": {"concurrency": concurrency}}}
    config["load"] |= SHORT
    process, result = run_loadgen(tmp_path, config, favoured=True)  # the gauges need every user's request sent
    assert process.returncode == 0, process.stderr
    assert result is not None and result.ok and len(result.stages) == 1
    return result.stages[0]


def test_every_setting_the_runtime_writes_is_one_the_server_took(served: tuple[str, Path], model: Path) -> None:
    base, log = served
    said = re.search(r"non-default args: (\{.*\})", log.read_text(errors="replace"))
    assert said is not None, "vLLM logs the arguments it was given at start"
    taken = ast.literal_eval(said.group(1))
    for varying in ("host", "port", "model", "model_tag"):
        taken.pop(varying)
    assert taken == {
        "enable_prompt_tokens_details": True,
        "dtype": "float32",
        "max_model_len": 512,
        "enforce_eager": True,
        "served_model_name": ["reasoning"],
        "reasoning_parser": "deepseek_r1",
        "enable_prefix_caching": True,
        "max_num_batched_tokens": 1024,
        "max_num_seqs": 2,
    }
    models = urllib.request.urlopen(f"{base}/v1/models", timeout=10).read().decode()
    assert '"id":"reasoning"' in models and '"max_model_len":512' in models
    metrics = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    info = re.search(r"^vllm:cache_config_info\{(.*)\} 1\.0$", metrics, re.MULTILINE)
    assert info is not None
    assert 'enable_prefix_caching="True"' in info.group(1)
    assert 'kv_cache_memory_bytes="1073741824"' in info.group(1)  # VLLM_CPU_KVCACHE_SPACE=1 without a limit


def test_the_thinking_is_measured_as_tokens_and_the_answer_after_it(
    tmp_path: Path, served: tuple[str, Path], model: Path
) -> None:
    base, _ = served
    stage = stage_of(
        tmp_path,
        base,
        {"protocol": "openai-chat", "modelName": "reasoning", "generation": {"maxTokens": 16}},
        {
            "prompts": {
                "synthetic": {"inputTokens": {"mean": 300}, "count": 8, "sharedPrefixRatio": 0.5},
                "tokenizer": {"file": str(model / "tokenizer.json")},
            }
        },
        concurrency=8,
    )
    tokens = stage.tokens
    assert tokens is not None and stage.requests > 4 and stage.errors_by_kind == {}
    answers = stage.requests
    # Every answer: 16 tokens by the server's usage, of them 6 thinking. <think> and </think> stream no chunk,
    # so an answer is at most 6 thinking chunks and 8 answer chunks (fewer where the server, behind, sent two
    # tokens' text in one chunk).
    assert len(REASONING_WORDS) == 6 and len(ANSWER_WORDS) == 4
    assert (tokens.output_tokens, tokens.reasoning_tokens) == (16 * answers, 6 * answers)
    assert (tokens.reasoning_requests, tokens.reasoning_sources) == (answers, {"usage": answers})
    assert 0 < tokens.chunks <= 14 * answers
    # One time to first token and one time to first output token (the answer's) per answer.
    assert tokens.ttft.count == tokens.ttfot.count == answers
    # The server's own counters over the same interval, and its gauges: two slots (max-num-seqs) for eight users.
    check = tokens.server_check
    assert check is not None and check.source == "vLLM"
    # No mean gap per token: <think> and </think> are tokens without a chunk, so chunks and tokens differ and
    # no gap is split among tokens on a guess.
    # (The whole check and the stage's timing in the message: once, in a quiet phase, meanTtftMs was missing.)
    said = f"{check.model_dump_json()}; measured {stage.measured_s} s, {stage.requests} requests"
    assert [c.figure for c in check.comparisons] == ["outputTokens", "inputTokens", "meanTtftMs"], said
    # (An answer the server, behind, sent in a single chunk has no gap to split at all.)
    assert (tokens.per_token_exact, tokens.per_token_divided) == (0, 0) and 0 < tokens.per_token_unknown <= answers
    # The slots are judged on the seconds the server counts its requests running, per second of the interval (the
    # time-weighted mean of requests running): between one and two. Its running gauge, read once a second, never
    # above two; a reading can fall between two steps (a clean-clone quiet phase read 0 and 1 four times over, the
    # time-weighted mean 1.54), so it is not asked to show two.
    load = tokens.server_load
    assert load is not None and load.source == "vLLM" and load.running_max is not None and load.running_max <= 2
    assert load.running_time_weighted is not None and 1.0 < load.running_time_weighted <= 2.1, load
    # Half of every prompt is shared: at least one 128-token block of it comes from the prefix cache, which the
    # server's counters and its usage both say.
    assert load.prefix_cache_hit_rate is not None and load.prefix_cache_hit_rate > 0
    assert tokens.cached_input_tokens is not None and tokens.cached_input_tokens >= 128 * answers


def test_completions_carry_the_thinking_as_text_and_nothing_is_reasoning(
    tmp_path: Path, served: tuple[str, Path], model: Path
) -> None:
    """The reasoning parser works on chat completions only: a completions answer streams <think>, the thinking
    and </think> as text, so there the first token is the first output token."""
    base, _ = served
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "ka li per"}\n')
    stage = stage_of(
        tmp_path,
        base,
        {"protocol": "openai-completions", "modelName": "reasoning", "generation": {"maxTokens": 16}},
        {"prompts": {"dataset": {"file": str(tmp_path / "prompts.jsonl")}}},
        concurrency=2,
    )
    tokens = stage.tokens
    assert tokens is not None and stage.errors_by_kind == {}
    assert (tokens.output_tokens, tokens.reasoning_requests, tokens.reasoning_tokens) == (16 * stage.requests, 0, 0)
    assert tokens.reasoning_sources == {}
    # The first output token is the first token: the same distribution.
    assert tokens.ttfot.histogram == tokens.ttft.histogram and tokens.ttft.count == stage.requests


PARSE = """
import json, sys
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser

root = FlexibleArgumentParser()
ServeSubcommand().subparser_init(root.add_subparsers(dest="subcommand"))
parsed = vars(root.parse_args(["serve", *json.loads(sys.argv[1])]))
print(json.dumps({name: parsed[name] for name in json.loads(sys.argv[2])}))
"""


def test_a_pods_command_line_is_one_the_real_vllm_parses_to_the_settings_asked(vllm_program: Path) -> None:
    """On a cluster vLLM runs from its upstream GPU image, which cannot run here: the pod's command line (for
    the same version) goes through that version's own argument parser instead."""
    spec = ModelDeploymentSpec.model_validate(
        {
            "model": {"pvc": {"claimName": "models", "path": "qwen"}, "name": "qwen"},
            "runtime": {"type": "vllm"},
            "resources": {"gpu": {"count": 4}},
            "llm": {"slots": 64, "maxModelLength": 8192, "maxBatchedTokens": 4096, "tensorParallel": 2}
            | {"gpuMemoryUtilization": 0.85, "dtype": "bfloat16", "prefixCaching": False, "reasoningParser": "qwen3"},
        }
    )
    container = build_deployment("qwen", "ml", "u", spec, "kaliper:test")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["vllm", "serve"]
    names = ["model_tag", "served_model_name", "host", "port", "tensor_parallel_size", "pipeline_parallel_size"]
    names += ["max_num_seqs", "max_model_len", "max_num_batched_tokens", "gpu_memory_utilization", "dtype"]
    names += ["enable_prefix_caching", "reasoning_parser"]
    python = vllm_program.parent / "python"
    parsed = subprocess.run(
        [str(python), "-c", PARSE, json.dumps(container["args"]), json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert parsed.returncode == 0, parsed.stderr[-2000:]
    assert json.loads(parsed.stdout.strip().splitlines()[-1]) == {
        "model_tag": "/models/source/qwen",
        "served_model_name": ["qwen"],
        "host": "0.0.0.0",
        "port": 8000,
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 2,
        "max_num_seqs": 64,
        "max_model_len": 8192,
        "max_num_batched_tokens": 4096,
        "gpu_memory_utilization": 0.85,
        "dtype": "bfloat16",
        "enable_prefix_caching": False,
        "reasoning_parser": "qwen3",
    }


def test_the_flags_kaliper_knows_are_the_pinned_vllms_own(vllm_program: Path) -> None:
    """engineArgs and runtime.args are checked against this list before any trial (kaliper.runtimes.vllm)."""
    assert help_flags([str(vllm_program), "serve", "--help=all"], indent=2) == VLLM_SERVE_FLAGS


def test_its_workload_metrics_are_what_kaliper_workload_fits(served: tuple[str, Path]) -> None:
    """`kaliper workload`'s reading of vLLM's own series (names, labels, buckets) through a real Prometheus
    scraping this vLLM: twelve requests of known prompts, each answer's usage the truth."""
    base, _ = served
    with prometheus([base.removeprefix("http://")]) as prom:
        client = PrometheusMetrics(prom)
        # Scraped before the requests: what the server counted earlier (the other tests) is in no window.
        finished = 'sum(vllm:request_success_total{model_name="reasoning"})'
        wait_for(lambda: client.scalar(finished, time.time()) is not None, timeout=60, interval=0.2)
        before = client.scalar(finished, time.time())
        started = time.time()
        usages = []
        for i in range(12):
            words = " ".join(["ka li per"] * (10 if i % 2 else 60))
            body = {"model": "reasoning", "prompt": f"{i} {words}", "max_tokens": 16}
            request = urllib.request.Request(
                f"{base}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            usages.append(json.loads(urllib.request.urlopen(request, timeout=60).read())["usage"])
        wait_for(lambda: client.scalar(finished, time.time()) == (before or 0) + 12, timeout=30, interval=0.5)
        fit = read_workload(client, 'model_name="reasoning"', time.time() - started + 5, time.time())
    prompts = [u["prompt_tokens"] for u in usages]
    assert fit.requests == 12 and fit.replicas == 1
    assert fit.input_tokens.mean == pytest.approx(sum(prompts) / 12)
    assert fit.output_tokens.mean == 16 and {u["completion_tokens"] for u in usages} == {16}
    # vLLM's buckets (1, 2, 5, 10, 20, 50, 100, 200, ... up to max-model-len 512): the occupied ones bound the
    # lengths, 16 answer tokens in 11-20.
    assert (fit.output_tokens.smallest, fit.output_tokens.largest) == (11, 20)
    edges = [b.high for b in fit.input_tokens.buckets]
    assert edges == [1, 2, 5, 10, 20, 50, 100, 200, 500, None]
    # The prefix cache's hits over its queries: the cached share of the prompts' tokens, as usage says.
    cached = sum((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0 for u in usages)
    assert fit.prefix_hit_share == pytest.approx(cached / sum(prompts))
