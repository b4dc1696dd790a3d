"""`kaliper report RUN` reads a finished run's report from the cluster, from the ConfigMap the operator writes
(configmap_content: plain text up to 900 KiB, gzipped under binaryData above), and says why when there is
none."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime

from kaliper.report.schema import ProfileReport, ResourceSeriesPoint, TrialReport, TrialResources
from kaliper.report.store import configmap_content
from tests.support.controlplane import Kubectl
from tests.support.paths import KALIPER


def report(name: str, points: int) -> ProfileReport:
    series = [ResourceSeriesPoint(t_s=i / 2, cpu_cores=0.25 + i % 7, memory_bytes=1e8 + i) for i in range(points)]
    trial = TrialReport(
        index=0,
        name=f"{name}-t0",
        parameters={"cpu": "1"},
        status="Succeeded",
        resources=TrialResources(source="prometheus", series=series),
    )
    return ProfileReport(
        name=name,
        namespace="ml",
        started_at=datetime(2026, 11, 24, 8, 0, tzinfo=UTC),
        target="ModelDeployment/iris",
        strategy="grid",
        trials=[trial],
        verdict="Met",
    )


def store(kubectl: Kubectl, namespace: str, saved: ProfileReport) -> dict:
    content = configmap_content("report.json", saved.model_dump_json(by_alias=True, exclude_none=True))
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{saved.name}-report"}, **content}
    kubectl("apply", "-n", namespace, "--server-side", "-f", "-", input=json.dumps(configmap))
    return content


def kaliper_report(kubectl: Kubectl, *args: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "KUBECONFIG": str(kubectl.kubeconfig)}
    return subprocess.run([str(KALIPER), "report", *args], capture_output=True, text=True, env=environment)


def test_a_report_is_read_from_its_configmap_plain_or_gzipped(crds: Kubectl, namespace: str) -> None:
    small, large = report("small", 10), report("large", 20_000)
    assert set(store(crds, namespace, small)) == {"data"}
    assert set(store(crds, namespace, large)) == {"binaryData"}  # over 900 KiB: kubectl's jsonpath shows nothing
    for saved in (small, large):
        shown = kaliper_report(crds, saved.name, "-n", namespace, "--json")
        assert shown.returncode == 0, shown.stderr
        assert ProfileReport.model_validate_json(shown.stdout) == saved
    table = kaliper_report(crds, "small", "-n", namespace)
    assert table.returncode == 0, table.stderr
    assert "small" in table.stdout and "ModelDeployment/iris" in table.stdout


def test_a_run_without_a_report_is_explained(crds: Kubectl, namespace: str) -> None:
    shown = kaliper_report(crds, "unfinished", "-n", namespace)
    assert shown.returncode == 1
    assert shown.stderr.strip() == (
        f"Error: ProfileRun {namespace}/unfinished has no report (no ConfigMap unfinished-report): a run writes "
        f"it when it finishes; `kubectl get profilerun unfinished -n {namespace}` shows where it is"
    )
