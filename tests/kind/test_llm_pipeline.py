"""The LLM loop on the real cluster. A ModelOptimization quantizes a GGUF chat model on a PersistentVolumeClaim in
a Job of Kaliper's image (llama.cpp's llama-quantize, then llama-server measuring the candidate beside the
original under the target's CPU limit); its follow-ups serve the chosen file with llama-server in two
replicas and profile it under two CPU limits. The tier's Prometheus scrapes the server pods' metrics every 5 s
(found by their prometheus.io annotations), and each trial's server load comes from those scrapes of both
replicas. The same ProfileRun under `kaliper run` on this machine reaches the same decisions."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kaliper.report.optimization import OptimizationReport
from kaliper.report.schema import ProfileReport
from kaliper.serving.tiny_llm import demo_shape, make_tiny_llm
from tests.support.controlplane import fresh_namespace
from tests.support.kind_cluster import KindCluster
from tests.support.kind_operator import Operator, local_claim, run_report, wait_for_optimization, wait_for_phase
from tests.support.paths import KALIPER

PROMPTS = [
    "Write a haiku about snow.",
    "Why is the sky blue?",
    "Name three prime numbers.",
    "Describe a harbour at dawn.",
]
DATASET = {"configMap": {"name": "prompts", "key": "prompts.jsonl"}}
SERVING = {
    "runtime": {"type": "llamacpp"},
    "replicas": 2,
    "resources": {"requests": {"memory": "256Mi"}, "limits": {"memory": "256Mi"}},
    "llm": {"slots": 2, "contextSize": 2048},
}
# At 100m a replica gets 10 ms of CPU per 100 ms CFS period: once a stream has used it, the next token waits
# out the rest of the period (~90 ms), and at a few tenths of a millisecond of CPU a token that is one gap in
# a few dozen, far above 1%. At 600m a stream of this model needs less than its limit and its gaps stay at a
# millisecond or two. Whatever the machine, 100m misses an ITL p99 of 50 ms and 600m meets it: the best
# configuration is cpu=600m (two replicas of 600m fit the machine's two cores beside the operator and the load
# generator). Measured here: ITL p99 86 ms against 1.6 ms.
PROFILE = {
    "request": {"protocol": "openai-chat", "generation": {"maxTokens": 32, "ignoreEos": True}},
    "payload": {"prompts": {"dataset": DATASET}},
    # Over 12 s measured, every replica (found within 5 s of starting) is scraped inside the window. The
    # stopping rule only measures on while the SLO is undecided (its stability and width tests are as loose as
    # they go): a closed loop ends with its two requests in flight, and a trial slowed by a busy machine to under
    # 200 answers in 12 s cannot tell whether they would have missed p99 (CI once judged 600m Inconclusive).
    "load": {
        "closedLoop": {"concurrency": 2},
        "warmup": "2s",
        "minDuration": "12s",
        "maxDuration": "30s",
        "stopping": {"window": "2s", "stableWindows": 2, "tolerance": 1, "maxRelativeCiWidth": 1, "metric": "itl"},
    },
    "sweep": {"cpu": ["100m", "600m"]},
    "slo": {"latency": [{"metric": "itl", "percentile": 99, "max": "50ms"}]},
    # Each configuration answers the prompts once after its load, greedily, held to the 600m one's answers: the
    # same file behind both, so they agree on every prompt.
    "quality": {
        "dataset": DATASET,
        "scorer": "agreement",
        "original": {"cpu": "600m"},
        "rows": 4,
        "maxTokens": 8,
        "floor": {"min": 0.5},
    },
    "cost": {"perCoreHour": 0.04},
    "readyTimeout": "3m",
}
OPTIMIZATION = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ModelOptimization",
    "metadata": {"name": "small-llm"},
    "spec": {
        "model": {
            "source": {"pvc": {"claimName": "models", "path": "small.gguf"}, "name": "small"},
            "framework": "gguf",
        },
        "passes": {"ggufQuantization": {"types": ["Q8_0"]}},
        "evaluator": {
            # This test is about the pipeline, not the noise rule (tests/optimize/test_gguf.py): with 8 samples
            # of sub-millisecond tokens on a busy node, the original's twin alone differed by up to 36% (CI),
            # and Q8_0, which beat the F32 original by 33-40% on a quiet node, once read slower on a busy one.
            # Q8_0 may be up to 90% slower, so the choice depends neither on that coin toss nor on how much
            # faster Q8_0 is on another CPU.
            "generation": {
                "dataset": DATASET,
                "prompts": 4,
                "maxTokens": 16,
                "rounds": 2,
                "minAgreement": 0,
                "minImprovementPercent": -90,
            }
        },
        "target": {"cpu": "1"},
        "output": {"pvc": {"claimName": "models", "path": "quantized"}},
        "followUp": {
            "deployment": {"name": "small-llm", "template": SERVING},
            "profileRun": {"name": "small-llm-load", "template": PROFILE},
        },
    },
}


@pytest.fixture(scope="module")
def pipeline(
    cluster: KindCluster, operator: Operator, request: pytest.FixtureRequest
) -> Iterator[tuple[str, Path, dict]]:
    """The optimization applied and finished: (namespace, the claim's folder, the optimization object)."""
    for namespace in fresh_namespace(cluster.kubectl, request, "n"):
        folder = cluster.shared / "volumes" / namespace
        make_tiny_llm(folder, demo_shape(), name="small")
        prompts = folder / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
        with local_claim(cluster, namespace, folder):
            cluster.kubectl("create", "configmap", "prompts", f"--from-file=prompts.jsonl={prompts}", "-n", namespace)
            cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(OPTIMIZATION))
            yield namespace, folder, wait_for_optimization(cluster, namespace, "small-llm")


