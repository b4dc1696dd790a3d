"""The kind tutorial (docs/tutorials/kind.md, whose block the README's tour shows too), run as written on a
real kind cluster made from the repository's own `kind-config.yaml`: each command of its block, the
Docker-specific ones in the podman forms the tutorial's table gives (tests/support/kind.py says why each is
needed on this machine). Its cluster-wide steps make the tier's cluster (tests/support/kind_cluster.py),
which the other tests of tests/kind use after this module (tests/support/tiers.py queues it first)."""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kaliper.manifests.modeldeployment import KALIPER_IMAGE
from tests.support.controlplane import REPO
from tests.support.docs_site import bash_blocks
from tests.support.kind import KindHost
from tests.support.kind_cluster import KindCluster, Walkthrough, cluster_steps, walkthrough_commands
from tests.support.kind_operator import OPERATOR_NAMESPACE, operator_pod
from tests.support.podcpu import PodCpuSampler, measured_window

README = REPO / "README.md"
GPU_EXAMPLE = REPO / "examples" / "modeldeployment-gpu.yaml"
IMAGE_REPOSITORY = KALIPER_IMAGE.rpartition(":")[0]  # the next release's tag goes on the same repository


@pytest.fixture(scope="module")
def kind(cluster: KindCluster) -> KindHost:
    return cluster.host


@pytest.fixture(scope="module")
def walkthrough(cluster: KindCluster) -> Iterator[tuple[Walkthrough, PodCpuSampler]]:
    """The tutorial's steps after the cluster-wide ones (which made the tier's cluster): the iris model, its
    ProfileRun, the reports; with the kernel's accounting of the servers' CPU sampled meanwhile."""
    steps = cluster.steps
    with PodCpuSampler(cluster.host, "default", "kaliper.dev/role=server", "server") as truth:
        for command in cluster_steps()[1]:
            steps.run(command)
    yield steps, truth
    # The tutorial's objects go, and their CPU requests with them: the tier's other tests schedule on these nodes.
    cluster.kubectl("delete", "profilerun/iris-sweep", "modeldeployment/iris", "configmap/iris-model", "--timeout=100s")


def test_the_tutorials_block_is_what_the_walkthrough_runs_and_the_readmes_tour_shows() -> None:
    readme = README.read_text()
    tour = readme[readme.index("### On kind: from zero to a finished ProfileRun") :]
    assert bash_blocks(tour)[0] == walkthrough_commands()
    commands = walkthrough_commands()
    assert commands[0] == "kind create cluster --config kind-config.yaml"
    assert any(c.startswith("helm install kaliper charts/kaliper") and "prometheus.url=" in c for c in commands)
    assert commands[-1].startswith(".venv/bin/kaliper report iris-sweep")


def test_the_walkthroughs_profilerun_succeeds_with_resource_figures_from_prometheus(walkthrough, kind) -> None:  # type: ignore[no-untyped-def]
    steps, _ = walkthrough
    watched = next(
        out for command, out in steps.outputs.items() if command.startswith("kubectl get prun iris-sweep -w")
    )
    assert watched.split()[:3] == ["iris-sweep", "Succeeded", "2/2"]
    status = kind.kubectl.json("get", "prun", "iris-sweep")["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Degraded"]["status"] == "False", conditions["Degraded"]["message"]
    report = kind.kubectl.json("get", "configmap", "iris-sweep-report")
    assert json.loads(report["data"]["report.json"])["trials"][1]["name"] == "iris-sweep-t1"  # plain: under 900 KiB
    for summary, limit in zip(status["trials"], (0.5, 1.0), strict=True):
        assert summary["phase"] == "Succeeded" and summary["requests"] > 0, json.dumps(summary)[:3000]
        resources = summary["resources"]
        assert resources["restarts"] == 0 and resources["oomKills"] == 0
        assert resources["cpuAvgCores"] <= limit * 1.05  # the CFS quota held
        assert resources["memoryPeakBytes"] > 20 * 2**20  # a Python process with onnxruntime loaded
    assert status["trials"][0]["resources"]["cpuThrottledRatio"] > 0  # 500m is tight for this load


