"""spec.prediction on the real API server, the operator in this process: a ModelDeployment held to scripted
profiles against production read from a real Prometheus (Debian's). The test control plane has no kubelet, so
production is two real built-in servers on loopback that Prometheus scrapes with the labels Kubernetes discovery
gives a pod's series (`namespace`, `pod`, the Deployment's pods' names), and their traffic is this test's own
(tests/support/production.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kaliper.controllers import metrics
from kaliper.serving.examples import make_iris
from tests.support.builtin_server import serve
from tests.support.cluster_objects import profile_run
from tests.support.controlplane import Kubectl, fresh_namespace
from tests.support.groundtruth import wait_http
from tests.support.operator_runner import LOOPBACK_ALLOWED, running_operator
from tests.support.production import BATCHED, HISTOGRAM, infer, scripted_profile, send, wait_for_value
from tests.support.prometheus import pods_prometheus

PER_SERVER = 200
# What each ConfigMap's profile says of cpu=1, against production's 20 ms and more a request at tens of requests a
# second per replica: p99 200 ms at 1-1,000 requests a second; p99 2 ms at the same loads; p99 200 ms at 5,000-6,000.
PROFILES = {"wide": (200.0, (1.0, 1000.0)), "tight": (2.0, (1.0, 1000.0)), "busier": (200.0, (5000.0, 6000.0))}


def deployment(profile: str) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "iris"},
        "spec": {
            "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "iris"},
            "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
            "prediction": {
                "profile": {"configMap": {"name": profile, "key": "report.json"}},
                "window": "10m",
                "interval": "10m",  # the checks below follow spec changes, each checked at once
            },
        },
    }


def profiles(crds: Kubectl, namespace: str, folder: Path) -> None:
    for name, (p99, rates) in PROFILES.items():
        path = folder / f"{name}.json"
        path.write_text(scripted_profile(p99, rates).model_dump_json(by_alias=True))
        crds("create", "configmap", name, f"--from-file=report.json={path}", "-n", namespace)


@pytest.fixture(scope="module")
def production(
    crds: Kubectl, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(the namespace production runs in, another namespace), the operator running with production's Prometheus."""
    folder = tmp_path_factory.mktemp("prediction")
    iris = make_iris(folder / "iris.onnx")
    # The Deployment's two pods, and a pod of another object whose name starts the same ("iris-x-0": a
    # StatefulSet's), serving the same model in the same namespace: not the deployment's.
    servers = [serve(iris, *BATCHED) for _ in "abc"]
    try:
        for _, base in servers:
            wait_http(f"{base}/v2/health/ready")
            infer(base)  # a model's series appear with its first answer
        for namespace in fresh_namespace(crds, request, "p"):
            for other in fresh_namespace(crds, request, "q"):
                pods = {
                    base.removeprefix("http://"): {"namespace": namespace, "pod": pod}
                    for (_, base), pod in zip(servers, ("iris-5d9c7b8f4-x7k2p", "iris-5d9c7b8f4-m4q9z", "iris-x-0"),
                                              strict=True)
                }  # fmt: skip
                with pods_prometheus(pods) as url:
                    wait_for_value(url, f"count({HISTOGRAM}_count == 1)", 3)
                    send([base for _, base in servers[:2]], PER_SERVER)
                    send([servers[2][1]], 50)
                    wait_for_value(url, f"sum({HISTOGRAM}_count)", 3 + 2 * PER_SERVER + 50)
                    profiles(crds, namespace, folder)
                    profiles(crds, other, folder)
                    with running_operator(crds, {**LOOPBACK_ALLOWED, "KALIPER_PROMETHEUS_URL": url}):
                        yield namespace, other
    finally:
        for process, _ in servers:
            process.terminate()
            process.wait()


def checked(crds: Kubectl, namespace: str, reason: str) -> tuple[dict, dict]:
    """(status.production, the PredictionHolds condition) once the check says `reason`."""

    def status() -> dict:
        return crds.json("get", "modeldeployment", "iris", "-n", namespace).get("status") or {}

    crds.wait_for(lambda: (status().get("production") or {}).get("reason") == reason, what=f"a check saying {reason}")
    found = status()
    (condition,) = [c for c in found["conditions"] if c["type"] == "PredictionHolds"]
    return found["production"], condition


def events(crds: Kubectl, namespace: str) -> list[tuple[str, str]]:
    found = crds.json("get", "events", "-n", namespace, "--field-selector", "involvedObject.name=iris")["items"]
    return [(e["type"], e["reason"]) for e in found if e["reason"] in {"Holds", "SlowerThanProfiled"}]


def use(crds: Kubectl, namespace: str, profile: str) -> None:
    patch = {"spec": {"prediction": {"profile": {"configMap": {"name": profile}}}}}
    crds("patch", "modeldeployment", "iris", "-n", namespace, "--type", "merge", "-p", json.dumps(patch))


