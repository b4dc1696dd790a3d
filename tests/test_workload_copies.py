"""A ProfileRun whose target is a Deployment that already runs: what the trials read from it, the copies they
run, and when a copy is ready, from objects shaped as the API server returns them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kaliper.api.profilerun import WorkloadReference
from kaliper.controllers.trial_moves import StartLoad, Timeouts, TrialObjectsSeen, next_move
from kaliper.manifests.workload import (
    WorkloadProblem,
    build_trial_workload,
    rollout_state,
    serving_shape,
    snapshot,
)
from kaliper.profiling.plan import apply

RUN = {"metadata": {"name": "sizing", "namespace": "shop", "uid": "u-1"}}
SCORER: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "scorer", "namespace": "shop", "uid": "u-2", "generation": 4},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "scorer"}},
        "template": {
            "metadata": {"labels": {"app": "scorer", "tier": "model"}, "annotations": {"team": "ml"}},
            "spec": {
                "containers": [
                    {"name": "proxy", "image": "envoy:1", "resources": {"limits": {"cpu": "100m"}}},
                    {
                        "name": "model",
                        "image": "registry.example.com/scorer:2",
                        "ports": [{"name": "http", "containerPort": 9000}, {"containerPort": 9090}],
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 9000}},
                        "resources": {
                            "requests": {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                            "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"},
                        },
                    },
                ]
            },
        },
    },
    "status": {"readyReplicas": 3},
}
MODEL = WorkloadReference(name="scorer", container="model")


def test_the_serving_container_is_read_as_a_template_the_sweep_can_vary() -> None:
    shape = serving_shape(snapshot(SCORER), MODEL)
    assert (shape.runtime.type, shape.runtime.image, shape.runtime.port) == (
        "custom",
        "registry.example.com/scorer:2",
        9000,
    )
    assert shape.replicas == 3 and shape.service.port == 9000
    assert shape.resources is not None and shape.resources.requests is not None and shape.resources.limits is not None
    assert (shape.resources.requests.cpu, shape.resources.requests.memory) == ("2", "1Gi")
    assert shape.resources.gpu is not None
    assert (shape.resources.gpu.count, shape.resources.gpu.resource_name) == (1, "nvidia.com/gpu")
    # The first container and its first port unless the reference says otherwise.
    first = serving_shape(snapshot(SCORER), WorkloadReference(name="scorer", port=8080))
    assert (first.runtime.image, first.runtime.port) == ("envoy:1", 8080)
    with pytest.raises(WorkloadProblem, match=r"spec\.target\.workloadRef\.port: container proxy of Deployment scorer"):
        serving_shape(snapshot(SCORER), WorkloadReference(name="scorer"))
    assert serving_shape(snapshot(SCORER), WorkloadReference(name="scorer", port=9090)).runtime.port == 9090


def test_a_copy_runs_the_template_with_the_swept_values_under_the_runs_labels_only() -> None:
    saved = snapshot(SCORER)
    trial = apply(serving_shape(saved, MODEL), {"cpu": "500m", "memory": "512Mi", "replicas": 1})
    deployment, service = build_trial_workload(RUN, 2, saved, MODEL, trial)
    labels = {"kaliper.dev/profilerun": "sizing", "kaliper.dev/trial": "2", "kaliper.dev/role": "server"}
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == "sizing-t2"
    assert deployment["metadata"]["ownerReferences"][0]["kind"] == "ProfileRun"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["selector"] == {"matchLabels": labels}
    template = deployment["spec"]["template"]
    # No label of the original: its Services, PodDisruptionBudgets and controllers never select a copy.
    assert template["metadata"] == {"labels": labels, "annotations": {"team": "ml"}}
    proxy, model = template["spec"]["containers"]
    assert proxy == SCORER["spec"]["template"]["spec"]["containers"][0]
    assert model["resources"] == {
        "requests": {"ephemeral-storage": "1Gi", "cpu": "500m", "memory": "512Mi"},
        "limits": {"cpu": "500m", "memory": "512Mi", "nvidia.com/gpu": "1"},
    }
    assert model["readinessProbe"] == {"httpGet": {"path": "/ready", "port": 9000}}
    assert service["spec"] == {
        "selector": labels,
        "ports": [{"name": "http", "port": 9000, "targetPort": 9000, "protocol": "TCP"}],
    }
    assert saved["template"]["metadata"]["labels"] == {"app": "scorer", "tier": "model"}  # the snapshot is kept


def test_a_swept_gpu_kind_replaces_the_originals() -> None:
    saved = snapshot(SCORER)
    trial = apply(serving_shape(saved, MODEL), {"gpu_resource": "nvidia.com/mig-1g.10gb"})
    deployment, _ = build_trial_workload(RUN, 0, saved, MODEL, trial)
    limits = deployment["spec"]["template"]["spec"]["containers"][1]["resources"]["limits"]
    assert limits == {"cpu": "2", "memory": "1Gi", "nvidia.com/mig-1g.10gb": "1"}


def test_what_cannot_be_copied_is_refused_naming_the_field() -> None:
    with pytest.raises(WorkloadProblem, match=r"workloadRef.container: Deployment scorer has no container 'server' "):
        serving_shape(snapshot(SCORER), WorkloadReference(name="scorer", container="server"))
    host = copy.deepcopy(SCORER)
    host["spec"]["template"]["spec"]["containers"][1]["ports"][0]["hostPort"] = 9000
    with pytest.raises(WorkloadProblem, match="binds host port 9000; copies of it would collide"):
        serving_shape(snapshot(host), MODEL)
    scaled_to_zero = copy.deepcopy(SCORER)
    scaled_to_zero["spec"]["replicas"] = 0
    assert serving_shape(snapshot(scaled_to_zero), MODEL).replicas == 1


def rollout(generation: int, observed: int, replicas: int, ready: int, updated: int, conditions: list) -> dict:
    return {
        "metadata": {"name": "sizing-t0", "generation": generation},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": observed,
            "replicas": replicas,
            "readyReplicas": ready,
            "updatedReplicas": updated,
            "conditions": conditions,
        },
    }


def test_a_copy_is_ready_when_every_replica_of_its_template_is() -> None:
    assert rollout_state(rollout(1, 1, 2, 2, 2, [])) == (True, None)
    assert rollout_state(rollout(1, 1, 2, 1, 2, [])) == (False, None)
    assert rollout_state(rollout(2, 1, 2, 2, 2, [])) == (False, None)  # not yet seen by the controller
    assert rollout_state(rollout(1, 1, 3, 2, 2, [])) == (False, None)  # an old pod still going away
    quota = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": 'pods "sizing-t0-5d9" is forbidden: exceeded quota: compute',
    }
    assert rollout_state(rollout(1, 1, 0, 0, 0, [quota])) == (
        False,
        'the trial\'s Deployment: FailedCreate: pods "sizing-t0-5d9" is forbidden: exceeded quota: compute',
    )


def test_a_deploying_trial_of_a_workload_starts_its_load_once_the_copy_is_ready() -> None:
    timeouts = Timeouts(ready_s=300, ready="5m", trial_s=600, trial="10m")
    ready = TrialObjectsSeen(workload=rollout(1, 1, 2, 2, 2, []))
    assert next_move("Deploying", ready, 10, timeouts, None).actions == (StartLoad(None, None),)
    waiting = TrialObjectsSeen(workload=rollout(1, 1, 2, 1, 2, []))
    assert next_move("Deploying", waiting, 10, timeouts, None).phase == "Deploying"
    late = next_move("Deploying", waiting, 301, timeouts, None)
    assert (late.phase, late.message) == ("Failed", "not ready after readyTimeout (5m): no pod became ready")