def test_the_runs_load_generators_are_held_to_their_trial_servers_by_a_network_policy(walkthrough, kind) -> None:  # type: ignore[no-untyped-def]
    """The chart's operator (its RBAC reads the API server's endpoints in namespace default) gives the run's
    load generators a NetworkPolicy: their trial servers, DNS, the API server's address and endpoints, their
    master. This cluster's pod network does not enforce it (docs/security.md says why): this checks what the
    operator writes with the chart's RBAC, not how a network plugin applies it."""
    policy = kind.kubectl.json("get", "networkpolicy", "iris-sweep-loadgen")["spec"]
    servers = {"kaliper.dev/profilerun": "iris-sweep", "kaliper.dev/role": "server"}
    assert policy["egress"][0] == {"to": [{"podSelector": {"matchLabels": servers}}]}
    selector = "kubernetes.io/service-name=kubernetes"
    slices = kind.kubectl.json("get", "endpointslices", "-n", "default", "-l", selector)["items"]
    endpoints = {f"{a}/32" for s in slices for e in s["endpoints"] for a in e["addresses"]}
    cluster_ip = kind.kubectl.json("get", "service", "kubernetes", "-n", "default")["spec"]["clusterIP"]
    assert len(endpoints) == 1  # one control-plane node
    assert {peer["ipBlock"]["cidr"] for peer in policy["egress"][2]["to"]} == {f"{cluster_ip}/32", *endpoints}
    assert {port["port"] for port in policy["egress"][2]["ports"]} == {443, 6443}


def test_each_trials_cpu_matches_the_kernels_accounting_of_the_servers_cgroup(walkthrough, kind) -> None:  # type: ignore[no-untyped-def]
    steps, truth = walkthrough
    full = json.loads(steps.shell(".venv/bin/kaliper report iris-sweep --json"))
    servers = list(truth.pods.values())
    assert len(servers) == 2 and {p["spec"]["containers"][0]["image"] for p in servers} == {
        "ghcr.io/kaliper-dev/kaliper:0.1.0"
    }
    for trial in full["trials"]:
        start, end = measured_window(trial)
        accounted = truth.cores(f"{trial['name']}-", start, end)
        assert trial["resources"]["cpuAvgCores"] == pytest.approx(accounted, rel=0.10), (trial["name"], start, end)


def test_kaliper_report_prints_the_choice(walkthrough) -> None:  # type: ignore[no-untyped-def]
    steps, _ = walkthrough
    printed = next(out for command, out in steps.outputs.items() if command.startswith(".venv/bin/kaliper report"))
    assert "ProfileRun iris-sweep" in printed and "verdict: Met" in printed
    described = next(out for command, out in steps.outputs.items() if command.startswith("kubectl describe prun"))
    assert "Succeeded" in described


