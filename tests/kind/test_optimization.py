"""ModelOptimization on the kind cluster: the operator runs the optimizer as a Job of the project's image under
the target's CPU limit, reading the model and writing the optimized ones on a PersistentVolumeClaim backed by
a local volume; the status carries the candidates, frontiers, profiles and the chosen model; the follow-ups
(a ModelDeployment of the chosen model and a ProfileRun of it) run; and examples/pipeline.yaml works as
applied."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kaliper.optimize.tiny_bert import make_tiny_bert
from kaliper.report.optimization import OptimizationReport
from kaliper.serving.examples import make_iris_pipeline
from tests.support.gitops import (
    ARGOCD_HEALTH,
    KSTATUS,
    argocd_health,
    assess,
    kstatus,
    kubectl_wait_recipes,
    run_recipe,
)
from tests.support.kind_cluster import IMAGE, KindCluster
from tests.support.kind_operator import Operator, local_claim, wait_for_optimization, wait_for_phase
from tests.support.paths import EXAMPLES

FLOAT_INPUT = [{"name": "float_input", "shape": [-1, 4], "datatype": "FP32"}]
# What ONNX Runtime fuses in the example BERT: four layers, one embedding layer.
FUSED = {"Attention": 4, "BiasGelu": 4, "EmbedLayerNormalization": 1, "SkipLayerNormalization": 8}


@pytest.fixture
def models_claim(cluster: KindCluster, cluster_namespace: str) -> Iterator[Path]:
    """The PVC `models` in the test's namespace, bound to a local PersistentVolume on a worker whose folder
    holds what `kaliper make-example-models` writes (iris/model.joblib, iris/model.onnx, iris/rows.jsonl)."""
    folder = cluster.shared / "volumes" / cluster_namespace
    make_iris_pipeline(folder)
    with local_claim(cluster, cluster_namespace, folder):
        yield folder


def events_of(cluster: KindCluster, namespace: str, name: str) -> list[str]:
    listed = cluster.kubectl.json("get", "events", "-n", namespace, f"--field-selector=involvedObject.name={name}")[
        "items"
    ]
    return [e["reason"] for e in sorted(listed, key=lambda e: e.get("firstTimestamp") or "")]


def test_a_scikit_learn_model_is_optimized_in_a_job_under_the_target_cpu(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, models_claim: Path
) -> None:
    kubectl = cluster.kubectl
    kubectl(
        "create",
        "configmap",
        "iris-eval",
        "-n",
        cluster_namespace,
        f"--from-file=rows.jsonl={models_claim / 'iris/rows.jsonl'}",
    )
    manifest = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": "iris-opt", "namespace": cluster_namespace},
        "spec": {
            "model": {
                "source": {"pvc": {"claimName": "models", "path": "iris/model.joblib"}, "format": "sklearn"},
                "framework": "sklearn",
                "inputs": FLOAT_INPUT,
            },
            "passes": {"conversion": {}, "quantization": {"mode": "dynamic"}, "threadTuning": {"intraOp": [1]}},
            "evaluator": {
                "accuracy": {
                    "dataset": {"configMap": {"name": "iris-eval", "key": "rows.jsonl"}},
                    "maxDegradation": 0.02,
                },
                "latency": {"metric": "p50", "runs": 300},
            },
            "target": {"cpu": "1"},
            "output": {"pvc": {"claimName": "models", "path": "iris/optimized"}, "keep": 2},
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def phase() -> str | None:
        return (kubectl.json("get", "modeloptimization", "iris-opt", "-n", cluster_namespace).get("status") or {}).get(
            "phase"
        )

    running: dict = {}

    def seen_running() -> bool:  # the object as it was while its Job worked (the Job may finish in seconds)
        running.update(kubectl.json("get", "modeloptimization", "iris-opt", "-n", cluster_namespace))
        return (running.get("status") or {}).get("phase") == "Running"

    kubectl.wait_for(seen_running, what="iris-opt Running")
    # While its Job works it is InProgress to kstatus (Flux's health checks); done, Current.
    assert assess(running, *KSTATUS) == ("InProgress", "optimizer Job iris-opt-optimize started")
    assert assess(running, *ARGOCD_HEALTH)[0] == "Progressing"
    body = wait_for_optimization(cluster, cluster_namespace, "iris-opt")
    assert kstatus(kubectl, cluster_namespace, "modeloptimization", "iris-opt") == ("Current", "Resource is Ready")
    finished, succeeded = kubectl_wait_recipes()["modeloptimization"]
    assert [run_recipe(kubectl, r, "iris-opt", cluster_namespace) for r in (finished, succeeded)] == [0, 0]
    assert argocd_health(kubectl, cluster_namespace, "modeloptimization", "iris-opt") == (
        "Healthy",
        body["status"]["message"],
    )
    status = body["status"]
    # The Job: the project's image, CPU request = limit = the target's, owned by the optimization.
    job = kubectl.json("get", "job", "iris-opt-optimize", "-n", cluster_namespace)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == IMAGE
    assert container["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}
    assert job["metadata"]["ownerReferences"][0]["uid"] == body["metadata"]["uid"]
    # The full report on the volume, written by the optimizer in its pod, which saw the pod's 1-CPU limit.
    report = OptimizationReport.model_validate_json((models_claim / "iris/optimized/report.json").read_text())
    assert report.target["cpuLimit"] == "1"
    assert status["phase"] == report.phase
    assert [c["id"] for c in status["candidates"]] == ["c1", "c2"]
    assert [c["passes"] for c in status["candidates"]] == [
        ["conversion", "threadTuning"],
        ["conversion", "quantization", "threadTuning"],
    ]
    # 150 labelled rows from the ConfigMap; the converted MLP agrees with scikit-learn's own predictions.
    assert status["original"]["accuracy"] == pytest.approx(0.98, abs=0.011)
    assert status["artifacts"] == "pvc://models/iris/optimized"
    assert status["profiles"][0]["model"] == "original"
    assert status["profiles"][0]["parameters"] == 266759
    assert status["phase"] == "Succeeded", json.dumps(status)[-3000:]
    chosen = status["chosen"]
    assert chosen["artifact"] == "pvc://models/iris/optimized/best/model.onnx"
    assert (models_claim / "iris/optimized/best/model.onnx").stat().st_size == chosen["modelSizeBytes"]
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "Succeeded")
    assert events_of(cluster, cluster_namespace, "iris-opt")[:1] == ["JobCreated"]
    assert "Optimized" in events_of(cluster, cluster_namespace, "iris-opt")


def test_the_bert_example_fuses_and_evaluates_on_tokenized_text_in_a_job(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, models_claim: Path
) -> None:
    """examples/modeloptimization-bert.yaml in the optimizer Job: the model and its tokenizer.json on the PVC,
    the sentence pairs from a ConfigMap. Every candidate of the exhaustive search (fusions x int8) is measured
    and the fused ones carry ONNX Runtime's counts; the follow-ups are left out here (the local test runs
    them, and the iris pipeline runs the same follow-up code in this cluster)."""
    kubectl = cluster.kubectl
    make_tiny_bert(models_claim / "tiny-bert", rows=64)
    rows = models_claim / "tiny-bert/rows.jsonl"
    kubectl("create", "configmap", "tiny-bert-eval", "-n", cluster_namespace, f"--from-file=rows.jsonl={rows}")
    manifest = yaml.safe_load((EXAMPLES / "modeloptimization-bert.yaml").read_text())
    manifest["metadata"]["namespace"] = cluster_namespace
    spec = manifest["spec"]
    del spec["followUp"]
    spec["search"] = {"strategy": "exhaustive"}
    spec["evaluator"]["latency"]["runs"] = 100
    kubectl("apply", "-f", "-", input=json.dumps(manifest))
    status = wait_for_optimization(cluster, cluster_namespace, "bert-optimize")["status"]
    report = OptimizationReport.model_validate_json((models_claim / "tiny-bert/optimized/report.json").read_text())
    assert report.target["cpuLimit"] == "1"
    assert status["phase"] == report.phase and status["message"] == report.message
    assert [(c["id"], c["passes"], c.get("fusedOperators")) for c in status["candidates"]] == [
        ("c1", ["threadTuning"], None),
        ("c2", ["quantization", "threadTuning"], None),
        ("c3", ["transformersOptimization", "threadTuning"], FUSED),
        ("c4", ["transformersOptimization", "quantization", "threadTuning"], FUSED),
    ]
    assert [c.status for c in report.candidates] == ["Succeeded"] * 4, [c.message for c in report.candidates]
    # 64 sentence pairs tokenized in the pod with the tokenizer.json beside the model; the original labelled
    # them, and the fused model (its outputs within float rounding) answers every one alike.
    assert (status["original"]["accuracy"], status["original"]["agreement"]) == (1.0, 1.0)
    assert (status["candidates"][2]["accuracy"], status["candidates"][2]["agreement"]) == (1.0, 1.0)
    # The profiles of the original and of a fused candidate: the attention's Softmax is gone from the latter.
    by_model = {p["model"]: {t["opType"] for t in p["topOperatorTypes"]} for p in status["profiles"]}
    assert "Softmax" in by_model["original"]
    fused = [model for model in by_model if model in ("c3", "c4")]
    assert len(fused) == 1, by_model
    assert "Softmax" not in by_model[fused[0]] and "SkipLayerNormalization" in by_model[fused[0]]


def test_a_spec_the_cluster_cannot_run_fails_with_the_field_and_the_fix(
    cluster: KindCluster, operator: Operator, cluster_namespace: str
) -> None:
    manifest = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": "nowhere", "namespace": cluster_namespace},
        "spec": {
            "model": {"source": {"pvc": {"claimName": "models", "path": "m.onnx"}}},
            "passes": {"graphOptimization": {}},
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    status = wait_for_optimization(cluster, cluster_namespace, "nowhere", timeout=60)["status"]
    assert status["phase"] == "Failed"
    assert status["message"] == (
        "spec.output.pvc: on Kubernetes the optimizer keeps its models on a PersistentVolumeClaim; set output.pvc "
        "(claimName and path)"
    )
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert (complete["status"], complete["reason"]) == ("False", "InvalidSpec")
    assert kstatus(cluster.kubectl, cluster_namespace, "modeloptimization", "nowhere") == ("Failed", status["message"])
    finished, succeeded = kubectl_wait_recipes()["modeloptimization"]
    assert [run_recipe(cluster.kubectl, r, "nowhere", cluster_namespace) for r in (finished, succeeded)] == [0, 1]
    assert argocd_health(cluster.kubectl, cluster_namespace, "modeloptimization", "nowhere") == (
        "Degraded",
        status["message"],
    )
    assert cluster.kubectl("get", "job", "nowhere-optimize", "-n", cluster_namespace, check=False).returncode != 0


def test_the_pipeline_example_runs_end_to_end(
    cluster: KindCluster,
    operator: Operator,
    cluster_namespace: str,
    models_claim: Path,
    prometheus_source: dict[str, str],
) -> None:
    """examples/pipeline.yaml as written (only its namespace and its trials' length changed): the
    optimization, then its follow-ups (a ModelDeployment serving the chosen model from the claim, a ProfileRun
    comparing it with the original at two CPU sizes), all owned by the optimization and labelled for the
    pipeline's Cleanup."""
    kubectl = cluster.kubectl
    documents = list(yaml.safe_load_all((EXAMPLES / "pipeline.yaml").read_text()))
    for document in documents:
        document["metadata"]["namespace"] = cluster_namespace
    # Each trial measured for 10 s instead of up to a minute, its figures read from the 5 s Prometheus: what
    # is tested is that the loop runs through.
    template = documents[0]["spec"]["followUp"]["profileRun"]["template"]
    template["load"].update({"warmup": "2s", "minDuration": "10s", "maxDuration": "10s"})
    template["metrics"] = {**template.get("metrics", {}), "prometheus": prometheus_source}
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    body = wait_for_optimization(cluster, cluster_namespace, "iris-pipeline-opt")
    status = body["status"]
    assert status["phase"] == "Succeeded", json.dumps(status)[-3000:]
    assert status["followUp"] == {"deploymentName": "iris-pipeline", "profileRunName": "iris-pipeline-size"}
    assert (models_claim / "iris/pipeline/best/model.onnx").exists()
    uid = body["metadata"]["uid"]
    deployment = kubectl.json("get", "modeldeployment", "iris-pipeline", "-n", cluster_namespace)
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == uid
    assert deployment["metadata"]["labels"]["kaliper.dev/pipeline"] == "iris"
    assert deployment["spec"]["model"]["pvc"] == {"claimName": "models", "path": "iris/pipeline/best/model.onnx"}
    run = kubectl.json("get", "profilerun", "iris-pipeline-size", "-n", cluster_namespace)
    assert run["metadata"]["ownerReferences"][0]["uid"] == uid
    assert run["spec"]["target"] == {"deploymentRef": {"name": "iris-pipeline"}}
    finished = wait_for_phase(cluster, cluster_namespace, "iris-pipeline-size", "Succeeded", timeout=900)
    # cpu 500m and 1 x the original and the optimized model: every trial served and measured.
    trials = finished["trials"]
    assert sorted((t["parameters"]["cpu"], t["parameters"]["model_variant"]) for t in trials) == [
        ("1", "optimized"),
        ("1", "original"),
        ("500m", "optimized"),
        ("500m", "original"),
    ]
    assert all(t["phase"] == "Succeeded" for t in trials), json.dumps(trials)[-3000:]