def test_the_quantized_model_is_chosen_in_a_job_and_its_follow_ups_deploy_it(
    cluster: KindCluster, pipeline: tuple[str, Path, dict]
) -> None:
    namespace, folder, body = pipeline
    status = body["status"]
    assert status["phase"] == "Succeeded", json.dumps(status)[-3000:]
    assert status["followUp"] == {"deploymentName": "small-llm", "profileRunName": "small-llm-load"}
    report = OptimizationReport.model_validate_json((folder / "quantized" / "report.json").read_text())
    assert [c.id for c in report.candidates] == ["q8_0"]
    (q8,) = report.candidates
    assert q8.status == "Succeeded" and q8.latency is not None and q8.latency.runs == 4 * 2  # prompts x rounds
    assert q8.model_size_bytes is not None and q8.model_size_bytes < (folder / "small.gguf").stat().st_size
    chosen = folder / "quantized" / "best" / "model.gguf"
    assert chosen.read_bytes()[:4] == b"GGUF"
    deployment = cluster.kubectl.json("get", "modeldeployment", "small-llm", "-n", namespace)
    assert deployment["spec"]["model"]["pvc"] == {"claimName": "models", "path": "quantized/best/model.gguf"}
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == body["metadata"]["uid"]


def test_the_follow_up_profile_reads_both_replicas_load_from_prometheus_and_decides_as_kaliper_run(
    cluster: KindCluster, pipeline: tuple[str, Path, dict], tmp_path: Path
) -> None:
    namespace, folder, _ = pipeline
    status = wait_for_phase(cluster, namespace, "small-llm-load", "Succeeded", timeout=600)
    report = run_report(cluster, namespace, "small-llm-load")
    for trial in report["trials"]:
        load = trial["stage"]["tokens"]["serverLoad"]
        assert (load["source"], load["readFrom"]) == ("llama.cpp", "prometheus"), trial["parameters"]
        # Both replicas read, each scraped inside the 12 s window (at 5 s: how many times is Prometheus's timing
        # on a busy machine, once seen at 1). Two slots each: neither ever held more than two sequences, and two
        # users never left a request waiting for a slot.
        assert (load["pods"], load["samples"] >= 1) == (2, True)
        assert 0 <= load["runningMax"] <= 4 and load["waitingMax"] == 0.0
        assert trial["stage"]["tokens"]["outputTokens"] == 32 * trial["stage"]["requests"]

    # The same run on this machine: the chosen file and the prompts from where kaliper run reads them.
    deployment = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "small-llm"},
        "spec": {**SERVING, "model": {"file": str(folder / "quantized" / "best" / "model.gguf"), "name": "small"}},
    }
    run = copy.deepcopy(PROFILE)
    run["payload"]["prompts"]["dataset"] = {"file": str(folder / "prompts.jsonl")}
    run["quality"]["dataset"] = {"file": str(folder / "prompts.jsonl")}
    manifest = tmp_path / "llm.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                deployment,
                {
                    "apiVersion": "kaliper.dev/v1alpha1",
                    "kind": "ProfileRun",
                    "metadata": {"name": "small-llm-load"},
                    "spec": {**run, "target": {"deploymentRef": {"name": "small-llm"}}},
                },
            ]
        )
    )
    out = tmp_path / "report"
    # As in the cluster, the other work on this machine (the cluster's own processes) is not the run's to judge. At nice
    # -10 (its servers and load generator too), as tests/support/local_run.py favours a run: beside a cold build
    # (a background build of kind, Prometheus and Argo CD's health checker) the 600m trial made 82 answers
    # in its 30 s, too few to bound a p99 with its two requests in flight at the end: Inconclusive.
    process = subprocess.run(
        [str(KALIPER), "run", str(manifest), "--output-dir", str(out), "--ignore-other-work"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=lambda: os.nice(-10),
    )
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-2000:]
    local = ProfileReport.model_validate_json((out / "report.json").read_text())

    assert [(t["parameters"]["cpu"], t["sloVerdict"]) for t in status["trials"]] == [
        ("100m", "NotMet"),
        ("600m", "Met"),
    ], [c["observed"] for t in report["trials"] for c in t["slo"]]
    assert [(t.parameters["cpu"], t.slo_verdict) for t in local.trials] == [("100m", "NotMet"), ("600m", "Met")], [
        c.observed for t in local.trials for c in t.slo
    ]
    # Both trials ran to the end with their servers alive (a replica that died under the load fails its trial,
    # and the run's verdict with it: the message says why).
    assert [(t.status, t.message) for t in local.trials] == [("Succeeded", None)] * 2, local.warnings
    assert (status["verdict"], local.verdict) == ("Met", "Met")
    assert status["best"]["parameters"]["cpu"] == "600m" and status["best"]["certainty"] == "Clear"
    best = next(t for t in local.trials if t.index == local.best_trial)
    assert best.parameters["cpu"] == "600m" and local.choice is not None and local.choice.certainty == "Clear"
    assert status["best"]["costPerMillionOutputTokens"] > 0 and best.cost_per_million_output_tokens is not None
    # Quality asked on each path by each configuration's trial, after its load, from the real llama-server.
    for rows in (report["configurations"], [r.model_dump(by_alias=True) for r in local.configurations]):
        scores = {r["parameters"]["cpu"]: (r["quality"]["correct"], r["quality"]["verdict"]) for r in rows}
        assert scores == {"100m": (4, "Held"), "600m": (4, "Held")}
