"""The trial transition table: every phase change a cluster trial can make, from objects shaped as the API
server returns them (ModelDeployment status, Job conditions, pod container statuses)."""

from __future__ import annotations

from typing import Any

import pytest

from kaliper.controllers.trial_moves import (
    ApplyDeployment,
    Collect,
    Move,
    StartLoad,
    TearDown,
    Timeouts,
    TrialObjectsSeen,
    load_ended,
    next_move,
    results_due,
    start,
)

TIMEOUTS = Timeouts(ready_s=300, ready="5m", trial_s=600, trial="10m")


def deployment(phase: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r-t0"}, "status": {"phase": phase, **status}}


def job(condition: str | None, reason: str = "", message: str = "") -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True", "reason": reason, "message": message}] if condition else []
    return {"metadata": {"name": "r-t0-lg"}, "status": {"conditions": conditions}}


def pod(role: str, name: str, container: dict[str, Any]) -> dict[str, Any]:
    labels = {"kaliper.dev/role": role, "kaliper.dev/trial": "0"}
    return {"metadata": {"name": name, "labels": labels}, "status": {"containerStatuses": [{"name": "c", **container}]}}


CRASHING = pod(
    "server",
    "r-t0-7d4f-abcde",
    {
        "restartCount": 4,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 3, "reason": "Error"}},
    },
)
PULLING = pod("server", "r-t0-7d4f-fghij", {"state": {"waiting": {"reason": "ContainerCreating"}}})


