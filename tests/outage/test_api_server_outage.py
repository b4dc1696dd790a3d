"""The operator rides out its API server going away, on a control plane of its own: the API server and etcd
stopped for 60 s (connections refused), frozen (connections accepted, never answered) and answering 503 (a
proxy in front of it), each in the middle of runs with trials at every stage. During the outage the operator
waits for it: its CPU and log lines are bounded (before, each object retried every step interval with a
traceback: 0.8 of a core and about 1.2 GB of log an hour). Afterwards every run ends Succeeded with its report,
every trial with the results its load generator handed in (through the same publish code a Job runs, which waits
for the API server too), and no load generator Job was made twice. Longer outages: bench/operator_outage.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from kaliper.report.publish import publish
from tests.support.controlplane import REPO, ControlPlane, build_binaries
from tests.support.failing_proxy import FailingProxy
from tests.support.many_runs import (
    LoadGeneratorPlayer,
    ProcessSampler,
    apply_runs,
    log_lines,
    operator_process,
    prepare_namespace,
    profile_run,
)

# Generous bounds that today's behaviour stays far inside, and the behaviour before it failed by far.
MAX_LINES_IN_A_MINUTE = 150
MAX_CPU_SHARE = 0.1


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own: its API server is stopped, which no other test may see."""
    plane = ControlPlane(build_binaries("controlplane"), node_monitor_grace_period="10m").start()
    try:
        assert plane.kubectl is not None
        plane.kubectl("apply", "--server-side", "-f", str(REPO / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd", "-l", "app.kubernetes.io/part-of=kaliper")
        yield plane
    finally:
        plane.stop()


def through_an_outage(
    plane: ControlPlane,
    root: Path,
    namespace: str,
    runs: list[dict],
    outage: tuple[Callable[[], None], Callable[[], None]],
    outage_s: float,
    start_after_played: int,
    server: str | None = None,
    jobs_made: int = 0,
) -> dict:
    """The runs applied, the outage begun once `start_after_played` load generators were played and ended
    `outage_s` later (and once `jobs_made` load-generator Jobs exist); returns what was measured during it and
    the player, once every run has finished."""
    kubectl = plane.kubectl
    assert kubectl is not None
    kubeconfig = prepare_namespace(kubectl, namespace, root)
    if server is not None:  # the operator talks to the API server through the proxy
        config = yaml.safe_load(kubeconfig.read_text())
        config["clusters"][0]["cluster"]["server"] = server
        kubeconfig.write_text(yaml.safe_dump(config))
    log = root / "operator.log"
    begin, end = outage
    figures: dict = {}
    with operator_process(kubeconfig, log, namespace) as operator:
        sampler = ProcessSampler(operator.pid)
        player = LoadGeneratorPlayer(namespace, root, plane.kubeconfig)
        apply_runs(kubectl, namespace, runs)
        deadline = time.monotonic() + 900  # generous: beside the suite's other worker
        while len(player.played) < start_after_played or len(player.jobs()) < jobs_made:
            assert time.monotonic() < deadline, f"only {len(player.played)} load generators started"
            # No more than that: the other runs wait on their load generators through the outage, however fast
            # the operator made their Jobs (a suite run's operator once logged no outage at all: most likely its
            # Jobs were all played at once and every run had finished before the outage began).
            player.play_new(at_most=start_after_played - len(player.played))
            time.sleep(1)
        lines, cpu, started = log_lines(log), sampler.cpu_seconds(), time.monotonic()
        begin()
        while time.monotonic() - started < outage_s:
            player.play_new()  # the harness's own calls fail too, as a kubelet's would
            time.sleep(2)
        figures["lines"] = log_lines(log) - lines
        figures["cpu_share"] = (sampler.cpu_seconds() - cpu) / (time.monotonic() - started)
        end()
        while (counted := player.phases()) is None or counted["Succeeded"] + counted["Failed"] < len(runs):
            assert time.monotonic() < deadline, f"runs not finished after the outage: {counted}"
            player.play_new()
            time.sleep(2)
        player.close()
    figures["phases"], figures["player"], figures["log"] = dict(counted), player, log.read_text()
    return figures


def assert_nothing_lost(plane: ControlPlane, namespace: str, figures: dict, runs: list[dict]) -> None:
    kubectl = plane.kubectl
    assert kubectl is not None
    assert figures["phases"] == {"Succeeded": len(runs)}, figures["phases"]
    trials = 0
    for run in kubectl.json("get", "profileruns", "-n", namespace)["items"]:
        status = run["status"]
        assert [t["phase"] for t in status["trials"]] == ["Succeeded"] * len(status["trials"]), run["metadata"]["name"]
        # Every trial's figures are the results document its load generator handed in: 3,000 requests.
        assert {t["requests"] for t in status["trials"]} == {3000}
        trials += len(status["trials"])
        report = kubectl.json("get", "configmap", f"{run['metadata']['name']}-report", "-n", namespace)
        assert json.loads(report["data"]["report.json"])["trials"]
    assert trials == sum(len(r["spec"]["sweep"]["cpu"]) for r in runs)
    made_twice = {name: uids for name, uids in figures["player"].uids.items() if len(uids) > 1}
    assert made_twice == {}


def test_the_api_server_and_etcd_stopped_for_a_minute_under_sixty_runs(plane: ControlPlane, tmp_path: Path) -> None:
    """Sixty runs in flight: the behaviour before (every object retried every step interval with a traceback)
    would log thousands of lines a minute here and use a quarter core or more; 200 runs and ten minutes are
    bench/operator_outage.py's (docs/benchmarks.md)."""
    runs = [profile_run("multi", ["250m", "500m", "1", "2"])]
    runs += [profile_run(f"run-{i:03d}", ["1"]) for i in range(59)]
    figures = through_an_outage(plane, tmp_path, "refused", runs, (plane.take_down, plane.bring_back), 60, 20)
    assert figures["lines"] <= MAX_LINES_IN_A_MINUTE, figures["log"][-5000:]
    assert figures["cpu_share"] <= MAX_CPU_SHARE
    # Stopping drops the connections in flight, then refuses new ones: the first failure seen names either.
    warnings = "\n".join(line for line in figures["log"].splitlines() if "[info " not in line)[-5000:]
    assert ": steps wait for it; probing /readyz with backoff up to 30 s" in figures["log"], warnings
    assert "API server back after " in figures["log"], warnings
    assert "Traceback" not in figures["log"]
    assert_nothing_lost(plane, "refused", figures, runs)


def test_an_operator_whose_runs_all_wait_on_their_load_generators_sees_the_outage_in_its_watches(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """No step calls the API server while every run waits on its load generator: the outage is seen where kopf's
    watches fail to reconnect, and the API server's absence is known (trials' timeouts leave it out) as when a
    step meets it. A suite run's operator once had nothing to call through a whole outage and logged none."""
    runs = [profile_run(f"run-{i:03d}", ["1"]) for i in range(3)]
    outage = (plane.take_down, plane.bring_back)
    figures = through_an_outage(plane, tmp_path, "idle", runs, outage, 20, 0, jobs_made=len(runs))
    warnings = "\n".join(line for line in figures["log"].splitlines() if "[info " not in line)[-5000:]
    first = next(line for line in figures["log"].splitlines() if "steps wait for it" in line)
    assert "API server refuses connections: steps wait for it" in first, warnings
    assert "ClientConnectorError(" in first, first  # kopf's watch's error, not a step's call's
    assert "API server back after " in figures["log"], warnings
    assert_nothing_lost(plane, "idle", figures, runs)


def test_an_api_server_that_stops_answering_is_waited_for(plane: ControlPlane, tmp_path: Path) -> None:
    runs = [profile_run(f"run-{i:03d}", ["500m", "1"]) for i in range(10)]
    freeze = (lambda: plane.freeze(True), lambda: plane.freeze(False))
    figures = through_an_outage(plane, tmp_path, "frozen", runs, freeze, 45, 6)
    assert figures["lines"] <= MAX_LINES_IN_A_MINUTE, figures["log"][-5000:]
    assert figures["cpu_share"] <= MAX_CPU_SHARE
    assert_nothing_lost(plane, "frozen", figures, runs)


def test_an_api_server_answering_503_is_waited_for(plane: ControlPlane, tmp_path: Path) -> None:
    runs = [profile_run(f"run-{i:03d}", ["500m", "1"]) for i in range(10)]
    pki = plane.root / "pki"
    upstream = int(plane.server.rsplit(":", 1)[1])
    with FailingProxy(upstream, pki / "apiserver.crt", pki / "apiserver.key").running() as proxy:
        failing = (lambda: proxy.fail(True), lambda: proxy.fail(False))
        server = f"https://127.0.0.1:{proxy.port}"
        figures = through_an_outage(plane, tmp_path, "unavailable", runs, failing, 30, 6, server)
        assert proxy.answered_503 > 0
    assert figures["lines"] <= MAX_LINES_IN_A_MINUTE, figures["log"][-5000:]
    assert figures["cpu_share"] <= MAX_CPU_SHARE
    # The watches met the 503s (whether a step's call did depends on what was due meanwhile): kopf's retries of
    # each watch are a line a minute at most.
    assert "failed; will retry: GET " in figures["log"] and "APIServerError" in figures["log"]
    assert_nothing_lost(plane, "unavailable", figures, runs)


def test_a_load_generator_hands_in_its_results_once_the_api_server_is_back(
    plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubectl = plane.kubectl
    assert kubectl is not None
    kubectl("create", "namespace", "handed-in")
    monkeypatch.setenv("KUBECONFIG", str(plane.kubeconfig))
    template = tmp_path / "results.yaml"
    template.write_text(yaml.safe_dump({"metadata": {"name": "t0-result", "namespace": "handed-in"}}))
    failed_once, handed_in = threading.Event(), []

    def sleep(seconds: float) -> None:
        failed_once.set()
        time.sleep(seconds)

    plane.take_down()
    publishing = threading.Thread(target=lambda: handed_in.append(publish('{"stages": []}', template, 300, sleep)))
    publishing.start()
    assert failed_once.wait(60)  # it met the outage
    plane.bring_back()
    publishing.join(120)
    assert handed_in == ["t0-result"]
    stored = kubectl.json("get", "configmap", "t0-result", "-n", "handed-in")
    assert stored["data"] == {"result.json": '{"stages": []}'}
