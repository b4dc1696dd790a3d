"""One plan, two executors: the contract's runs (tests/support/contract_runs.py: a grid, the knee search's
bisection, a tie-break round, a failed repeat, a configuration that never becomes ready, a baseline's regression
gate) through the operator on the test control plane, all at once, each load-generator Job played with its
trial's scripted results; each decides what `kaliper run`'s loop decides from the same measurements
(tests/profiling/test_scripted_plan.py states those): the same trials with the same verdicts, the same
capacities, choice, configuration rows, run verdict, frontier, recommendation and comparison. Only what each path
measures or words on its own may differ: resource figures (cgroups there, Prometheus here: none in this test),
times, trial names (t0 there, <run>-t0 here), why a server never came up and where the baseline was read."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from kaliper.report.schema import ProfileReport
from tests.support.cluster_objects import apply
from tests.support.contract_runs import REGRESSED, SCENARIOS, baseline_report, decided, run_locally, with_baseline
from tests.support.controlplane import Kubectl
from tests.support.many_runs import TARGET, LoadGeneratorPlayer
from tests.support.operator_runner import Cluster, running_operator
from tests.support.paths import KALIPER
from tests.support.scripted_trials import scripted_result


def test_kaliper_run_and_the_operator_carry_out_the_same_plan(crds: Kubectl, namespace: str, tmp_path: Path) -> None:
    baseline = baseline_report(tmp_path)
    local = {
        run["metadata"]["name"]: run_locally(
            run, tmp_path / run["metadata"]["name"], baseline if run is REGRESSED else None
        )
        for run in SCENARIOS
    }
    manifests = {run["metadata"]["name"]: run for run in SCENARIOS}
    manifests["regressed"] = with_baseline(REGRESSED, {"configMap": {"name": "baseline", "key": "report.json"}})
    clusters = {name: Cluster(crds, namespace, name) for name in manifests}

    def results(trial: str, config: dict) -> str:
        run, index = trial.rsplit("-t", 1)
        parameters = next(t for t in clusters[run].status()["trials"] if t["index"] == int(index))["parameters"]
        users = float(config["load"]["closedLoop"]["concurrency"])
        annotations = manifests[run]["metadata"].get("annotations")
        return scripted_result(parameters["cpu"], users, int(index), annotations).model_dump_json(by_alias=True)

    counts: dict[str, list[int]] = {name: [] for name in manifests}  # each run's trial count, as first read
    with running_operator(crds):
        apply(crds, namespace, TARGET)
        crds("create", "configmap", "baseline", "-n", namespace, f"--from-file=report.json={baseline}")
        for manifest in manifests.values():
            apply(crds, namespace, manifest)
        player = LoadGeneratorPlayer(namespace, tmp_path, crds.kubeconfig, results)
        try:

            def finished() -> bool:
                player.play_new()  # every Job is played between two reads, so no count goes unread
                done = True
                for name, cluster in clusters.items():
                    status = cluster.status()
                    listed = len(status.get("trials") or [])
                    if listed and listed not in counts[name]:
                        counts[name].append(listed)
                    done &= status.get("phase") in ("Succeeded", "Failed")
                return done

            crds.wait_for(finished, timeout=360, what="the contract's runs finished")
        finally:
            player.close()
    environment = {**os.environ, "KUBECONFIG": str(crds.kubeconfig)}
    for name in manifests:
        shown = subprocess.run(
            [str(KALIPER), "report", name, "-n", namespace, "--json"], capture_output=True, text=True, env=environment
        )
        assert shown.returncode == 0, shown.stderr
        assert decided(ProfileReport.model_validate_json(shown.stdout), f"{name}-t") == decided(local[name], "t"), name

    # The operator lists each capacity probe and tie-break trial only once the search reaches it.
    assert counts["knee"] == [2, 3, 4, 5, 6] and counts["tie"] == [2, 3, 4]
    knee = clusters["knee"].status()
    assert [(t["index"], t["name"]) for t in knee["trials"]] == [(i, f"knee-t{i}") for i in range(6)]
    assert knee["progress"]["summary"] == "6/6" and knee["recommendation"]["replicas"] == 3
    assert {k: knee["capacity"][0][k] for k in ("levelName", "met", "notMet", "trial", "probes")} == {
        "levelName": "concurrency",
        "met": 4.0,
        "notMet": 5.0,
        "trial": 5,
        "probes": 4,
    }
    never_ready = clusters["never-ready"].status()["trials"]
    assert [(t["phase"], t.get("failedIn")) for t in never_ready[2:]] == [("Failed", "Deploying")] * 2
    assert never_ready[3]["message"] == never_ready[2]["message"]  # failed for the same reason, never deployed
    stalled = {c["type"]: c for c in clusters["regressed"].status()["conditions"]}["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("True", "Regressed")
    json.dumps(knee)  # the status is plain JSON, as kubectl shows it
