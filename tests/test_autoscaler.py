"""A ModelDeployment's autoscaler: the HorizontalPodAutoscaler the operator makes (as built), the Deployment it
leaves the replicas of to it, the status that reads the autoscaler's replicas, and `kaliper run`, which has no
autoscaler, refusing one. tests/cluster/test_modeldeployment_operator.py applies it to a real API server."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.manifests.autoscaler import build_autoscaler
from kaliper.manifests.modeldeployment import build_deployment, observed_status
from kaliper.profiling.plan import Configuration, configurations, deploy_problem, sweep_problem
from tests.support.paths import KALIPER
from tests.support.specs import spec

AUTOSCALED = {
    "model": {"pvc": {"claimName": "models", "path": "iris.onnx"}},
    "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}},
    "autoscaling": {
        "minReplicas": 2,
        "maxReplicas": 8,
        "cpuUtilization": 70,
        "behavior": {
            "scaleUp": {
                "stabilizationWindowSeconds": 0,
                "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}],
            },
            "scaleDown": {"selectPolicy": "Disabled"},
        },
    },
}


def test_the_autoscaler_scales_the_deployment_of_its_name_as_written_and_is_owned_by_the_model_deployment() -> None:
    hpa = build_autoscaler("iris", "team-a", "u-1", ModelDeploymentSpec.model_validate(AUTOSCALED))
    assert hpa == {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "iris",
            "namespace": "team-a",
            "labels": {
                "app.kubernetes.io/name": "kaliper-model",
                "app.kubernetes.io/instance": "iris",
                "kaliper.dev/modeldeployment": "iris",
                "app.kubernetes.io/managed-by": "kaliper",
            },
            "ownerReferences": [
                {
                    "apiVersion": "kaliper.dev/v1alpha1",
                    "kind": "ModelDeployment",
                    "name": "iris",
                    "uid": "u-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "iris"},
            "minReplicas": 2,
            "maxReplicas": 8,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
                }
            ],
            "behavior": {
                "scaleUp": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}],
                },
                "scaleDown": {"selectPolicy": "Disabled"},
            },
        },
    }
    fixed = {key: value for key, value in AUTOSCALED.items() if key != "autoscaling"}
    assert build_autoscaler("iris", "team-a", "u-1", ModelDeploymentSpec.model_validate(fixed)) is None


def test_an_autoscaled_deployment_leaves_its_replicas_to_the_autoscaler() -> None:
    autoscaled = build_deployment("iris", "team-a", "u-1", ModelDeploymentSpec.model_validate(AUTOSCALED))
    assert "replicas" not in autoscaled["spec"]
    fixed = {**{k: v for k, v in AUTOSCALED.items() if k != "autoscaling"}, "replicas": 3}
    assert build_deployment("iris", "team-a", "u-1", ModelDeploymentSpec.model_validate(fixed))["spec"]["replicas"] == 3


def test_an_autoscaled_deployment_is_ready_at_the_replicas_its_autoscaler_asked_for() -> None:
    spec = ModelDeploymentSpec.model_validate(AUTOSCALED)
    deployment = {
        "metadata": {"generation": 3},
        "spec": {"replicas": 5},  # the autoscaler scaled it from 2 to 5
        "status": {
            "observedGeneration": 3,
            "replicas": 5,
            "readyReplicas": 3,
            "updatedReplicas": 5,
            "availableReplicas": 3,
        },
    }
    status = observed_status("iris", "team-a", 1, spec, deployment, [], "2026-12-05T10:00:00Z")
    assert (status["phase"], status["message"], status["autoscalerName"]) == (
        "Progressing",
        "3/5 replicas ready",
        "iris",
    )
    deployment["status"].update(readyReplicas=5, availableReplicas=5)
    status = observed_status("iris", "team-a", 1, spec, deployment, [], "2026-12-05T10:00:00Z")
    assert (status["phase"], status["message"]) == ("Ready", "5/5 replicas ready at http://iris.team-a.svc:80")
    # Just made: the Deployment's one replica, before the autoscaler's first pass raised it to its minimum of 2.
    new = {"metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": {"observedGeneration": 1, "replicas": 1,
           "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1}}  # fmt: skip
    status = observed_status("iris", "team-a", 1, spec, new, [], "2026-12-05T10:00:00Z")
    assert (status["phase"], status["message"]) == ("Progressing", "1/2 replicas ready")


def test_kaliper_run_refuses_an_autoscaled_deployment_with_what_to_do(tmp_path: Path) -> None:
    manifest = tmp_path / "autoscaled.yaml"
    spec = {**AUTOSCALED, "model": {"file": str(tmp_path / "iris.onnx")}}
    deployment = {"apiVersion": "kaliper.dev/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "iris"}}
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "burst"},
        "spec": {
            "target": {"deploymentRef": {"name": "iris"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
        },
    }
    manifest.write_text(yaml.safe_dump_all([{**deployment, "spec": spec}, run]))
    process = subprocess.run([str(KALIPER), "run", str(manifest)], capture_output=True, text=True, timeout=60)
    assert process.returncode == 1, process.stderr
    assert not (tmp_path / "reports").exists()
    assert (
        "autoscaling: a HorizontalPodAutoscaler scales pods on Kubernetes, and `kaliper run` has no autoscaler to "
        "rehearse; apply the manifests with kubectl to run it against the cluster's, or remove autoscaling (and set "
        "replicas) to measure fixed replicas here"
    ) in process.stderr


def test_an_autoscaled_target_is_rehearsed_on_kubernetes_but_its_replicas_are_not_swept() -> None:
    spec = ModelDeploymentSpec.model_validate(AUTOSCALED)
    assert deploy_problem([Configuration(0, {}, spec, [1.0], "concurrency")], "team-a", "kaliper:dev") is None
    swept = Configuration(0, {"replicas": "2"}, spec.model_copy(update={"replicas": 2}), [1.0], "concurrency")
    assert deploy_problem([swept], "team-a", "kaliper:dev") == (
        "spec.sweep.replicas on an autoscaled target: its autoscaler sets the replicas, between "
        "spec.autoscaling.minReplicas and maxReplicas; leave sweep.replicas out"
    )


SETTINGS = [
    {"name": "warm-spare", "minReplicas": 2},
    {"name": "lean", "cpuUtilization": 90, "behavior": {"scaleUp": {"stabilizationWindowSeconds": 30}}},
]


def test_a_sweep_of_autoscaler_settings_lays_each_over_the_targets_autoscaler() -> None:
    run = spec(sweep={"autoscaling": SETTINGS})
    target = ModelDeploymentSpec.model_validate(AUTOSCALED)
    warm, lean = configurations(run, target)
    assert (warm.parameters, lean.parameters) == ({"autoscaling": "warm-spare"}, {"autoscaling": "lean"})
    assert warm.deployment is not None and lean.deployment is not None
    assert warm.deployment.autoscaling is not None and lean.deployment.autoscaling is not None
    assert warm.deployment.autoscaling.to_manifest() == {**AUTOSCALED["autoscaling"], "minReplicas": 2}
    assert lean.deployment.autoscaling.to_manifest() == {
        "minReplicas": 2,
        "maxReplicas": 8,
        "cpuUtilization": 90,
        "behavior": {"scaleUp": {"stabilizationWindowSeconds": 30}},
    }
    assert sweep_problem(run, [warm, lean]) is None
    assert deploy_problem([warm, lean], "team-a", "kaliper:dev") is None


def test_autoscaler_settings_need_an_autoscaled_target_and_must_make_a_valid_autoscaler() -> None:
    run = spec(sweep={"autoscaling": SETTINGS})
    fixed = ModelDeploymentSpec.model_validate({k: v for k, v in AUTOSCALED.items() if k != "autoscaling"})
    assert sweep_problem(run, configurations(run, fixed)) == (
        "spec.sweep.autoscaling lays autoscaler settings over the target's spec.autoscaling, and the target has "
        "none: give its ModelDeployment spec.autoscaling (minReplicas, maxReplicas, a metric)"
    )
    too_many = spec(sweep={"autoscaling": [{"name": "ten", "minReplicas": 10}]})
    assert sweep_problem(too_many, configurations(too_many, ModelDeploymentSpec.model_validate(AUTOSCALED))) == (
        "configuration autoscaling=ten: minReplicas must not exceed maxReplicas; raise maxReplicas or lower minReplicas"
    )
