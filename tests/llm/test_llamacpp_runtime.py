"""The llamacpp runtime under `kaliper run`: a ModelDeployment serving the tiny GGUF model made here with
llama.cpp's real llama-server, each trial's server started afresh under cgroup limits, and a ProfileRun
sweeping CPU limit x slots x concurrency that is priced per million output tokens and checked against the
server's own counters and gauges."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.report.schema import ProfileReport
from tests.support.llama import chat_request, synthetic_payload, tiny_model
from tests.support.local_run import run_manifests

MAX_TOKENS = 16
SHORT = {"warmup": "1s", "minDuration": "3s", "maxDuration": "3s", "stopping": {"window": "1s"}}


def manifests(model: Path) -> list[dict]:
    deployment = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "tiny"},
        "spec": {
            "model": {"file": str(model)},
            "runtime": {"type": "llamacpp"},
            "resources": {"limits": {"memory": "512Mi"}},
            "llm": {"contextSize": 2048},
        },
    }
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "tiny-sweep"},
        "spec": {
            "target": {"deploymentRef": {"name": "tiny"}},
            "request": chat_request(MAX_TOKENS),
            "payload": synthetic_payload({"file": str(model.parent / "tokenizer.json")}, 32, 64),
            "load": {"closedLoop": {"concurrency": 1}, **SHORT},
            "sweep": {"cpu": ["500m", "1"], "slots": [1, 2], "concurrency": [1, 2]},
            "slo": {"latency": [{"metric": "ttft", "percentile": 90, "max": "10s"}]},
            "cost": {"perCoreHour": 0.04, "perGibHour": 0.004},
            "report": {"formats": ["json", "table"]},
        },
    }
    return [deployment, run]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProfileReport, str]:
    directory = tmp_path_factory.mktemp("llamacpp-run")
    # --ignore-other-work (run_manifests): beside a cold build of Go binaries on both cores every trial would be
    # flagged busy, and the choice "Disturbed"; these tests are about serving, slots and prices.
    report, process = run_manifests(directory, manifests(tiny_model(directory / "model")))
    return report, process.stdout


def test_every_configuration_is_served_by_its_own_llama_server_and_agrees_with_its_counters(
    swept: tuple[ProfileReport, str],
) -> None:
    report, _ = swept
    assert [t.parameters for t in report.trials][:4] == [
        {"cpu": "500m", "slots": "1", "concurrency": "1"},
        {"cpu": "500m", "slots": "1", "concurrency": "2"},
        {"cpu": "500m", "slots": "2", "concurrency": "1"},
        {"cpu": "500m", "slots": "2", "concurrency": "2"},
    ]
    assert [t.status for t in report.trials] == ["Succeeded"] * 8
    for trial in report.trials:
        assert trial.stage is not None and trial.stage.tokens is not None
        tokens, requests = trial.stage.tokens, trial.stage.requests
        assert tokens.output_tokens == MAX_TOKENS * requests  # the tiny model never stops before max_tokens
        check = tokens.server_check
        assert check is not None and check.source == "llama.cpp"
        counted = {c.figure: c for c in check.comparisons}
        # The server counts an answer's tokens when it ends, as the generator does; the answers in flight at
        # the interval's two edges (at most one per user) can fall on one side only.
        users = int(trial.parameters["concurrency"])
        assert abs(counted["outputTokens"].server - tokens.output_tokens) <= MAX_TOKENS * users * 2


def test_the_servers_own_gauges_show_each_configurations_slots(swept: tuple[ProfileReport, str]) -> None:
    """llama-server ran with the slots of its configuration: with one slot each decode call carries one
    sequence, with two slots most carry both users' sequences."""
    report, _ = swept
    loads = {}
    for trial in report.trials:
        assert trial.stage is not None and trial.stage.tokens is not None
        load = trial.stage.tokens.server_load
        assert load is not None and load.source == "llama.cpp" and load.samples >= 3
        loads[(trial.parameters["cpu"], trial.parameters["slots"], trial.parameters["concurrency"])] = load
    for cpu in ("500m", "1"):
        # llama.cpp's busy slots per decode counts every decode call between the window edges: one slot decodes
        # one sequence at a time, two slots two sequences in most calls (not all: a finished answer's slot idles
        # while its user sends the next request). The queue and running gauges are read at the edges only, so
        # an edge can fall between requests (CI saw no queued request at any edge of a one-slot trial): they are
        # not asserted here (tests/profiling/test_trials.py checks what is decided from them).
        one_slot, two_slots = loads[(cpu, "1", "2")], loads[(cpu, "2", "2")]
        assert one_slot.busy_slots_per_decode == 1.0
        assert two_slots.waiting_max == 0.0
        assert two_slots.busy_slots_per_decode is not None and 1.2 < two_slots.busy_slots_per_decode <= 2
        assert loads[(cpu, "2", "1")].busy_slots_per_decode == 1.0


def test_the_run_is_priced_per_million_output_tokens_and_chooses_a_configuration(
    swept: tuple[ProfileReport, str],
) -> None:
    report, stdout = swept
    assert report.verdict == "Met" and report.best_trial is not None and report.recommendation is not None
    best = report.trials[report.best_trial]
    assert best.stage is not None and best.stage.tokens is not None and best.cost_per_hour is not None
    # cpu x 0.04 + 0.5 GiB x 0.004 per hour, over the hours a million output tokens take at the measured rate.
    cores = 0.5 if best.parameters["cpu"] == "500m" else 1.0
    assert best.cost_per_hour == pytest.approx(cores * 0.04 + 0.5 * 0.004)
    per_token = best.cost_per_hour * 1e6 / best.stage.tokens.output_tokens_per_s / 3600
    assert best.cost_per_million_output_tokens == pytest.approx(per_token)
    cheapest = min(t.cost_per_million_output_tokens for t in report.trials if t.slo_verdict == "Met")  # type: ignore[type-var]
    # The cheapest, or one whose cost is within the measurement noise of it (a tie, won on latency headroom).
    assert report.choice is not None and report.choice.certainty != "Disturbed"
    assert best.cost_per_million_output_tokens <= cheapest * (1 + (report.choice.noise or 0))
    assert "per output token" in report.choice.explanation
    assert "USD per million output tokens" in stdout
