"""The choice's two checks besides latency on the real cluster, with llama.cpp's llama-server in Kaliper's image.

The fit check: the operator reads the model's GGUF header on its PersistentVolumeClaim in a Job of Kaliper's
image (mounted as the server's pod mounts it), keeps its shape in the run's status, and leaves out the
configurations that cannot fit their memory limit with the arithmetic, never deploying them. One that fits by
the estimate but whose llama-server refuses its flags fails with the server's words and says that the estimate
passed it. The same sweep under `kaliper run`: tests/llm/test_engine_args.py, with the same words.

Quality in the same run: a sweep over quantizations made here with llama-quantize (f32, q8_0, q4_0) asks each
configuration the dataset's prompts after its load, held to f32's greedy answers; q4_0's drift from the first
token holds it back with its score in its row, as under `kaliper run` (tests/llm/test_quality_run.py). And a tensor
model: an iris classifier and ONNX Runtime's int8 quantization of it (tests/support/iris_int8.py), served from a
ConfigMap by Kaliper's ONNX Runtime server; the load generator's pod asks the 150 labelled rows of a dataset
ConfigMap over the Open Inference Protocol and scores accuracy, as under `kaliper run`
(tests/local/test_quality_accuracy.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kaliper.serving.tiny_llm import demo_shape, make_tiny_llm
from tests.support.controlplane import fresh_namespace
from tests.support.iris_int8 import make_models
from tests.support.kind_cluster import KindCluster
from tests.support.kind_operator import Operator, apply_objects, local_claim, run_report, wait_for_phase
from tests.support.llama import MODEL_NAME, QUALITY_PROMPTS, TINY_SHAPE, quantized, tiny_model

KV_SETS = [
    {"name": "kv-f32", "args": ["--cache-type-k", "f32", "--cache-type-v", "f32", "--flash-attn", "off"]},
    {"name": "kv-q8", "args": ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--flash-attn", "on"]},
]
DEPLOYMENT = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {"name": "tiny"},
    "spec": {
        "model": {"pvc": {"claimName": "models", "path": "tiny.gguf"}, "name": MODEL_NAME},
        "runtime": {"type": "llamacpp"},
        "resources": {"limits": {"cpu": "500m"}},
        "llm": {"contextSize": 2048},
    },
}
RUN = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ProfileRun",
    "metadata": {"name": "fit"},
    "spec": {
        "target": {"deploymentRef": {"name": "tiny"}},
        "request": {"protocol": "openai-chat", "generation": {"maxTokens": 8}},
        "payload": {"prompts": {"dataset": {"configMap": {"name": "prompts", "key": "prompts.jsonl"}}}},
        "load": {
            "closedLoop": {"concurrency": 1},
            "warmup": "1s",
            "minDuration": "3s",
            "maxDuration": "3s",
            "stopping": {"window": "1s"},
        },
        "sweep": {"memory": ["32Mi", "128Mi"], "engineArgs": KV_SETS},
        "slo": {"latency": [{"percentile": 99, "max": "30s"}]},
        "readyTimeout": "2m",
        # Every configuration at once: what these tests judge (what fits, the answers' quality) is not timing.
        "search": {"parallelism": 3},
    },
}


def test_configurations_that_cannot_fit_are_left_out_by_the_header_read_in_the_cluster(
    cluster: KindCluster, operator: Operator, request: pytest.FixtureRequest
) -> None:
    kubectl = cluster.kubectl
    for namespace in fresh_namespace(kubectl, request, "n"):
        folder = cluster.shared / "volumes" / namespace
        tiny_model(folder).rename(folder / "tiny.gguf")
        prompts = folder / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("Why is snow white?", "Count to 3.")))
        with local_claim(cluster, namespace, folder):
            kubectl("create", "configmap", "prompts", f"--from-file=prompts.jsonl={prompts}", "-n", namespace)
            apply_objects(cluster, namespace, DEPLOYMENT, RUN)
            status = wait_for_phase(cluster, namespace, "fit", "Succeeded", timeout=480)
            jobs = kubectl.json("get", "jobs", "-n", namespace, "-l", "kaliper.dev/role=model-header")["items"]
            deployments = kubectl.json("get", "modeldeployments", "-n", namespace)["items"]
            report = run_report(cluster, namespace, "fit")
        check(status, jobs, deployments)
        # Every served trial says how long its server took, from its pod's own status (whole seconds).
        startup = report["trials"][2]["startup"]
        (replica,) = startup["replicas"]
        assert startup["source"] == "pods" and replica["replica"].startswith("fit-t2-")
        assert 0 <= replica["scheduledS"] <= replica["startedS"] <= replica["readyS"] == startup["readyS"], startup


def check(status: dict, jobs: list[dict], deployments: list[dict]) -> None:
    # The header as the Job read it from the claim: the tiny model's (tests/llm/test_fit_estimate.py reads the
    # same file on this machine).
    assert status["modelHeaders"] == [
        {
            "model": "llamacpp pvc models/tiny.gguf",
            "shape": TINY_SHAPE,
        }
    ]
    assert jobs == []  # read, then deleted
    trials = [(t["parameters"], t["phase"]) for t in status["trials"]]
    assert trials == [
        ({"concurrency": "1", "engine_args": "kv-f32", "memory": "32Mi"}, "Skipped"),
        ({"concurrency": "1", "engine_args": "kv-q8", "memory": "32Mi"}, "Skipped"),
        ({"concurrency": "1", "engine_args": "kv-f32", "memory": "128Mi"}, "Succeeded"),
        ({"concurrency": "1", "engine_args": "kv-q8", "memory": "128Mi"}, "Failed"),
    ]
    f32_small, q8_small, _, q8 = status["trials"]
    assert f32_small["message"] == (
        "cannot fit resources.limits.memory 32 MiB: the server needs 58 MiB (weights 1.5 MiB + KV cache 2.0 MiB "
        "(2,048 cells x 2 layers at f32) + compute 22 MiB (batches of 512 tokens) + prompt cache 8.0 MiB "
        "(--cache-ram) + llama-server 24 MiB), 26 MiB more; raise the limit, or lower the context, the slots or "
        "the KV cache's type"
    )
    assert q8_small["message"].startswith("cannot fit resources.limits.memory 32 MiB: the server needs 38 MiB")
    assert "startTime" not in f32_small and "startTime" not in q8_small  # never deployed
    assert q8["message"].endswith("(it fits by the estimate, 62 MiB of 128 MiB: the server refused it anyway)"), q8[
        "message"
    ]
    assert "K cache type q8_0 with block size 32 does not divide n_embd_head_k=16" in q8["message"], q8["message"]
    assert [d["metadata"]["name"] for d in deployments] == ["tiny"]  # the trials' copies are gone


def test_a_quantization_whose_answers_drift_is_held_back_in_the_cluster(
    cluster: KindCluster, operator: Operator, request: pytest.FixtureRequest
) -> None:
    kubectl = cluster.kubectl
    for namespace in fresh_namespace(kubectl, request, "n"):
        folder = cluster.shared / "volumes" / namespace
        original = make_tiny_llm(folder, demo_shape(), name="f32")
        for kind in ("q8_0", "q4_0"):
            quantized(original, kind)
        prompts = folder / "prompts.jsonl"
        prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in QUALITY_PROMPTS))
        deployment = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "llm": {"contextSize": 1024}}}
        deployment["spec"]["model"] = {"pvc": {"claimName": "models", "path": "f32.gguf"}, "name": MODEL_NAME}
        variants = [
            {"name": name, "model": {"pvc": {"claimName": "models", "path": f"{file}.gguf"}, "name": MODEL_NAME}}
            for name, file in (("f32", "f32"), ("q80", "q8_0"), ("q40", "q4_0"))
        ]
        dataset = {"configMap": {"name": "prompts", "key": "prompts.jsonl"}}
        quality = {
            "dataset": dataset,
            "scorer": "agreement",
            "original": {"model_variant": "f32"},
            "rows": 20,
            "maxTokens": 16,
            "floor": {"min": 0.9},
        }
        spec = {**RUN["spec"], "sweep": {"modelVariants": variants}, "quality": quality, "slo": {"maxErrorRate": 0.01}}
        run = {**RUN, "metadata": {"name": "quality"}, "spec": spec}
        with local_claim(cluster, namespace, folder):
            kubectl("create", "configmap", "prompts", f"--from-file=prompts.jsonl={prompts}", "-n", namespace)
            apply_objects(cluster, namespace, deployment, run)
            status = wait_for_phase(cluster, namespace, "quality", "Succeeded", timeout=480)
            report = run_report(cluster, namespace, "quality")
    assert [t["phase"] for t in status["trials"]] == ["Succeeded"] * 3
    assert [(t["quality"]["rows"], t["quality"]["failed"]) for t in report["trials"]] == [(20, 0)] * 3
    rows = {r["parameters"]["model_variant"]: r for r in report["configurations"]}
    assert {name: row["quality"]["verdict"] for name, row in rows.items()} == {
        "f32": "Held",
        "q80": "Held",
        "q40": "Below",
    }
    assert rows["f32"]["quality"]["correct"] == 20  # the original agrees with itself
    assert rows["q40"]["reason"] == (
        "held back by quality: 0 of 20 rows (0.0%, 95% CI 0.0%-16.1%) against the floor 90.0%"
    )
    # Which of f32 and q8_0 is cheaper is the machine's to say; that q4_0, held back, is not chosen is not.
    chosen = [row for row in rows.values() if row.get("chosen")]
    assert len(chosen) == 1 and chosen[0]["quality"]["verdict"] == "Held", rows


def test_an_int8_classifier_below_its_accuracy_floor_is_held_back_in_the_cluster(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, tmp_path: Path
) -> None:
    kubectl, namespace = cluster.kubectl, cluster_namespace
    fp32, int8, rows = make_models(tmp_path / "models")
    kubectl(
        "create",
        "configmap",
        "iris-variants",
        f"--from-file=fp32.onnx={fp32}",
        f"--from-file=int8.onnx={int8}",
        "-n",
        namespace,
    )
    kubectl("create", "configmap", "iris-rows", f"--from-file=rows.jsonl={rows}", "-n", namespace)
    model = {"configMap": {"name": "iris-variants", "key": "fp32.onnx"}, "name": "iris"}
    limits = {"cpu": "250m", "memory": "256Mi"}
    deployment = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "iris"},
        "spec": {
            "model": model,
            "runtime": {"type": "onnxruntime"},
            "resources": {"limits": limits},
            "threads": {"intraOp": 1},
        },
    }
    variants = [
        {"name": name, "model": {**model, "configMap": {"name": "iris-variants", "key": f"{name}.onnx"}}}
        for name in ("fp32", "int8")
    ]
    quality = {
        "dataset": {"configMap": {"name": "iris-rows", "key": "rows.jsonl"}},
        "scorer": "accuracy",
        "rows": 150,
        "floor": {"min": 0.9},
    }
    spec = {
        **RUN["spec"],
        "target": {"deploymentRef": {"name": "iris"}},
        "request": {"protocol": "oip-v2", "modelName": "iris"},
        "payload": {"tensors": {"inputs": [{"name": "float_input", "shape": [-1, 4], "datatype": "FP32"}], "seed": 1}},
        "sweep": {"modelVariants": variants},
        "slo": {"maxErrorRate": 0.01},
        "quality": quality,
    }
    run = {**RUN, "metadata": {"name": "accuracy"}, "spec": spec}
    apply_objects(cluster, namespace, deployment, run)
    status = wait_for_phase(cluster, namespace, "accuracy", "Succeeded", timeout=300)
    report = run_report(cluster, namespace, "accuracy")
    assert [t["phase"] for t in status["trials"]] == ["Succeeded", "Succeeded"], status["trials"]
    assert [(t["quality"]["rows"], t["quality"]["failed"]) for t in report["trials"]] == [(150, 0), (150, 0)]
    configurations = {r["parameters"]["model_variant"]: r for r in report["configurations"]}
    float32, quantized = configurations["fp32"], configurations["int8"]
    assert (float32["quality"]["correct"], float32["quality"]["verdict"], float32.get("chosen")) == (145, "Held", True)
    assert quantized["reason"] == (
        "held back by quality: 50 of 150 rows (33.3%, 95% CI 26.3%-41.2%) against the floor 90.0%"
    )
    assert not quantized.get("chosen")
