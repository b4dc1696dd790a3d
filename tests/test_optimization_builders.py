"""The optimizer Job and the follow-ups, as the operator would apply them: literal manifests."""

from __future__ import annotations

import pytest
import yaml

from kaliper.api.modeloptimization import ChosenModel, ModelOptimizationSpec
from kaliper.manifests.modeldeployment import BuildError
from kaliper.manifests.modeloptimization import build_follow_up, build_optimizer
from kaliper.optimize.followups import chosen_source, deployment_spec, profile_run_spec

OWNER = {"metadata": {"name": "iris-opt", "namespace": "ml", "uid": "u-1", "labels": {"kaliper.dev/pipeline": "iris"}}}
OWNED_BY = [
    {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "name": "iris-opt",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
]


def spec(**changes: object) -> ModelOptimizationSpec:
    base = {
        "model": {
            "source": {"pvc": {"claimName": "models", "path": "iris/model.joblib"}},
            "framework": "sklearn",
            "inputs": [{"name": "float_input", "shape": [-1, 4]}],
        },
        "passes": {"conversion": {}, "quantization": {}},
        "evaluator": {
            "accuracy": {"dataset": {"configMap": {"name": "iris-eval", "key": "rows.jsonl"}}, "maxDegradation": 0.01}
        },
        "target": {"cpu": "1500m"},
        "output": {"pvc": {"claimName": "models", "path": "iris/optimized"}},
    }
    return ModelOptimizationSpec.model_validate({**base, **changes})


def labels(role: str) -> dict[str, str]:
    return {
        "kaliper.dev/modeloptimization": "iris-opt",
        "kaliper.dev/role": role,
        "app.kubernetes.io/managed-by": "kaliper",
    }


def test_the_optimizer_job_runs_under_the_target_cpu_with_the_claim_mounted() -> None:
    config, account, role, binding, job = build_optimizer(OWNER, spec(), "kaliper:1")
    assert config["metadata"] == {
        "name": "iris-opt-optimize",
        "namespace": "ml",
        "labels": labels("optimizer-config"),
        "ownerReferences": OWNED_BY,
    }
    assert yaml.safe_load(config["data"]["results.yaml"])["metadata"]["name"] == "iris-opt-result"
    manifest = yaml.safe_load(config["data"]["manifest.yaml"])
    assert manifest["metadata"] == {"name": "iris-opt", "namespace": "ml"}
    assert manifest["spec"]["output"] == {"pvc": {"claimName": "models", "path": "iris/optimized"}, "keep": 3}
    assert [account["kind"], role["kind"], binding["kind"]] == ["ServiceAccount", "Role", "RoleBinding"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]
    assert job["metadata"]["name"] == "iris-opt-optimize"
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "iris-opt-optimize"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "fsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["command"] == [
        "python",
        "-m",
        "kaliper.optimize",
        "/etc/kaliper/manifest.yaml",
        "--model",
        "/models/iris/model.joblib",
        "--output",
        "/output/iris/optimized",
        "--artifact-prefix",
        "pvc://models/iris/optimized",
        "--publish",
        "/etc/kaliper/results.yaml",
        "--dataset",
        "/etc/kaliper/dataset/rows.jsonl",
    ]
    assert container["resources"] == {"requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}
    # The model's claim is the output's: one volume, mounted read-only where the model is read.
    assert container["volumeMounts"] == [
        {"name": "config", "mountPath": "/etc/kaliper", "readOnly": True},
        {"name": "output", "mountPath": "/output"},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "output", "mountPath": "/models", "readOnly": True},
        {"name": "dataset", "mountPath": "/etc/kaliper/dataset", "readOnly": True},
    ]
    assert pod["volumes"] == [
        {"name": "config", "configMap": {"name": "iris-opt-optimize"}},
        {"name": "output", "persistentVolumeClaim": {"claimName": "models"}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "dataset", "configMap": {"name": "iris-eval"}},
    ]


def test_a_model_on_another_claim_or_a_url_and_a_gpu_target() -> None:
    other = spec(
        model={"source": {"pvc": {"claimName": "zoo", "path": "a.onnx"}}},
        passes={"float16": {}},
        evaluator={},
        target={"device": "gpu", "gpu": {"count": 1}},
    )
    job = build_optimizer(OWNER, other, "kaliper:1")[-1]
    pod = job["spec"]["template"]["spec"]
    assert {"name": "model", "persistentVolumeClaim": {"claimName": "zoo", "readOnly": True}} in pod["volumes"]
    assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    fetched = spec(
        model={"source": {"url": "https://models.example/r.onnx"}}, passes={"graphOptimization": {}}, evaluator={}
    )
    pod = build_optimizer(OWNER, fetched, "kaliper:1")[-1]["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["command"] == [
        "python",
        "-m",
        "kaliper.serving.fetch",
        "https://models.example/r.onnx",
        "/models/r.onnx",
    ]
    assert pod["containers"][0]["command"][5] == "/models/r.onnx"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"output": {}},
            "spec.output.pvc: on Kubernetes the optimizer keeps its models on a PersistentVolumeClaim; set output.pvc "
            "(claimName and path)",
        ),
        (
            {"model": {"source": {"file": "m.onnx"}}, "passes": {"quantization": {}}},
            "spec.model.source.file is a path on one machine; on Kubernetes use source.pvc or url",
        ),
        (
            {"evaluator": {"accuracy": {"dataset": {"file": "rows.jsonl"}, "maxDegradation": 0.01}}},
            "spec.evaluator.accuracy.dataset.file is a path on one machine; on Kubernetes give the rows as a ConfigMap "
            "key (dataset.configMap)",
        ),
    ],
)
def test_what_only_a_machine_can_run_is_refused_with_the_fix(changes: dict, message: str) -> None:
    with pytest.raises(BuildError) as error:
        build_optimizer(OWNER, spec(**changes), "kaliper:1")
    assert str(error.value) == message


def test_follow_ups_serve_the_chosen_model_with_its_threads_and_profile_it() -> None:
    chosen = ChosenModel(candidate_id="c3", settings={"intraOp": "2", "executionMode": "sequential"})
    s = spec(
        followUp={
            "deployment": {"name": "iris-fast", "template": {"resources": {"limits": {"cpu": "1"}}}},
            "profileRun": {
                "name": "iris-fast-profile",
                "template": {"payload": {"inline": "{}"}, "load": {"closedLoop": {"concurrency": 1}}},
            },
        }
    )
    assert s.follow_up is not None and s.follow_up.deployment is not None and s.follow_up.profile_run is not None
    deployment = deployment_spec(s.follow_up.deployment, chosen_source(s), chosen)
    manifest = build_follow_up(OWNER, "ModelDeployment", "iris-fast", deployment.to_manifest())
    assert manifest["metadata"] == {
        "name": "iris-fast",
        "namespace": "ml",
        "labels": {"kaliper.dev/pipeline": "iris", "kaliper.dev/modeloptimization": "iris-opt"},
        "ownerReferences": OWNED_BY,
    }
    assert manifest["spec"]["model"] == {
        "pvc": {"claimName": "models", "path": "iris/optimized/best/model.onnx"},
        "format": "onnx",
    }
    assert manifest["spec"]["threads"] == {"intraOp": 2}
    assert manifest["spec"]["resources"] == {"limits": {"cpu": "1"}}
    run = profile_run_spec(s.follow_up.profile_run, "iris-fast").to_manifest()
    assert run["target"] == {"deploymentRef": {"name": "iris-fast"}}
    assert run["payload"]["inline"] == "{}"
