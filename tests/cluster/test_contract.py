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

NAME = "contract"
RUN = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ProfileRun",
    "metadata": {"name": NAME},
    "spec": {
        "target": {"deploymentRef": {"name": "iris"}},
        "payload": {"inline": "{}"},
        "load": {"closedLoop": {"concurrency": 2}},
        "sweep": {"cpu": ["500m", "1"], "concurrency": [2, 4, 8]},
        "slo": {"latency": [{"percentile": 99, "max": "50ms"}], "maxErrorRate": 0.01},
        "cost": {"perCoreHour": 0.04},
    },
}
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


def test_kaliper_run_and_the_operator_decide_the_same_from_the_same_measurements(
    crds: Kubectl, namespace: str, tmp_path: Path
) -> None:
    local = ScriptedLocalExecutor(RunOptions(base_dir=tmp_path, output_dir=tmp_path / "work", limits=False)).run(
        ProfileRun.model_validate(copy.deepcopy(RUN)), {"iris": ModelDeployment.model_validate(TARGET)}
    )
    # The scripted servers: half a core meets p99 <= 50 ms at 2 users (40 ms), one core at 2 and 4 (20, 40 ms);
    # half a core costs 0.02 an hour for 106.1 requests a second, one core 0.04 for 150: one core costs 41.5%
    # more per request, and half a core is chosen. Decided here once, whatever the operator says.
    assert (local.verdict, local.best_trial) == ("Met", 0)
    assert [(r.chosen, r.cost_change) for r in local.configurations] == [(True, None), (False, 0.4147)]

    def results(trial: str, config: dict) -> str:
        index = int(trial.rsplit("-t", 1)[1])
        parameters = next(t for t in Cluster(crds, namespace, NAME).status()["trials"] if t["index"] == index)
        users = float(config["load"]["closedLoop"]["concurrency"])
        return scripted_result(parameters["parameters"]["cpu"], users).model_dump_json(by_alias=True)

    with running_operator(crds):
        apply(crds, namespace, TARGET)
        apply(crds, namespace, RUN)
        player = LoadGeneratorPlayer(crds, namespace, tmp_path, crds.kubeconfig, results)
        try:

            def finished() -> bool:
                player.play_new()
                return Cluster(crds, namespace, NAME).status().get("phase") in ("Succeeded", "Failed")

            crds.wait_for(finished, timeout=240, what=f"{NAME} finished")
        finally:
            player.close()
    environment = {**os.environ, "KUBECONFIG": str(crds.kubeconfig)}
    shown = subprocess.run(
        [str(KALIPER), "report", NAME, "-n", namespace, "--json"], capture_output=True, text=True, env=environment
    )
    assert shown.returncode == 0, shown.stderr
    cluster = ProfileReport.model_validate_json(shown.stdout)
    assert decided(cluster, f"{NAME}-t") == decided(local, f"{NAME}-t")