def unschedulable(role: str, name: str, message: str) -> dict[str, Any]:
    """A pod the scheduler could not place, with its words."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return {"metadata": {"name": name, "labels": {"kaliper.dev/role": role}}, "status": {"conditions": [condition]}}


UNSCHEDULABLE = unschedulable("server", "r-t0-7d4f-klmno", "0/1 nodes: Insufficient cpu.")
LOADGEN_EXITED = pod(
    "loadgen", "r-t0-lg-pqrst", {"state": {"terminated": {"exitCode": 2, "reason": "Error", "message": "refused"}}}
)

LOADGEN_UNSCHEDULABLE = unschedulable(
    "loadgen",
    "r-t0-lg-uvwxy",
    "0/3 nodes are available: 2 node(s) didn't match pod anti-affinity rules, 1 node(s) had untolerated taint.",
)

CASES = [
    # (case, phase, objects seen, seconds since the trial started, target URL, expected move)
    (
        "deployment lost or never made: apply it",
        "Deploying",
        TrialObjectsSeen(),
        400,
        None,
        Move("Deploying", (ApplyDeployment(),)),
    ),
    (
        "deployment ready: load its Service with its model name",
        "Deploying",
        TrialObjectsSeen(deployment=deployment("Ready", modelName="iris")),
        20,
        None,
        Move("Running", (StartLoad(None, "iris"),)),
    ),
    (
        "deployment failed",
        "Deploying",
        TrialObjectsSeen(deployment=deployment("Failed", message="image kaliper/x:1 not found")),
        20,
        None,
        Move("Failed", (TearDown(),), "the trial's ModelDeployment failed: image kaliper/x:1 not found"),
    ),
    (
        "a crash loop fails the trial at once, with its restarts",
        "Deploying",
        TrialObjectsSeen(deployment=deployment("Progressing"), pods=[CRASHING]),
        20,
        None,
        Move(
            "Failed",
            (TearDown(),),
            "CrashLoopBackOff: container c of pod r-t0-7d4f-abcde keeps crashing (exit code 3); "
            "see `kubectl logs r-t0-7d4f-abcde`",
            (4, 0),
        ),
    ),
    (
        "unschedulable may still resolve: wait",
        "Deploying",
        TrialObjectsSeen(deployment=deployment("Progressing"), pods=[UNSCHEDULABLE]),
        299,
        None,
        Move("Deploying"),
    ),
    (
        "unschedulable past readyTimeout: fail with the reason",
        "Deploying",
        TrialObjectsSeen(deployment=deployment("Progressing"), pods=[UNSCHEDULABLE]),
        301,
        None,
        Move(
            "Failed",
            (TearDown(),),
            "not ready after readyTimeout (5m): Unschedulable: pod r-t0-7d4f-klmno: 0/1 nodes: Insufficient cpu.",
        ),
    ),
    (
        "still pulling past readyTimeout: the deployment's own message",
        "Deploying",
        TrialObjectsSeen(deployment=deployment("Progressing", message="0 of 1 replicas ready"), pods=[PULLING]),
        301,
        None,
        Move("Failed", (TearDown(),), "not ready after readyTimeout (5m): 0 of 1 replicas ready"),
    ),
    ("load running", "Running", TrialObjectsSeen(jobs=[job(None)]), 100, None, Move("Running")),
    (
        "load Job lost after a restart: start it again against the deployment",
        "Running",
        TrialObjectsSeen(),
        100,
        None,
        Move("Running", (StartLoad(None),)),
    ),
    (
        "load Job lost, URL target: start it again against the URL",
        "Running",
        TrialObjectsSeen(),
        100,
        "http://10.0.0.7:8080",
        Move("Running", (StartLoad("http://10.0.0.7:8080"),)),
    ),
    (
        "load Job gone with its results written (torn down before the status was written): collect them",
        "Running",
        TrialObjectsSeen(results_written=True),
        100,
        None,
        Move("Collecting", (Collect(),)),
    ),
    (
        "load ended with results: collect now",
        "Running",
        TrialObjectsSeen(jobs=[job("Complete")], results_written=True),
        100,
        None,
        Move("Collecting", (Collect(),)),
    ),
    (
        "load ended without results",
        "Running",
        TrialObjectsSeen(jobs=[job("Complete")]),
        100,
        None,
        Move("Failed", (TearDown(),), "the load generator finished without writing its results"),
    ),
    (
        "load Job failed: its condition and the pod's exit",
        "Running",
        TrialObjectsSeen(
            jobs=[job("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")],
            pods=[LOADGEN_EXITED],
        ),
        100,
        None,
        Move(
            "Failed",
            (TearDown(),),
            "load-generator Job r-t0-lg failed: BackoffLimitExceeded Job has reached the specified backoff limit; "
            "pod r-t0-lg-pqrst exited with code 2 (Error): refused",
        ),
    ),
    (
        "a failed Job that still wrote results is measured",
        "Running",
        TrialObjectsSeen(jobs=[job("Failed", "DeadlineExceeded")], results_written=True),
        100,
        None,
        Move("Collecting", (Collect(),)),
    ),
    (
        "no results within trialTimeout",
        "Running",
        TrialObjectsSeen(jobs=[job(None)]),
        601,
        None,
        Move("Failed", (TearDown(),), "no results within trialTimeout (10m)"),
    ),
    (
        "a load generator with no node to run on: said while the trial waits",
        "Running",
        TrialObjectsSeen(jobs=[job(None)], pods=[LOADGEN_UNSCHEDULABLE]),
        100,
        None,
        Move(
            "Running",
            message="waiting for the load generator: Unschedulable: pod r-t0-lg-uvwxy: 0/3 nodes are available: "
            "2 node(s) didn't match pod anti-affinity rules, 1 node(s) had untolerated taint.",
        ),
    ),
    (
        "and in the failure when trialTimeout ends the wait",
        "Running",
        TrialObjectsSeen(jobs=[job(None)], pods=[LOADGEN_UNSCHEDULABLE]),
        601,
        None,
        Move(
            "Failed",
            (TearDown(),),
            "no results within trialTimeout (10m); the load generator: Unschedulable: pod r-t0-lg-uvwxy: 0/3 nodes "
            "are available: 2 node(s) didn't match pod anti-affinity rules, 1 node(s) had untolerated taint.",
        ),
    ),
    (
        "collecting, results there: collect (again)",
        "Collecting",
        TrialObjectsSeen(results_written=True),
        700,
        None,
        Move("Collecting", (Collect(),)),
    ),
    (
        "collecting, results gone",
        "Collecting",
        TrialObjectsSeen(),
        700,
        None,
        Move("Failed", (TearDown(),), "its results ConfigMap holds no results document"),
    ),
    ("a finished trial stays", "Succeeded", TrialObjectsSeen(), 700, None, Move("Succeeded")),
]


@pytest.mark.parametrize(
    ("phase", "seen", "elapsed", "url", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_next_move(phase: str, seen: TrialObjectsSeen, elapsed: float, url: str | None, expected: Move) -> None:
    assert next_move(phase, seen, elapsed, TIMEOUTS, url) == expected


def test_a_trial_starts_by_deploying_or_by_loading_the_url() -> None:
    assert start(None) == Move("Deploying", (ApplyDeployment(),))
    assert start("http://10.0.0.7:8080") == Move("Running", (StartLoad("http://10.0.0.7:8080"),))


def test_results_are_read_only_once_the_load_ended() -> None:
    assert load_ended(TrialObjectsSeen(jobs=[job(None)])) is False
    assert load_ended(TrialObjectsSeen(jobs=[job("Complete")])) is True
    assert load_ended(TrialObjectsSeen(jobs=[job("Failed", "DeadlineExceeded")])) is True
    # Workers still running beside a master that completed: the master wrote the results.
    assert load_ended(TrialObjectsSeen(jobs=[job("Complete"), job(None)])) is True
    # No Job at all: read whether results are there (then the trial was measured and torn down already).
    assert results_due(TrialObjectsSeen()) is True
    assert results_due(TrialObjectsSeen(jobs=[job(None)])) is False


def test_a_trial_sees_only_its_own_objects() -> None:
    objects = {
        "ModelDeployment": [deployment("Ready"), {"metadata": {"name": "r-t1"}}],
        "Job": [
            {"metadata": {"name": "r-t0-lg", "labels": {"kaliper.dev/trial": "0"}}},
            {"metadata": {"name": "r-t1-lg", "labels": {"kaliper.dev/trial": "1"}}},
        ],
        "Pod": [CRASHING, pod("server", "r-t1-9f9f-zzzzz", {})],
    }
    objects["Pod"][1]["metadata"]["labels"]["kaliper.dev/trial"] = "1"
    seen = TrialObjectsSeen.of_trial(0, "r-t0", objects)
    assert seen.deployment is not None and seen.deployment["metadata"]["name"] == "r-t0"
    assert [j["metadata"]["name"] for j in seen.jobs] == ["r-t0-lg"]
    assert [p["metadata"]["name"] for p in seen.pods] == ["r-t0-7d4f-abcde"]
    assert TrialObjectsSeen.of_trial(2, "r-t2", objects) == TrialObjectsSeen()