def test_a_deployment_is_held_to_its_profile_and_told_when_it_stops_holding(
    production: tuple[str, str], crds: Kubectl
) -> None:
    namespace, _ = production
    crds("apply", "-n", namespace, "-f", "-", input=json.dumps(deployment("wide")))
    found, condition = checked(crds, namespace, "Holds")
    assert (condition["status"], found["holds"]) == ("True", True)
    # Every answer after each series' first sample, on the Deployment's two pods (not iris-x-0's 50), held to the
    # profile's choice.
    assert (found["requests"], found["replicas"], found["configuration"]) == (2 * PER_SERVER, 2, {"cpu": "1"})
    assert (found["profile"], found["window"], found["profiledRps"]) == (
        "ConfigMap wide key report.json", "10m", [1.0, 1000.0]
    )  # fmt: skip
    assert [(f["figure"], f["inside"]) for f in found["figures"]] == [
        ("p50 latency (ms)", True),
        ("p99 latency (ms)", True),
    ]
    assert all(f["observedLow"] >= 10.0 for f in found["figures"])  # the 20 ms queue delay's bucket or above

    use(crds, namespace, "tight")
    found, condition = checked(crds, namespace, "SlowerThanProfiled")
    assert (condition["status"], found["holds"]) == ("False", False)
    assert found["message"].startswith("p50 ") and "above the profile's 1 ms (0.882-1.122 ms)" in found["message"]
    crds.wait_for(lambda: len(events(crds, namespace)) == 2, what="an Event for each change")
    assert sorted(events(crds, namespace)) == [("Normal", "Holds"), ("Warning", "SlowerThanProfiled")]
    wide = crds("get", "modeldeployment", "iris", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-3:] == ["ENDPOINT", "PREDICTION", "AGE"] and wide[1].split()[-2] == "SlowerThanProfiled"
    # What to alert on: the operator's metrics say it from the status.
    family = next(f for f in metrics.Predictions().collect() if f.name == "kaliper_prediction")
    assert {"namespace": namespace, "name": "iris", "reason": "SlowerThanProfiled"} in [
        s.labels for s in family.samples
    ]

    use(crds, namespace, "busier")
    found, condition = checked(crds, namespace, "LoadOutsideProfile")
    assert (condition["status"], found.get("holds"), found.get("figures", [])) == (
        "Unknown",
        None,
        [],
    )
    assert "outside the profiled 5000-6000 requests/s: not extrapolated" in found["message"]

    use(crds, namespace, "missing")
    found, condition = checked(crds, namespace, "ProfileUnavailable")
    assert condition["status"] == "Unknown"
    said = "ConfigMap missing key report.json holds no report (a ProfileRun's report is there once the run finished)"
    assert found["message"] == f"{said}: spec.prediction.profile"


def test_production_is_read_in_the_deployments_own_namespace_only(production: tuple[str, str], crds: Kubectl) -> None:
    """The same name in another namespace reads none of production's series: the operator's selector names the
    namespace, and its queries are confined to it."""
    _, other = production
    crds("apply", "-n", other, "-f", "-", input=json.dumps(deployment("wide")))
    found, condition = checked(crds, other, "ProductionUnavailable")
    assert condition["status"] == "Unknown" and found["requests"] == 0
    assert (
        f'no kaliper_server_request_seconds_count{{namespace="{other}",pod=~"iris-[a-z0-9]+-[a-z0-9]{{5}}"}}'
        in found["message"]
    )


SOURCE_RUN = profile_run("iris-sweep", None, sweep={"cpu": ["500m", "1"]})


def reprofiles(crds: Kubectl, namespace: str) -> list[dict]:
    return crds.json("get", "profileruns", "-n", namespace, "-l", "kaliper.dev/reprofile-of=iris")["items"]


def test_a_prediction_that_stops_holding_is_profiled_again_once_at_a_time(
    production: tuple[str, str], crds: Kubectl
) -> None:
    namespace, _ = production
    crds("apply", "-n", namespace, "-f", "-", input=json.dumps(SOURCE_RUN))
    policy = {"run": "iris-sweep", "after": "0s", "minInterval": "1s"}
    patch = {"spec": {"prediction": {"profile": {"configMap": {"name": "tight"}}, "reprofile": policy}}}
    crds("patch", "modeldeployment", "iris", "-n", namespace, "--type", "merge", "-p", json.dumps(patch))
    crds.wait_for(lambda: len(reprofiles(crds, namespace)) == 1, what="a ProfileRun that profiles again")
    (made,) = reprofiles(crds, namespace)
    # A copy of the run named, aimed at this deployment (its trials serve copies of it), owned by it.
    assert made["spec"]["target"] == {"deploymentRef": {"name": "iris"}}
    assert made["spec"]["sweep"] == {"cpu": ["500m", "1"]}
    assert [(o["kind"], o["name"]) for o in made["metadata"]["ownerReferences"]] == [("ModelDeployment", "iris")]
    found, condition = checked(crds, namespace, "SlowerThanProfiled")
    assert (condition["status"], found["reprofiled"]) == ("False", made["metadata"]["name"])
    reasons = [e["reason"] for e in crds.json("get", "events", "-n", namespace, "--field-selector",
                                               "involvedObject.name=iris")["items"]]  # fmt: skip
    assert reasons.count("Reprofiling") == 1

    # Past the minimum interval and still slower: the run it made has not finished, so no second one.
    made_at = datetime.fromisoformat(found["reprofiledAt"].replace("Z", "+00:00"))
    crds.wait_for(lambda: datetime.now(UTC) - made_at > timedelta(seconds=1), what="the minimum interval")
    crds("patch", "modeldeployment", "iris", "-n", namespace, "--type", "merge", "-p",
         json.dumps({"spec": {"prediction": {"tolerance": 0.05}}}))  # fmt: skip
    crds.wait_for(
        lambda: (
            (crds.json("get", "modeldeployment", "iris", "-n", namespace)["status"]["production"]["checkedAt"])
            > found["checkedAt"]
        ),
        what="the check of the changed spec",
    )
    assert [r["metadata"]["name"] for r in reprofiles(crds, namespace)] == [made["metadata"]["name"]]
