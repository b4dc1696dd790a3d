"""The vllm runtime under `kaliper run`: the LLM tutorial's vLLM step (`make demo-vllm`, docs/tutorials/llm.md)
run as written, a real vLLM (its CPU build) serving the random-weight chat model made here under cgroup limits,
a fresh server per configuration, and a ProfileRun sweeping max-num-seqs (slots) that is checked against the
servers' own counters and gauges, priced per million output tokens, and chosen. And the runtime's own failures,
on manifests of this module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.report.schema import ProfileReport
from kaliper.serving.hf_llm import make_hf_chat_model
from tests.support.as_written import make_recipe, run_as_written, workspace
from tests.support.docs_site import bash_blocks
from tests.support.local_run import run_manifests
from tests.support.paths import REPO

MAX_TOKENS = 16  # the failures' manifests
DEMO_TOKENS = 32  # examples/llm/vllm.yaml: every answer exactly 32 tokens


def one_trial(model: Path) -> list[dict]:
    """A ModelDeployment and a one-trial ProfileRun of it, which the failure tests break."""
    deployment = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "chat"},
        "spec": {
            "model": {"file": str(model), "name": "chat"},
            "runtime": {"type": "vllm"},
            "resources": {"limits": {"cpu": "1", "memory": "5Gi"}},
            "llm": {"maxModelLength": 512, "prefixCaching": False},
        },
    }
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "chat-slots"},
        "spec": {
            "target": {"deploymentRef": {"name": "chat"}},
            "request": {
                "protocol": "openai-chat",
                "modelName": "chat",
                "generation": {"maxTokens": MAX_TOKENS, "ignoreEos": True},
            },
            "payload": {
                "prompts": {
                    "synthetic": {"inputTokens": {"mean": 200}, "count": 16, "sharedPrefixRatio": 0.5},
                    "tokenizer": {"file": str(model / "tokenizer.json")},
                }
            },
            "load": {
                "closedLoop": {"concurrency": 4},
                "warmup": "1s",
                "minDuration": "4s",
                "maxDuration": "4s",
                "stopping": {"window": "1s"},
            },
            "readyTimeout": "4m",
            "slo": {"latency": [{"metric": "ttft", "percentile": 50, "max": "10s"}]},
            "report": {"formats": ["json"]},
        },
    }
    return [deployment, run]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, vllm_program: Path) -> tuple[ProfileReport, str]:
    """`make demo-vllm`'s commands as written, in a folder that holds the examples and this checkout's `.venv`
    (`make vllm`, its prerequisite, is what the vllm_program fixture installs)."""
    directory = workspace(tmp_path_factory.mktemp("demo-vllm"), "examples/llm")
    finished = run_as_written(make_recipe("demo-vllm"), directory, {"KALIPER_VLLM": str(vllm_program)})
    printed = finished[-1].stdout
    report = ProfileReport.model_validate_json((directory / "kaliper-reports/chat-vllm-slots/report.json").read_text())
    return report, printed


def test_the_tutorials_vllm_step_is_make_demo_vllm() -> None:
    blocks = bash_blocks((REPO / "docs" / "tutorials" / "llm.md").read_text())
    assert ["make demo-vllm"] in blocks
    assert make_recipe("demo-vllm") == [
        ".venv/bin/kaliper make-example-models examples/local/models --only chat-hf",
        ".venv/bin/kaliper run examples/llm/vllm.yaml",
    ]


def test_each_configuration_is_served_by_its_own_vllm_with_settings_from_its_limits(
    swept: tuple[ProfileReport, str],
) -> None:
    report, stdout = swept
    assert [(t.parameters, t.status) for t in report.trials] == [
        ({"slots": "1", "concurrency": "4"}, "Succeeded"),
        ({"slots": "4", "concurrency": "4"}, "Succeeded"),
    ]
    for trial in report.trials:
        # 5 GiB less the 3.5 GiB the server holds besides; the one CPU it was pinned to (of two).
        assert trial.server_settings == {"kvCacheSpace": "1GiB", "ompThreadsBind": "1"}
        tokens = trial.stage.tokens
        assert tokens is not None and trial.stage.errors_by_kind == {}
        assert tokens.output_tokens == DEMO_TOKENS * trial.stage.requests
        assert tokens.token_sources == {"usage": trial.stage.requests}
        assert trial.resources is not None and trial.resources.source == "cgroup"
        assert trial.resources.memory_peak_bytes is not None and trial.resources.memory_peak_bytes > 2**30
        # The server's own counters over the measured interval, and its gauges.
        check = tokens.server_check
        assert check is not None and check.source == "vLLM"
        counted = {c.figure: c for c in check.comparisons}
        # The generator's side over that interval: the measured windows' answers (the graceful stop's after them).
        assert counted["outputTokens"].generator == DEMO_TOKENS * (trial.stage.requests - trial.stage.drained)
        # Prefix caching on, 64 prompts sharing half their text: the cache served prompt tokens, by the server's
        # usage and by its counters.
        assert tokens.cached_input_tokens is not None and tokens.cached_input_tokens > 0
        load = tokens.server_load
        assert load is not None and load.prefix_cache_hit_rate is not None and load.prefix_cache_hit_rate > 0
    one, four = (trial.stage.tokens.server_load for trial in report.trials)
    # max-num-seqs held, by the seconds vLLM's own clock counted its requests running and queued over the
    # interval (every moment, where its gauges are read at the five window edges only): one sequence at a time
    # with the other users queued, then several at once and none queued. One slot reads about 1: a little over
    # where consecutive requests' stamped running times overlap (measured, cause not pinned down), or where one
    # began before the interval and finished in it. Measured on one host: 1.00 running and 2.67 queued over
    # 4 s, 1.06-1.08 over 10 s; four slots 3.43 running, while the gauges read 1 at most.
    assert one.running_max == 1 and one.running_time_weighted is not None and 0.5 < one.running_time_weighted < 1.5
    assert one.waiting_time_weighted is not None and one.waiting_time_weighted > 2
    assert four.running_time_weighted is not None and four.running_time_weighted > 2
    assert four.waiting_time_weighted is not None and four.waiting_time_weighted < 0.5
    assert "trial 0 server: kvCacheSpace 1GiB, ompThreadsBind 1 (from the limits)" in stdout


def test_the_run_is_priced_per_million_output_tokens_and_chooses_more_slots(swept: tuple[ProfileReport, str]) -> None:
    report, _ = swept
    one, four = report.trials
    assert one.cost_per_million_output_tokens is not None and four.cost_per_million_output_tokens is not None
    # One CPU either way: four sequences batched make more tokens per second than one (measured 1075 against 371
    # output tokens per second on a host with AVX-512, 176 against 100 on one without), so the choice is four slots.
    assert four.cost_per_million_output_tokens < one.cost_per_million_output_tokens
    assert report.best_trial == 1 and report.verdict == "Met"


def test_its_own_failures_are_named_in_the_trials_reason(tmp_path: Path, vllm_program: Path) -> None:
    """A model folder vLLM cannot load, and a memory limit the server cannot fit in, left out by the fit check
    before it starts (its weights from the safetensors header, the KV cache it takes whole, its processes)."""
    model = make_hf_chat_model(tmp_path / "chat-hf")
    broken = tmp_path / "no-model-type"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    reasons = {}
    for name, folder, memory in (("broken", broken, "5Gi"), ("small", model, "600Mi")):
        deployment, run = one_trial(model)
        deployment["metadata"]["name"] = name
        deployment["spec"] |= {"model": {"file": str(folder), "name": name}}
        deployment["spec"]["resources"]["limits"]["memory"] = memory
        run["spec"] |= {"target": {"deploymentRef": {"name": name}}}
        run["spec"]["request"]["modelName"] = name
        env = {"KALIPER_VLLM": str(vllm_program)}
        report, _ = run_manifests(tmp_path / name, [deployment, run], env, expect=1)
        (trial,) = report.trials
        reasons[name] = (trial.status, trial.message)
    assert reasons == {
        "broken": (
            "Failed",
            "server replica 0 exited with code 1: Value error, Unrecognized model in "
            f"{broken}. Should have a `model_type` key in its config.json. [type=value_error, input_value="
            "ArgsKwargs((), {'model': ...nderer_num_workers': 1}), input_type=ArgsKwargs]",
        ),
        "small": (
            "Skipped",
            "cannot fit resources.limits.memory 600 MiB: the server needs 3,075 MiB (weights 3.3 MiB + KV cache "
            "1,024 MiB (VLLM_CPU_KVCACHE_SPACE) + vLLM 2,048 MiB), 2,475 MiB more; raise the limit, or lower the "
            "context, the slots or the KV cache's type",
        ),
    }
