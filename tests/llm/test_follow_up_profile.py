"""The kind LLM pipeline's follow-up ProfileRun (tests/support/llm_pipeline.py) under `kaliper run`: the file the
cluster's optimization chooses (the demo model quantized to Q8_0 by llama.cpp's llama-quantize) served by two
llama-server replicas under two CPU limits, with the prompts from a file. It reaches the decisions
tests/kind/test_llm_pipeline.py asserts of the operator: 100m misses the ITL p99 of 50 ms, 600m meets it and is
chosen, and both answer the quality prompts as the 600m one does.

Quiet (tests/support/tiers.py): the 600m trial's margin is what its replicas' CPU quota leaves once a token's
work is done, and beside the parallel phase the replicas, which share Kaliper's cgroup with the other tests'
servers, waited for a CPU for whole CFS periods."""

from __future__ import annotations

import json
from pathlib import Path

from kaliper.serving.tiny_llm import demo_shape, make_tiny_llm
from tests.support.llama import quantized
from tests.support.llm_pipeline import PROMPTS, SERVING, profile
from tests.support.local_run import run_manifests


def test_the_kind_pipelines_profile_decides_the_same_under_kaliper_run(tmp_path: Path) -> None:
    model = quantized(make_tiny_llm(tmp_path / "model", demo_shape(), name="small"), "q8_0")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    deployment = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "small-llm"},
        "spec": {**SERVING, "model": {"file": str(model), "name": "small"}},
    }
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "small-llm-load"},
        "spec": {**profile({"file": str(prompts)}), "target": {"deploymentRef": {"name": "small-llm"}}},
    }
    report, _ = run_manifests(tmp_path / "run", [deployment, run])

    assert [(t.parameters["cpu"], t.slo_verdict) for t in report.trials] == [("100m", "NotMet"), ("600m", "Met")], [
        c.observed for t in report.trials for c in t.slo
    ]
    # Both trials ran to the end with their servers alive (a replica that died under the load fails its trial,
    # and the run's verdict with it: the message says why).
    assert [(t.status, t.message) for t in report.trials] == [("Succeeded", None)] * 2, report.warnings
    for trial in report.trials:
        assert trial.replicas == 2 and trial.stage is not None and trial.stage.tokens is not None
        assert trial.stage.tokens.output_tokens == 32 * trial.stage.requests
    assert report.verdict == "Met"
    best = next(t for t in report.trials if t.index == report.best_trial)
    assert best.parameters["cpu"] == "600m" and report.choice is not None and report.choice.certainty == "Clear"
    assert best.cost_per_million_output_tokens is not None and best.cost_per_million_output_tokens > 0
    # Quality asked by each configuration's trial, after its load, from the real llama-server.
    scores = {r.parameters["cpu"]: (r.quality.correct, r.quality.verdict) for r in report.configurations if r.quality}
    assert scores == {"100m": (4, "Held"), "600m": (4, "Held")}
