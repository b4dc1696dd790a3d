"""ProfileRuns driven by the operator on the real API server. Trial pods land on kwok's nodes; the load
generator's work is played by running its real command here against a ground-truth server (see
tests/support/operator_runner.py); a real Prometheus scrapes a test double of cAdvisor and dcgm-exporter that
serves known values for the trial pods, and the status must carry exactly those. What real pods, containers
and cAdvisor do (and the README's kind walkthrough) is tested on the kind tier, tests/kind/."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from kaliper.api.units import parse_cpu
from kaliper.netutil import free_port
from kaliper.report.schema import ProfileReport
from tests.support.cluster_objects import apply, model_deployment, profile_run
from tests.support.controlplane import Kubectl
from tests.support.exporter import Exporter, PodSeries
from tests.support.gitops import argocd_health, kstatus, kubectl_wait_recipes, run_recipe
from tests.support.groundtruth import groundtruth
from tests.support.operator_runner import Cluster, running_operator
from tests.support.prometheus import prometheus
from tests.support.tie_break import STALLING_SERVER_FLAGS, TIE_BREAK_RUN

MIB = 2**20
CORES = {"500m": 0.25, "1": 0.4}  # CPU each trial pod uses, by the trial's cpu setting
MEMORY = {"500m": 150 * MIB, "1": 180 * MIB}


@pytest.fixture(scope="module")
def operator(crds: Kubectl) -> Iterator[None]:
    with running_operator(crds):
        yield


@pytest.fixture(scope="module")
def metrics() -> Iterator[tuple[Exporter, str]]:
    exporter = Exporter()
    port = free_port()
    server = exporter.serve(port)
    try:
        with prometheus([f"127.0.0.1:{port}"]) as url:
            yield exporter, url
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with groundtruth("-median", "4ms", "-sigma", "0.2") as url:
        yield url


def export_trial(cluster: Cluster, exporter: Exporter, index: int, cpu: str) -> None:
    for pod in cluster.wait_pods(index, "server", count=2):
        exporter.add(pod["metadata"]["name"], PodSeries(cluster.namespace, CORES[cpu], MEMORY[cpu]))


def scraped_pods(prometheus_url: str, namespace: str, pods: str, samples: int) -> int:
    """How many of the pods' server containers Prometheus holds at least `samples` CPU samples of."""
    series = f'container_cpu_usage_seconds_total{{namespace="{namespace}",pod=~"{pods}",container="server"}}'
    query = urllib.parse.urlencode({"query": f"count(count_over_time({series}[1m]) >= {samples})"})
    with urllib.request.urlopen(f"{prometheus_url}/api/v1/query?{query}", timeout=10) as response:
        result = json.load(response)["data"]["result"]
    return int(result[0]["value"][1]) if result else 0


LOADGEN_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 10001, "seccompProfile": {"type": "RuntimeDefault"}}


