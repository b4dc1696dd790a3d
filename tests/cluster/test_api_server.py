"""The CRDs on a real kube-apiserver: installation, examples, rejection of invalid manifests (agreeing with
`kaliper validate`), the status subresource, printer columns, immutability and garbage collection."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from kaliper.api.loader import check_document, read_documents
from kaliper.loadgen.config import LoadGenConfig
from tests.support.cluster_objects import model_deployment
from tests.support.controlplane import Kubectl
from tests.support.paths import CATALOGUE, EXAMPLES, MINIMAL, REPO

CATALOGUE_FILES = sorted(CATALOGUE.glob("*.yaml"))


def expected_field(path: Path) -> str:
    match = re.search(r"^# expect: (\S+)", path.read_text(), re.M)
    assert match, f"{path.name} has no '# expect: <field path>' header"
    return match.group(1)


def test_crds_are_established_with_names_and_categories(crds: Kubectl) -> None:
    listed = crds.json("get", "crd", "-l", "app.kubernetes.io/part-of=kaliper")["items"]
    by_kind = {c["spec"]["names"]["kind"]: c for c in listed}
    assert set(by_kind) == {"ModelDeployment", "ProfileRun", "ModelOptimization", "Cleanup"}
    for crd in listed:
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True"
        assert conditions.get("NamesAccepted") == "True"
        assert "kaliper" in crd["spec"]["names"]["categories"]
    resources = crds("api-resources", "--api-group=kaliper.dev", "-o", "wide").stdout
    for short in ("mdep", "prun", "mopt", "kclean"):
        assert re.search(rf"\b{short}\b", resources), resources


def test_every_example_applies(crds: Kubectl, namespace: str) -> None:
    """Every manifest applies; the load generator's configs (loadtest*.yaml) are not manifests, and validate
    as what they are."""
    loadtests = sorted(EXAMPLES.rglob("loadtest*.yaml"))
    assert [p.relative_to(EXAMPLES).as_posix() for p in loadtests] == [
        "llm/loadtest-chat.yaml",
        "llm/loadtest-trace.yaml",
    ]
    for path in loadtests:
        LoadGenConfig.model_validate(yaml.safe_load(path.read_text()))
    for path in sorted(set(EXAMPLES.rglob("*.yaml")) - set(loadtests)):
        # Not metrics-server's APIService: an aggregated API no pod of kwok's nodes serves fails discovery, and
        # every namespace's deletion on this control plane then waits for it (seen: the tier's later tests).
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] != "APIService"]
        for doc in docs:
            doc["metadata"]["namespace"] = namespace
        result = crds("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(d) for d in docs), check=False)
        assert result.returncode == 0, f"{path.name}: {result.stderr}"
    listed = crds.json("get", "kaliper", "-n", namespace)["items"]
    kinds = {item["kind"] for item in listed}
    assert kinds == {"ModelDeployment", "ProfileRun", "ModelOptimization", "Cleanup"}


def test_catalogue_is_large_enough() -> None:
    assert len(CATALOGUE_FILES) >= 15


@pytest.mark.parametrize("path", CATALOGUE_FILES, ids=lambda p: p.stem)
def test_server_and_kaliper_validate_reject_the_same_manifest(crds: Kubectl, namespace: str, path: Path) -> None:
    field = expected_field(path)

    documents = [check_document(d) for d in read_documents(path)]
    local = "\n".join(str(p) for d in documents for p in d.problems)
    assert local, f"kaliper validate accepted {path.name}"
    assert field in local, f"kaliper validate did not name {field}: {local}"

    result = crds("apply", "-n", namespace, "-f", str(path), check=False)
    assert result.returncode != 0, f"the API server accepted {path.name}"
    assert field in result.stderr, f"the API server did not name {field}: {result.stderr}"


@pytest.mark.parametrize("path", sorted(MINIMAL.glob("*.yaml")), ids=lambda p: p.stem)
def test_server_and_kaliper_validate_accept_a_manifest_that_leaves_optional_fields_out(
    crds: Kubectl, namespace: str, path: Path
) -> None:
    """The server applies no defaults: a rule that reads into a field left out fails with "no such key"."""
    documents = [check_document(d) for d in read_documents(path)]
    assert [str(p) for d in documents for p in d.problems] == []
    result = crds("apply", "-n", namespace, "-f", str(path), check=False)
    assert result.returncode == 0, result.stderr


def _apply(kubectl: Kubectl, namespace: str, manifest: dict) -> None:
    kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))


def _profile_run(name: str) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": name},
        "spec": {
            "target": {"url": "http://example.invalid"},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
        },
    }


def test_status_is_written_only_through_the_status_subresource(crds: Kubectl, namespace: str) -> None:
    manifest = _profile_run("status-run") | {"status": {"phase": "Succeeded"}}
    _apply(crds, namespace, manifest)
    assert "status" not in crds.json("get", "profilerun", "status-run", "-n", namespace)  # ignored on create

    crds("patch", "profilerun", "status-run", "-n", namespace, "--type=merge", "-p", '{"status":{"phase":"Failed"}}')
    assert "status" not in crds.json("get", "profilerun", "status-run", "-n", namespace)  # ignored on the main resource

    status = {
        "status": {
            "phase": "Succeeded",
            "progress": {"completedTrials": 4, "totalTrials": 4, "summary": "4/4"},
            "best": {"trial": 2, "p99Ms": 41.5, "throughputRps": 812.25},
            "verdict": "Met",
        }
    }
    crds(
        "patch",
        "profilerun",
        "status-run",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    assert crds.json("get", "profilerun", "status-run", "-n", namespace)["status"]["phase"] == "Succeeded"

    table = crds("get", "profilerun", "status-run", "-n", namespace).stdout.splitlines()
    assert re.split(r"\s{2,}", table[0].strip()) == ["NAME", "PHASE", "PROGRESS", "P99-MS", "RPS", "VERDICT", "AGE"]
    assert re.split(r"\s{2,}", table[1].strip())[:6] == ["status-run", "Succeeded", "4/4", "41.5", "812.25", "Met"]


def test_status_is_validated_too(crds: Kubectl, namespace: str) -> None:
    _apply(crds, namespace, _profile_run("bad-status"))
    result = crds(
        "patch",
        "profilerun",
        "bad-status",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"phase":"Exploded"}}',
        check=False,
    )
    assert result.returncode != 0 and "status.phase" in result.stderr


def test_profilerun_spec_is_immutable(crds: Kubectl, namespace: str) -> None:
    _apply(crds, namespace, _profile_run("frozen"))
    result = crds(
        "patch",
        "profilerun",
        "frozen",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"load":{"closedLoop":{"concurrency":9}}}}',
        check=False,
    )
    assert result.returncode != 0
    assert "spec cannot change" in result.stderr
    # Metadata stays writable (labels, finalizers, kopf's annotations).
    crds("label", "profilerun", "frozen", "-n", namespace, "team=ml")


def test_modeloptimization_spec_is_immutable(crds: Kubectl, namespace: str) -> None:
    # Its candidates, report and follow-ups come from the spec its Job started with (and kstatus would wait
    # forever on an observedGeneration a finished object never moves).
    optimization = yaml.safe_load((EXAMPLES / "modeloptimization.yaml").read_text())
    optimization["metadata"] = {"name": "frozen-opt"}
    _apply(crds, namespace, optimization)
    result = crds(
        "patch",
        "modeloptimization",
        "frozen-opt",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"ttl":{"afterSuccess":"1h"}}}',
        check=False,
    )
    assert result.returncode != 0
    assert "a ModelOptimization's spec cannot change; create a new one" in result.stderr
    crds("label", "modeloptimization", "frozen-opt", "-n", namespace, "team=ml")


def test_owned_objects_are_garbage_collected(crds: Kubectl, namespace: str) -> None:
    _apply(crds, namespace, _profile_run("owner"))
    owner = crds.json("get", "profilerun", "owner", "-n", namespace)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "owner-report",
            "ownerReferences": [
                {
                    "apiVersion": "kaliper.dev/v1alpha1",
                    "kind": "ProfileRun",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {"report.json": "{}"},
    }
    _apply(crds, namespace, config_map)
    crds("delete", "profilerun", "owner", "-n", namespace)
    crds.wait_for(
        lambda: crds("get", "configmap", "owner-report", "-n", namespace, check=False).returncode != 0,
        timeout=60,
        what="the garbage collector to delete the owned ConfigMap",
    )


def test_committed_crds_are_what_is_installed(crds: Kubectl) -> None:
    """The chart ships the same files as crds/ (the sync test checks both against the models)."""
    for path in sorted((REPO / "crds").glob("*.yaml")):
        chart_copy = REPO / "charts" / "kaliper" / "files" / "crds" / path.name
        assert chart_copy.read_text() == path.read_text()


def test_a_status_built_from_a_report_is_accepted_by_the_server(crds: Kubectl, namespace: str) -> None:
    from datetime import UTC, datetime

    from kaliper.loadgen.results import latency_figures
    from kaliper.measure.histogram import LatencyHistogram
    from kaliper.report.schema import (
        ProfileReport,
        RecommendationReport,
        SloCheck,
        TrialReport,
        TrialResources,
    )
    from kaliper.report.status import status_from_report
    from tests.support.reports import make_stage

    histogram = LatencyHistogram()
    for ms in range(1, 201):
        histogram.record(ms / 1000)
    figures = latency_figures(histogram)
    stage = make_stage(figures, 20, level=8, requests=200, stop_reason="reached maxDuration (10s)")
    trial = TrialReport(
        index=0,
        name="t0",
        parameters={"cpu": "500m", "concurrency": "8"},
        status="Succeeded",
        stage=stage,
        resources=TrialResources(source="cgroup", cpu_avg_cores=0.49, oom_kills=0, cpu_throttled_ratio=0.9, series=[]),
        slo=[SloCheck(objective="p99 <= 150ms", verdict="NotMet", observed="198.00ms (95% CI 190.00-205.00ms)")],
        slo_verdict="NotMet",
        cost_per_million_requests=0.42,
        core_hours_per_million_requests=6.9,
    )
    report = ProfileReport(
        name="from-report",
        started_at=datetime.now(UTC),
        finished_at=datetime.now(UTC),
        target="ModelDeployment/iris",
        strategy="grid",
        trials=[trial],
        best_trial=0,
        verdict="NotMet",
        recommendation=RecommendationReport(
            cpu_request="560m",
            cpu_limit="560m",
            memory_request="64Mi",
            memory_limit="80Mi",
            replicas=2,
            rationale="test",
        ),
    )
    status = status_from_report(report)
    _apply(crds, namespace, _profile_run("from-report"))
    crds(
        "patch",
        "profilerun",
        "from-report",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status.to_manifest()}),
    )
    stored = crds.json("get", "profilerun", "from-report", "-n", namespace)["status"]
    assert stored["trials"][0]["sloViolations"] == ["p99 <= 150ms: NotMet, observed 198.00ms (95% CI 190.00-205.00ms)"]
    assert stored["recommendation"]["requests"] == {"cpu": "560m", "memory": "64Mi"}
    row = re.split(r"\s{2,}", crds("get", "profilerun", "from-report", "-n", namespace).stdout.splitlines()[1])
    # P99-ms: the 198th of the 200 latencies 1..200 ms, as the histogram holds it (198 ms to 3 significant digits).
    assert row[1:6] == ["Succeeded", "1/1", "198.015", "20", "NotMet"]


def test_a_status_written_for_an_object_deleted_meanwhile_is_dropped(crds: Kubectl, namespace: str) -> None:
    """A Deployment's event mirrored into its ModelDeployment just after a trial's teardown deleted it: the
    operator's status write finds nothing, and that is no error (it logged a traceback before)."""
    from kaliper.controllers import kube

    os.environ["KUBECONFIG"] = str(crds.kubeconfig)
    kube.api_client.cache_clear()
    kube.patch_status("ModelDeployment", namespace, "gone", {"phase": "Ready"})
    crds("apply", "-n", namespace, "-f", "-", input=json.dumps(model_deployment("here")))
    kube.patch_status("ModelDeployment", namespace, "here", {"phase": "Pending", "message": "written"})
    status = crds.json("get", "modeldeployment", "here", "-n", namespace)["status"]
    assert (status["phase"], status["message"]) == ("Pending", "written")