def test_a_chart_upgrade_keeps_the_finished_run_readable_and_runs_nothing_again(  # type: ignore[no-untyped-def]
    walkthrough, cluster: KindCluster, tmp_path: Path
) -> None:
    """docs/how-to/upgrade.md's `helm upgrade --reuse-values` to the next release with the tutorial's finished run
    in place: here this chart as 0.1.1, its image the same bits under the new tag (as a registry would serve it).
    The operator pod is replaced, the new one counts the run among the Succeeded ones (its own kaliper_objects
    gauge), and the run is as it was: the same status, the same report ConfigMap, no Job made again; `kaliper
    report` reads it."""
    kubectl = cluster.kubectl
    before = kubectl.json("get", "prun", "iris-sweep")
    report = kubectl.json("get", "configmap", "iris-sweep-report")["metadata"]
    jobs = kubectl.json("get", "jobs", "-l", "kaliper.dev/profilerun=iris-sweep")["items"]
    replaced = operator_pod(cluster)["metadata"]["uid"]
    chart = tmp_path / "kaliper"
    shutil.copytree(REPO / "charts" / "kaliper", chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta | {"version": "0.1.1", "appVersion": "0.1.1"}))
    cluster.tag_image(f"{IMAGE_REPOSITORY}:{meta['appVersion']}", f"{IMAGE_REPOSITORY}:0.1.1")

    upgraded = cluster.helm(
        "upgrade", "kaliper", str(chart), "-n", OPERATOR_NAMESPACE, "--reuse-values", "--wait", "--timeout=3m"
    )
    assert upgraded.returncode == 0, upgraded.stderr
    pod = operator_pod(cluster)
    assert pod["metadata"]["uid"] != replaced and pod["spec"]["containers"][0]["image"] == f"{IMAGE_REPOSITORY}:0.1.1"
    metrics = f"http://{pod['status']['podIP']}:8080/metrics"

    def counted_succeeded() -> bool:
        try:
            with urllib.request.urlopen(metrics, timeout=5) as answer:
                exposition = answer.read().decode()
        except OSError:
            return False
        return 'kaliper_objects{kind="ProfileRun",phase="Succeeded"} 1.0' in exposition

    kubectl.wait_for(counted_succeeded, timeout=120, what="the upgraded operator to count the finished run")
    after = kubectl.json("get", "prun", "iris-sweep")
    assert after["status"] == before["status"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert (
        kubectl.json("get", "configmap", "iris-sweep-report")["metadata"]["resourceVersion"]
        == report["resourceVersion"]
    )
    jobs_after = kubectl.json("get", "jobs", "-l", "kaliper.dev/profilerun=iris-sweep")["items"]
    assert [j["metadata"]["uid"] for j in jobs_after] == [j["metadata"]["uid"] for j in jobs]
    printed = walkthrough[0].shell(".venv/bin/kaliper report iris-sweep")
    assert "ProfileRun iris-sweep" in printed and "verdict: Met" in printed


def test_the_gpu_labelled_worker_receives_the_gpu_example(walkthrough, kind) -> None:  # type: ignore[no-untyped-def]
    # A GPU node's device plugin advertises its devices as extended resources in the node's status; without a
    # GPU the test does what Kubernetes documents for advertising one by hand (a PATCH of status.capacity).
    gpu_worker = kind.kubectl("get", "nodes", "-l", "kaliper.dev/pool=gpu", "-o", "name").stdout.split()
    assert gpu_worker == ["node/kaliper-worker2"]
    patch = '[{"op": "add", "path": "/status/capacity/nvidia.com~1mig-1g.5gb", "value": "1"}]'
    kind.kubectl("patch", "node", "kaliper-worker2", "--subresource=status", "--type=json", "-p", patch)
    # The example as written, but for its CPU and memory: it asks 2 to 4 CPUs, and these nodes have 2 in all.
    # Its node selector, toleration and GPU slice are what decide where it lands.
    example = yaml.safe_load(GPU_EXAMPLE.read_text())
    example["spec"]["resources"].update(requests={"cpu": "100m", "memory": "128Mi"}, limits={"memory": "256Mi"})
    kind.kubectl("apply", "-f", "-", input=yaml.safe_dump(example))

    def scheduled() -> list[str]:
        pods = kind.kubectl.json("get", "pods", "-n", "default", "-l", "app.kubernetes.io/instance=resnet50-triton")
        return [p["spec"]["nodeName"] for p in pods["items"] if p["spec"].get("nodeName")]

    kind.kubectl.wait_for(scheduled, timeout=120, what="the GPU example's pod to be scheduled")
    assert scheduled() == ["kaliper-worker2"]
    kind.kubectl("delete", "-f", "-", input=yaml.safe_dump(example))  # its image is nowhere: no pulls meanwhile
