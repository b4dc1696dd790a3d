"""One ProfileRun, two executors: `kaliper run`'s loop (kaliper.local.executor) and the operator's steps on the
test control plane, given the same scripted measurements (tests/support/scripted_trials.py: each trial's
load-generator results from its CPU limit and load level), decide the same: the same trials with the same
verdicts, the same capacities, choice, configuration rows, run verdict, frontier and recommendation. Only what
each path measures on its own may differ: resource figures (cgroups here, Prometheus there: none in this test),
times, and trial names (t0 here, <run>-t0 on the cluster)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

from kaliper.api.resources import ModelDeployment, ProfileRun
from kaliper.local.executor import RunOptions
from kaliper.report.schema import ProfileReport
from tests.support.cluster_objects import apply
from tests.support.controlplane import Kubectl
from tests.support.many_runs import TARGET, LoadGeneratorPlayer
from tests.support.operator_runner import Cluster, running_operator
from tests.support.paths import KALIPER
from tests.support.scripted_trials import ScriptedLocalExecutor, scripted_result

GRID = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ProfileRun",
    "metadata": {"name": "grid"},
    "spec": {
        "target": {"deploymentRef": {"name": "iris"}},
        "payload": {"inline": "{}"},
        "load": {"closedLoop": {"concurrency": 2}},
        "sweep": {"cpu": ["500m", "1"], "concurrency": [2, 4, 8]},
        "slo": {"latency": [{"percentile": 99, "max": "50ms"}], "maxErrorRate": 0.01},
        "cost": {"perCoreHour": 0.04},
    },
}
# The capacity search: one core, listed 2 and 16 users, four probes, 400 requests a second to serve.
KNEE = copy.deepcopy(GRID)
KNEE["metadata"]["name"] = "knee"
KNEE["spec"].update(
    sweep={"cpu": ["1"], "concurrency": [2, 16]},
    search={"strategy": "knee", "capacity": {"probes": 4}},
    slo={"latency": [{"percentile": 99, "max": "45ms"}], "targetThroughput": 400},
)
# Each path's own: what it measured of resources (none here on the cluster: no Prometheus), when, and the name.
OWN = {"name", "resources", "start_time", "completion_time"}


def decided(report: ProfileReport, names: str) -> dict:
    """What the run decided, with `names` (the cluster's "<run>-t") written as the local "t"."""
    data = report.model_dump(
        mode="json",
        include={"trials", "capacities", "best_trial", "choice", "configurations", "frontier", "verdict",
                 "verdict_reason", "recommendation", "error", "warnings"},
    )  # fmt: skip
    for trial in data["trials"]:
        for key in OWN & trial.keys():
            del trial[key]
        if trial["stage"] is not None:
            del trial["stage"]["started_at"]
    return json.loads(json.dumps(data).replace(names, "t"))


def run_locally(run: dict, tmp_path: Path) -> ProfileReport:
    options = RunOptions(base_dir=tmp_path, output_dir=tmp_path / "work", limits=False)
    return ScriptedLocalExecutor(options).run(
        ProfileRun.model_validate(copy.deepcopy(run)), {"iris": ModelDeployment.model_validate(TARGET)}
    )


def run_on_the_operator(
    run: dict, crds: Kubectl, namespace: str, tmp_path: Path
) -> tuple[ProfileReport, dict, list[int]]:
    """The run through the operator, each load-generator Job played with the scripted results of its trial:
    its report as `kaliper report` reads it, its status, and how many trials the status listed, each count as
    it was first read (every Job is played between two reads, so no count goes unread)."""
    name = run["metadata"]["name"]
    cluster = Cluster(crds, namespace, name)

    def results(trial: str, config: dict) -> str:
        index = int(trial.rsplit("-t", 1)[1])
        parameters = next(t for t in cluster.status()["trials"] if t["index"] == index)
        users = float(config["load"]["closedLoop"]["concurrency"])
        return scripted_result(parameters["parameters"]["cpu"], users).model_dump_json(by_alias=True)

    counts: list[int] = []
    with running_operator(crds):
        apply(crds, namespace, TARGET)
        apply(crds, namespace, run)
        player = LoadGeneratorPlayer(namespace, tmp_path, crds.kubeconfig, results)
        try:

            def finished() -> bool:
                player.play_new()
                status = cluster.status()
                listed = len(status.get("trials") or [])
                if listed and listed not in counts:
                    counts.append(listed)
                return status.get("phase") in ("Succeeded", "Failed")

            crds.wait_for(finished, timeout=240, what=f"{name} finished")
        finally:
            player.close()
    environment = {**os.environ, "KUBECONFIG": str(crds.kubeconfig)}
    shown = subprocess.run(
        [str(KALIPER), "report", name, "-n", namespace, "--json"], capture_output=True, text=True, env=environment
    )
    assert shown.returncode == 0, shown.stderr
    return ProfileReport.model_validate_json(shown.stdout), cluster.status(), counts


def test_kaliper_run_and_the_operator_decide_the_same_from_the_same_measurements(
    crds: Kubectl, namespace: str, tmp_path: Path
) -> None:
    local = run_locally(GRID, tmp_path)
    # The scripted servers: half a core meets p99 <= 50 ms at 2 users (40 ms), one core at 2 and 4 (20, 40 ms);
    # half a core costs 0.02 an hour for 106.1 requests a second, one core 0.04 for 150: one core costs 41.5%
    # more per request, and half a core is chosen. Decided here once, whatever the operator says.
    assert (local.verdict, local.best_trial) == ("Met", 0)
    assert [(r.chosen, r.cost_change) for r in local.configurations] == [(True, None), (False, 0.4147)]
    cluster, _, _ = run_on_the_operator(GRID, crds, namespace, tmp_path)
    assert decided(cluster, "grid-t") == decided(local, "grid-t")


def test_the_capacity_search_probes_the_same_on_both_paths(crds: Kubectl, namespace: str, tmp_path: Path) -> None:
    """One core: p99 10 ms per user against 45 ms, so met up to 4 users and not at 5 (50 ms, its interval
    47.5-52.5 ms). Listed 2 (met) and 16 (not), the knee search's probes bisect: 9 and 5 (not met), 3 and 4
    (met). The operator lists each probe only once the search reaches it, and both paths bracket the capacity
    between 4 and 5 with 3 replicas for 400 requests a second at 150 each."""
    local = run_locally(KNEE, tmp_path)
    ran = [(t.index, t.parameters["concurrency"], t.slo_verdict) for t in local.trials]
    assert ran == [(0, "2", "Met"), (1, "16", "NotMet"), (2, "9", "NotMet"), (3, "5", "NotMet"), (4, "3", "Met"),
                   (5, "4", "Met")]  # fmt: skip
    (capacity,) = local.capacities
    assert (capacity.met, capacity.not_met, capacity.inconclusive, capacity.trial, capacity.probes) == (4, 5, [], 5, 4)
    assert capacity.interval_text() == "met at 4, not met at 5" and capacity.replicas == 3
    assert local.recommendation is not None and local.recommendation.replicas == 3
    assert "the capacity search added 4 probes between the listed load levels" in local.recommendation.rationale

    cluster, status, counts = run_on_the_operator(KNEE, crds, namespace, tmp_path)
    assert counts == [2, 3, 4, 5, 6]  # the listed levels, then each probe as the search reached it
    assert decided(cluster, "knee-t") == decided(local, "knee-t")
    assert [(t["index"], t["name"]) for t in status["trials"]] == [(i, f"knee-t{i}") for i in range(6)]
    assert status["progress"]["summary"] == "6/6" and status["recommendation"]["replicas"] == 3
    assert {k: status["capacity"][0][k] for k in ("levelName", "met", "notMet", "trial", "probes")} == {
        "levelName": "concurrency",
        "met": 4.0,
        "notMet": 5.0,
        "trial": 5,
        "probes": 4,
    }