def test_a_two_trial_sweep_runs_to_succeeded_with_exact_prometheus_figures(
    operator, metrics, target: str, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    exporter, prometheus_url = metrics
    # Open-loop load: both trials get the same 300 requests per second, whatever their CPU.
    load = {"openLoop": {"rate": 300, "maxConnections": 16}, "warmup": "0s", "minDuration": "3s", "maxDuration": "3s"}
    # updateMode Apply: once the run succeeds, the operator patches its target with the recommendation.
    apply_it = {"updateMode": "Apply"}
    run = profile_run("sweep", prometheus_url, sweep={"cpu": ["500m", "1"]}, load=load, recommendation=apply_it)
    apply(crds, namespace, model_deployment(), run)
    cluster = Cluster(crds, namespace, "sweep")
    for index, cpu in enumerate(["500m", "1"]):
        cluster.wait_trial(index, "Running")
        export_trial(cluster, exporter, index, cpu)
        # A run at work is InProgress to kstatus (Flux's health checks), with the reason it gives.
        assert kstatus(crds, namespace, "profilerun", "sweep") == ("InProgress", "2 trials planned")
        health = ("Progressing", f"trials finished: {index}/2; 2 trials planned")
        assert argocd_health(crds, namespace, "profilerun", "sweep") == health
        # The Job runs the image's load generator on the config the operator wrote (mounted read-only), under the
        # run's own account, restricted, once; the config sends the run's load to the trial's Service.
        owner = cluster.get("profilerun", "sweep")
        job = cluster.get("job", f"sweep-t{index}-lg")
        pod = job["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["image"] == "ghcr.io/kaliper-dev/kaliper:0.1.0"
        assert container["command"] == [
            "python", "-m", "kaliper.loadgen", "run", "/etc/kaliper/config.yaml",
            "--output", "/tmp/result.json", "--publish", "/etc/kaliper/results.yaml",
        ]  # fmt: skip
        assert container["volumeMounts"] == [
            {"name": "config", "mountPath": "/etc/kaliper", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ]
        assert container["securityContext"] == LOADGEN_SECURITY and pod["securityContext"] == RESTRICTED_POD
        assert pod["serviceAccountName"] == "sweep-loadgen" and pod["restartPolicy"] == "Never"
        assert job["spec"]["backoffLimit"] == 0
        assert job["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
        config = yaml.safe_load(cluster.get("configmap", f"sweep-t{index}-lg")["data"]["config.yaml"])
        assert config["url"] == f"http://sweep-t{index}.{namespace}.svc:80"
        assert config["load"]["openLoop"] == {"rate": 300.0, "arrival": "constant", "maxConnections": 16}
        # Prometheus holds a few scrapes of both pods before the load window opens.
        crds.wait_for(
            lambda index=index: scraped_pods(prometheus_url, namespace, f"sweep-t{index}-.*", samples=3) == 2,
            timeout=60,
            what=f"Prometheus to hold three scrapes of trial {index}'s pods",
        )
        done = cluster.play_load(index, target)
        assert done.returncode == 0, done.stderr
        cluster.wait_trial(index, "Succeeded")
        assert not [o for o in cluster.owned() if f"sweep-t{index}" in o and not o.startswith("Pod/")]

    status = cluster.wait_phase("Succeeded")
    assert status["progress"]["summary"] == "2/2" and status["verdict"] == "Met"
    for trial, cpu in zip(status["trials"], ["500m", "1"], strict=True):
        assert trial["phase"] == "Succeeded" and trial["parameters"]["cpu"] == cpu
        resources = trial["resources"]
        assert resources["cpuAvgCores"] == pytest.approx(2 * CORES[cpu], rel=1e-6)
        assert resources["cpuPeakCores"] == pytest.approx(2 * CORES[cpu], rel=1e-6)
        assert resources["cpuP90Cores"] == pytest.approx(2 * CORES[cpu], rel=1e-6)
        assert resources["cpuThrottledRatio"] == pytest.approx(0.4, rel=1e-6)
        assert resources["memoryAvgBytes"] == 2 * MEMORY[cpu] and resources["memoryPeakBytes"] == 2 * MEMORY[cpu]
        assert resources["restarts"] == 0 and resources["oomKills"] == 0
        assert trial["requests"] > 0 and trial["latency"]["p99Ms"] < 1000 and trial["sloVerdict"] == "Met"
        # Priced by what the trial reserves: 2 replicas of `cpu` at 0.04 per core-hour (no memory is set), for
        # the hours a million requests take at the trial's throughput.
        cores, throughput = 2 * float(parse_cpu(cpu)), trial["throughputRps"]
        assert throughput == pytest.approx(300, rel=0.1)
        assert trial["costPerMillionRequests"] == pytest.approx(cores * 0.04 * 1e6 / throughput / 3600, rel=1e-3)
        assert trial["coreHoursPerMillionRequests"] == pytest.approx(cores * 1e6 / throughput / 3600, rel=1e-3)
    # Both met the SLO at the same request rate, and trial 0 reserves half the cores of trial 1: it costs half as
    # much per request, a gap far beyond the tie tolerance and the throughput noise, so trial 0 is the best.
    # Its recommendation: P90 of its CPU use per replica (0.25 cores, exported) + 15%, under the 500m limit it
    # ran with; its peak memory per replica (150 MiB) + 15%, and 20% more for the limit; one replica carries the
    # target of 100 req/s, as each served about 150.
    assert status["best"]["trial"] == 0
    cheapest = 1.0 * 0.04 * 1e6 / status["trials"][0]["throughputRps"] / 3600
    assert status["cost"]["currencyPerMillionRequests"] == pytest.approx(cheapest, rel=1e-3)
    recommendation = status["recommendation"]
    assert float(parse_cpu(recommendation["requests"]["cpu"])) == pytest.approx(0.25 * 1.15, abs=0.001)
    assert recommendation["requests"]["memory"] == "173Mi"
    assert recommendation["limits"] == {"cpu": "500m", "memory": "207Mi"}
    assert recommendation["replicas"] == 1
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Complete"]["status"] == "True" and conditions["Degraded"]["status"] == "False"
    assert conditions["Ready"]["message"] == "verdict Met, best trial t0"
    assert kstatus(crds, namespace, "profilerun", "sweep") == ("Current", "Resource is Ready")
    assert argocd_health(crds, namespace, "profilerun", "sweep") == ("Healthy", "verdict Met, best trial t0")
    recipes = kubectl_wait_recipes()
    (finished, succeeded), (deployed,) = recipes["profilerun"], recipes["modeldeployment"]
    assert [run_recipe(crds, recipe, "sweep", namespace) for recipe in (finished, succeeded)] == [0, 0]
    # The target now runs the recommendation (a new generation, rolled out: the recipe waits for it).
    assert run_recipe(crds, deployed, "iris", namespace) == 0
    assert kstatus(crds, namespace, "modeldeployment", "iris") == ("Current", "Resource is Ready")
    target = crds.json("get", "modeldeployment", "iris", "-n", namespace)
    assert target["spec"]["replicas"] == 1 and target["metadata"]["generation"] == 2
    assert target["spec"]["resources"] == {"requests": recommendation["requests"], "limits": recommendation["limits"]}
    assert json.loads(recommendation["mergePatch"]) == {
        "spec": {
            "replicas": 1,
            "resources": {"requests": recommendation["requests"], "limits": recommendation["limits"]},
        }
    }
    # The full report, in the ConfigMap the status points to, holds the same figures.
    reference = status["reportRef"]["configMap"]
    report = ProfileReport.model_validate_json(cluster.get("configmap", reference["name"])["data"][reference["key"]])
    assert [t.status for t in report.trials] == ["Succeeded", "Succeeded"]
    assert report.trials[0].resources.memory_peak_bytes == 2 * MEMORY["500m"]
    assert report.trials[0].stage.requests == status["trials"][0]["requests"]
    # Nothing of the trials is left but their results; Events tell the story.
    crds.wait_for(lambda: not cluster.owned(), timeout=60, what="the trial objects to go")
    reasons = {e["reason"] for e in cluster.get("events", "--field-selector", "involvedObject.name=sweep")["items"]}
    assert {
        "Started",
        "TrialStarted",
        "TrialRunning",
        "TrialSucceeded",
        "RecommendationApplied",
        "Succeeded",
    } <= reasons
    columns = crds("get", "profilerun", "sweep", "-n", namespace).stdout
    assert "Succeeded" in columns and "2/2" in columns and "Met" in columns
    # Steps read the run and its children from the watch streams: the operator listed each child kind once
    # (after its start, per namespace) and never read the run, a Deployment or a pod list on a step.
    requests = crds.requests_in(namespace)
    reads = {k: requests[k] for k in ("get profileruns", "get deployments", "get modeldeployments/status")}
    assert reads == {"get profileruns": 0, "get deployments": 0, "get modeldeployments/status": 0}
    lists = {k: requests[k] for k in ("list pods", "list jobs", "list modeldeployments")}
    assert lists == {"list pods": 1, "list jobs": 1, "list modeldeployments": 1}


def test_prometheus_down_or_empty_ends_succeeded_but_degraded(
    operator, metrics, target: str, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    _, prometheus_url = metrics
    down = f"http://127.0.0.1:{free_port()}"
    # "empty" is also a CI gate (spec.failIfNotMet) that no configuration passes: a median under 1 ms.
    gate = {"slo": {"latency": [{"percentile": 50, "max": "1ms"}]}, "failIfNotMet": True}
    apply(
        crds,
        namespace,
        model_deployment(replicas=1),
        profile_run("down", down, report={"keepFor": "720h"}),
        profile_run("empty", prometheus_url, **gate),
    )
    for name in ("down", "empty"):  # "empty": Prometheus is up, but nobody exports these pods
        cluster = Cluster(crds, namespace, name)
        cluster.wait_trial(0, "Running")
        assert cluster.play_load(0, target).returncode == 0
    reasons = {}
    for name in ("down", "empty"):
        status = Cluster(crds, namespace, name).wait_phase("Succeeded")
        degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "True" and degraded["reason"] == "MetricsUnavailable"
        # No figure from Prometheus; the restarts and OOM kills from the pods' own status still stand.
        assert status["trials"][0]["resources"] == {"oomKills": 0, "restarts": 0}
        reasons[name] = degraded["message"]
    assert f"Prometheus at {down} could not be queried" in reasons["down"]
    assert "no cAdvisor series for pods empty-t0-" in reasons["empty"]
    # Figures missing is no failure; a gate the run did not pass is one, its phase and report kept.
    assert kstatus(crds, namespace, "profilerun", "down") == ("Current", "Resource is Ready")
    missed = "verdict NotMet: no configuration met the SLO (spec.failIfNotMet)"
    assert kstatus(crds, namespace, "profilerun", "empty") == ("Failed", missed)
    assert argocd_health(crds, namespace, "profilerun", "empty") == ("Degraded", missed)

    # spec.report.keepFor: the report outlives its run, for 30 days from when the run finished.
    finished = Cluster(crds, namespace, "down").status()["completionTime"]
    kept = crds.json("get", "configmap", "down-report", "-n", namespace)["metadata"]
    until = datetime.fromisoformat(finished.replace("Z", "+00:00")) + timedelta(hours=720)
    assert "ownerReferences" not in kept
    assert kept["annotations"] == {"kaliper.dev/keep-until": until.strftime("%Y-%m-%dT%H:%M:%SZ")}
    crds("delete", "profilerun", "down", "-n", namespace)
    labelled = lambda: crds.json("get", "configmaps", "-n", namespace, "-l", "kaliper.dev/profilerun=down")  # noqa: E731
    crds.wait_for(
        lambda: [c["metadata"]["name"] for c in labelled()["items"]] == ["down-report"],
        what="the garbage collector to remove what the deleted run owned, but its report",
    )
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("kaliper")), "report", "down", "-n", namespace, "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(crds.kubeconfig)},
    )
    assert shown.returncode == 0, shown.stderr
    assert ProfileReport.model_validate_json(shown.stdout).name == "down"


def test_a_failed_load_generator_job_fails_the_trial(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    apply(crds, namespace, model_deployment(replicas=1), profile_run("jobfail", None))
    cluster = Cluster(crds, namespace, "jobfail")
    cluster.wait_trial(0, "Running")
    cluster.wait_pods(0, "loadgen")
    cluster.end_pods(0, "loadgen", exit_code=2, message="cannot read /etc/kaliper/config.yaml")
    status = cluster.wait_phase("Failed")
    trial = status["trials"][0]
    assert trial["failedIn"] == "Running"
    assert "load-generator Job jobfail-t0-lg failed: BackoffLimitExceeded" in trial["message"]
    assert "exited with code 2 (Error): cannot read /etc/kaliper/config.yaml" in trial["message"]
    gitops, message = kstatus(crds, namespace, "profilerun", "jobfail")
    assert gitops == "Failed" and "load-generator Job jobfail-t0-lg failed: BackoffLimitExceeded" in message
    assert argocd_health(crds, namespace, "profilerun", "jobfail") == ("Degraded", message)
    crds.wait_for(lambda: not cluster.owned(), timeout=60, what="the trial objects to go")


def test_deleting_a_run_mid_trial_removes_its_jobs_and_deployments(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    apply(crds, namespace, model_deployment(replicas=1), profile_run("gone", None))
    cluster = Cluster(crds, namespace, "gone")
    cluster.wait_trial(0, "Running")
    cluster.wait_pods(0, "loadgen")
    assert any(o.startswith("Job/") for o in cluster.owned())
    crds("delete", "profilerun", "gone", "-n", namespace, "--wait=false")
    crds.wait_for(lambda: not cluster.owned(), timeout=90, what="the run's trial objects to go")
    leftover = crds.json("get", "configmaps", "-n", namespace, "-l", "kaliper.dev/profilerun=gone")["items"]
    crds.wait_for(
        lambda: not crds.json("get", "configmaps", "-n", namespace, "-l", "kaliper.dev/profilerun=gone")["items"],
        timeout=60,
        what=f"the run's ConfigMaps ({len(leftover)}) to go",
    )


@contextmanager
def black_hole() -> Iterator[str]:
    """A "Prometheus" that accepts connections and never answers, as one behind a dropping firewall."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def test_a_prometheus_that_never_answers_holds_up_neither_the_run_nor_the_operator(
    operator, target: str, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    with black_hole() as silent:
        apply(crds, namespace, model_deployment(replicas=1), profile_run("silent", silent))
        cluster = Cluster(crds, namespace, "silent")
        cluster.wait_trial(0, "Running")
        assert cluster.play_load(0, target).returncode == 0
        cluster.wait_trial(0, "Collecting", "Succeeded")
        # While the run's step waits on Prometheus, the operator goes on with other work.
        apply(crds, namespace, model_deployment("other", replicas=1))
        crds.wait_for(
            lambda: crds.json("get", "mdep", "other", "-n", namespace).get("status", {}).get("phase") == "Ready",
            timeout=60,
            what="ModelDeployment other to be reconciled while Prometheus hangs",
        )
        status = cluster.wait_phase("Succeeded", timeout=120)
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert f"Prometheus at {silent} could not be queried" in degraded["message"]
    assert f"read timed out after 5s ({silent}/api/v1/query)" in degraded["message"]


def test_a_results_configmap_of_an_earlier_run_of_the_same_name_is_not_adopted(
    operator, target: str, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    # What a deleted run leaves until the garbage collector gets to it: its trial's results, owned by it.
    crds("create", "configmap", "earlier-run", "-n", namespace)
    earlier = crds.json("get", "configmap", "earlier-run", "-n", namespace)["metadata"]["uid"]
    leftover = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "again-t0-result",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "earlier-run", "uid": earlier}],
        },
        "data": {"result.json": '{"not": "this run\'s results"}'},
    }
    apply(crds, namespace, leftover, model_deployment(replicas=1), profile_run("again", None))
    cluster = Cluster(crds, namespace, "again")
    cluster.wait_trial(0, "Running")
    assert cluster.play_load(0, target).returncode == 0
    status = cluster.wait_phase("Succeeded")
    assert status["trials"][0]["phase"] == "Succeeded" and status["trials"][0]["requests"] > 0
    run_uid = crds.json("get", "profilerun", "again", "-n", namespace)["metadata"]["uid"]
    results = crds.json("get", "configmap", "again-t0-result", "-n", namespace)
    assert [ref["uid"] for ref in results["metadata"]["ownerReferences"]] == [run_uid]


def test_a_step_that_keeps_failing_says_why_in_events_until_it_goes_through(
    operator, crds: Kubectl, namespace: str
) -> None:  # type: ignore[no-untyped-def]
    # A ResourceQuota that allows no more ConfigMaps: the run's first write (its target's snapshot) is refused
    # by the API server on every step, as an RBAC rule or an admission webhook might refuse it.
    held = len(crds.json("get", "configmaps", "-n", namespace)["items"])
    crds("create", "quota", "no-more-configmaps", f"--hard=configmaps={held}", "-n", namespace)
    apply(crds, namespace, model_deployment(replicas=1), profile_run("refused", None))
    cluster = Cluster(crds, namespace, "refused")

    def events(reason: str) -> list[str]:
        found = cluster.get("events", "--field-selector", f"involvedObject.name=refused,reason={reason}")["items"]
        return [e["message"] for e in found]

    crds.wait_for(lambda: events("StepFailed"), timeout=60, what="a StepFailed event")
    (first,) = events("StepFailed")
    assert first.startswith("step failed (1 in a row; retried with backoff from ")
    assert "HTTP 403 from the API server: configmaps " in first and "exceeded quota: no-more-configmaps" in first
    assert cluster.status().get("trials") in (None, [])  # nothing started behind the refusal
    crds("delete", "quota", "no-more-configmaps", "-n", namespace)
    crds.wait_for(lambda: events("StepRecovered"), timeout=60, what="a StepRecovered event")
    (recovered,) = events("StepRecovered")
    assert recovered.startswith("a step went through after ") and recovered.endswith(" failed in a row")
    cluster.wait_trial(0, "Deploying", "Running")


def test_a_tie_on_noise_is_measured_again_before_the_choice(operator, crds: Kubectl, namespace: str) -> None:  # type: ignore[no-untyped-def]
    """Two configurations that tie on noise (tests/support/tie_break.py): once both have run, the operator lists
    one more trial of each, one at a time, and chooses from both trials of each."""
    apply(crds, namespace, model_deployment(replicas=1), profile_run("tie", None, **TIE_BREAK_RUN))
    cluster = Cluster(crds, namespace, "tie")
    with groundtruth(*STALLING_SERVER_FLAGS) as server:
        for index in (0, 1, 2, 3):
            cluster.wait_trial(index, "Running")
            assert cluster.play_load(index, server).returncode == 0
            cluster.wait_trial(index, "Succeeded")
        status = cluster.wait_phase("Succeeded")
    trials = [(t["index"], t["name"], t["parameters"]["cpu"], t["sloVerdict"]) for t in status["trials"]]
    assert trials[:2] == [(0, "tie-t0", "500m", "Met"), (1, "tie-t1", "600m", "Met")]
    # The round: each configuration once more (which first depends on which the tie chose).
    assert [(index, name) for index, name, _, _ in trials[2:]] == [(2, "tie-t2"), (3, "tie-t3")]
    assert sorted((cpu, verdict) for _, _, cpu, verdict in trials[2:]) == [("500m", "Met"), ("600m", "Met")]
    explanation = status["best"]["explanation"]
    assert "measured 2 times" in explanation and "; the tie-break measured 2 more trials (" in explanation
    assert status["progress"]["summary"] == "4/4"


def test_a_run_against_its_baseline_run_fails_on_a_regression(
    operator, crds: Kubectl, namespace: str, target: str
) -> None:  # type: ignore[no-untyped-def]
    """spec.baseline names an earlier ProfileRun (its report ConfigMap); slo.failIfRegressed makes a regression
    fail the run as kstatus and Argo CD read it. The regression is injected: the same load on a server five
    times slower (a median of 20 ms instead of 4). A baseline that is not there fails the run before any trial."""
    apply(crds, namespace, model_deployment(replicas=1), profile_run("before", None))
    before = Cluster(crds, namespace, "before")
    before.wait_trial(0, "Running")
    assert before.play_load(0, target).returncode == 0
    before.wait_phase("Succeeded")
    gate = {"baseline": {"run": "before"}, "slo": {"latency": [{"percentile": 99, "max": "1s"}], "failIfRegressed": {}}}
    lost = {"baseline": {"run": "never-ran"}}
    apply(crds, namespace, profile_run("after", None, **gate), profile_run("lost", None, **lost))
    after = Cluster(crds, namespace, "after")
    after.wait_trial(0, "Running")
    with groundtruth("-median", "20ms", "-sigma", "0.2") as slower:
        assert after.play_load(0, slower).returncode == 0
    status = after.wait_phase("Succeeded")
    baseline = status["baseline"]
    assert (baseline["source"], baseline["figures"]) == ("ProfileRun before", 4)
    regressed = [line.split(": ")[1].split(" ")[:2] for line in baseline["regressions"]]
    assert ["latency", "p50"] in regressed and all(": worse (95%: " in line for line in baseline["regressions"])
    gitops, message = kstatus(crds, namespace, "profilerun", "after")
    assert gitops == "Failed" and message.startswith("regressed against ProfileRun before: concurrency=2: ")
    assert message.endswith("(slo.failIfRegressed)")
    failed = Cluster(crds, namespace, "lost").wait_phase("Failed")
    assert failed["message"] == (
        f"spec.baseline.run: ProfileRun never-ran has no report in namespace {namespace} (not finished, or absent)"
    )
