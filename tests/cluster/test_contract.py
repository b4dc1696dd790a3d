"""One plan, two executors: the contract's runs (tests/support/contract_runs.py: a grid, the knee search's
bisection, a tie-break round, a failed repeat, a tie-break after a search that skipped levels, a configuration
that never becomes ready, a baseline's regression gate) through the operator on the test control plane, all at
once, each load-generator Job played with its trial's scripted results; each decides what `kaliper run`'s loop
decides from the same measurements (tests/profiling/test_scripted_plan.py states those): the same trials with
the same verdicts, the same capacities, choice, configuration rows, run verdict, frontier, recommendation and
comparison. Only what each path measures or words on its own may differ: resource figures (cgroups there,
Prometheus here: none in this test), times, trial names (t0 there, <run>-t0 here), why a server never came up
and where the baseline was read. And a workload fitted from a real Prometheus when each path plans the run: the
same fit, the same trial."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

from kaliper.netutil import free_port
from kaliper.report.schema import ProfileReport
from kaliper.serving.tiny_llm import train_tokenizer
from tests.support.cluster_objects import apply
from tests.support.contract_runs import (
    QUALITY_FLOOR,
    REGRESSED,
    SCENARIOS,
    baseline_report,
    decided,
    fitted,
    quality_dataset,
    run_locally,
    with_baseline,
)
from tests.support.controlplane import Kubectl, wait_for
from tests.support.groundtruth import STREAM_SOURCE, groundtruth
from tests.support.many_runs import TARGET, LoadGeneratorPlayer
from tests.support.operator_runner import Cluster, running_operator
from tests.support.paths import KALIPER
from tests.support.prometheus import instant_value, prometheus
from tests.support.scripted_trials import scripted_result

SERIES = 'vllm:request_success_total{model_name="truth"}'  # what streamtruth -vllm-metrics counts


def configmap(name: str, path: Path, key: str = "report.json") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {key: path.read_text()}}


def run_on_the_operator(
    crds: Kubectl, namespace: str, tmp_path: Path, runs: dict[str, dict], objects: list[dict]
) -> dict[str, list[int]]:
    """`runs` (by name) through the operator at once, beside `objects`, each load-generator Job played with its
    trial's scripted results; returns each run's trial count, each count as it was first read."""
    clusters = {name: Cluster(crds, namespace, name) for name in runs}

    def results(trial: str, config: dict) -> str:
        run, index = trial.rsplit("-t", 1)
        parameters = next(t for t in clusters[run].status()["trials"] if t["index"] == int(index))["parameters"]
        load = config["load"]
        level = float(load["closedLoop"]["concurrency"] if "closedLoop" in load else load["openLoop"]["rate"])
        annotations = runs[run]["metadata"].get("annotations")
        cpu = parameters.get("cpu", "1")
        rows = config["quality"]["rows"] if "quality" in config else None  # the plan named this trial to ask
        return scripted_result(cpu, level, int(index), annotations, rows).model_dump_json(by_alias=True)

    counts: dict[str, list[int]] = {name: [] for name in runs}
    with running_operator(crds):
        apply(crds, namespace, *objects, *runs.values())
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

            crds.wait_for(finished, timeout=360, what=f"{', '.join(runs)} finished")
        finally:
            player.close()
    return counts


def report_of(crds: Kubectl, namespace: str, name: str) -> ProfileReport:
    """A finished run's report as `kaliper report` reads it."""
    environment = {**os.environ, "KUBECONFIG": str(crds.kubeconfig)}
    shown = subprocess.run(
        [str(KALIPER), "report", name, "-n", namespace, "--json"], capture_output=True, text=True, env=environment
    )
    assert shown.returncode == 0, shown.stderr
    return ProfileReport.model_validate_json(shown.stdout)


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
    manifests["quality"] = quality_dataset(QUALITY_FLOOR, {"configMap": {"name": "rows", "key": "rows.jsonl"}})
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"inputs": {"float_input": [5.1, 3.5, 1.4, 0.2]}, "label": 0}\n')  # the player answers

    objects = [TARGET, configmap("baseline", baseline), configmap("rows", rows, "rows.jsonl")]
    counts = run_on_the_operator(crds, namespace, tmp_path, manifests, objects)
    for name in manifests:
        assert decided(report_of(crds, namespace, name), f"{name}-t") == decided(local[name], "t"), name

    # The operator lists each capacity probe and tie-break trial only once the search reaches it.
    assert counts["knee"] == [2, 3, 4, 5, 6] and counts["tie"] == [2, 3, 4]
    assert counts["knee-tie"] == [6, 7, 8, 9, 10, 11, 12]  # the probes, then the tie-break round after the skips
    clusters = {name: Cluster(crds, namespace, name) for name in manifests}
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


def test_a_workload_fitted_from_prometheus_is_planned_the_same_on_both_paths(
    crds: Kubectl, namespace: str, tmp_path: Path
) -> None:
    """40 requests served by bench/streamtruth, whose vLLM series a real Prometheus scrapes: `kaliper run` and the
    operator each fit them when they plan the run (prompts of 100 tokens on average, answers of 8, arrivals at 30
    times the rate the samples show: as fast as this machine sent them) and run the same trial at that rate."""
    train_tokenizer(1024).save(str(tmp_path / "tokenizer.json"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with prometheus([f"127.0.0.1:{port}"], (namespace,)) as prom:
        with groundtruth("-vllm-metrics", "-ttft", "2ms", "-gap", "1ms", port=port, source=STREAM_SOURCE):
            wait_for(lambda: instant_value(prom, f"count(sum by (namespace) ({SERIES}) == 0)") == 1, timeout=30)
            for i in range(40):  # prompts of 50 and 150 words in turn, answers of 8 tokens
                prompt = " ".join(f"w{i}x{j}" for j in range(50 if i % 2 else 150))
                body = {"model": "truth", "prompt": prompt, "max_tokens": 8}
                request = urllib.request.Request(f"{base}/v1/completions", json.dumps(body).encode(), method="POST")
                urllib.request.urlopen(request, timeout=10).read()
            wait_for(lambda: instant_value(prom, f"sum({SERIES})") == 40, timeout=30, interval=0.5)
        # The server gone, its series end: a fit made at any later time sees the same samples (it spans them), so
        # the two paths, planning a few seconds apart, fit alike. The trials' loads are played, not sent.
        wait_for(lambda: instant_value(prom, "max(up)") == 0, timeout=30, interval=0.5)
        local = run_locally(fitted(base, prom, {"file": str(tmp_path / "tokenizer.json")}), tmp_path)
        on_cluster = fitted(base, prom, {"configMap": {"name": "tokenizer", "key": "tokenizer.json"}})
        tokenizer = configmap("tokenizer", tmp_path / "tokenizer.json", "tokenizer.json")
        run_on_the_operator(crds, namespace, tmp_path, {"fitted": on_cluster}, [tokenizer])
    assert local.workload is not None and local.workload.open_loop is not None
    assert (local.workload.prompts.input_tokens.mean, local.workload.prompts.output_tokens.mean) == (100, 8)
    rate = local.workload.open_loop.rate
    assert [(t.parameters, t.status) for t in local.trials] == [({"rate": f"{rate:g}"}, "Succeeded")]
    assert decided(report_of(crds, namespace, "fitted"), "fitted-t") == decided(local, "t")
