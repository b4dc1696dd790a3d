"""Scale-up on kind: an autoscaler rehearsed by the operator, each new replica's way to serving as the report gives it
against an observer on this machine that watched the same pods and autoscaler.

The cluster is the kind tutorial's (tests/support/kind_cluster.cluster_session: kind-config.yaml, Kaliper's image,
metrics-server, Prometheus, the chart); the ModelDeployment and the ProfileRun are the suite's rehearsal
(tests/kind/test_autoscaling.py): a server of set capacity (one request at a time, 50 ms each, 5 ms of it busy)
that takes 15 s to start, behind an HPA on CPU, under 25 requests a second, for two autoscaler settings at once.
Meanwhile the observer lists
the namespace's pods and HPAs every 0.5 s and stamps, on this machine's clock, when it first saw each pod, bound to a
node, its container running, Ready, and each new desiredReplicas. The report's stages (from the API server's
whole-second timestamps and the HPA's Events) are compared with the observer's, stage by stage.

    sudo .venv/bin/python bench/scaleup.py   # about 8 minutes, the cluster made and deleted
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.kind.test_autoscaling import DEPLOYMENT, RUN  # noqa: E402
from tests.support.controlplane import ControlPlaneError, build_binaries  # noqa: E402
from tests.support.kind_cluster import KindCluster, cluster_session  # noqa: E402
from tests.support.kind_operator import OPERATOR_NAMESPACE, apply_with_model, run_report  # noqa: E402

from kaliper.report.rehearsal_text import rehearsal_lines  # noqa: E402
from kaliper.report.schema import ProfileReport  # noqa: E402
from kaliper.serving.examples import make_iris  # noqa: E402

NAMESPACE = "scaleup"
POLL_S = 0.5


def fit_load_generators(cluster: KindCluster) -> None:
    """The chart's load generators allowed beside a server (kind has two workers, and a warm spare's two replicas
    take both) and made small, as the suite's kind tier sets them."""
    helm = build_binaries("helm") / "helm"
    subprocess.run(
        [str(helm), f"--kubeconfig={cluster.kubeconfig}", "upgrade", "kaliper", str(REPO / "charts" / "kaliper"),
         "-n", OPERATOR_NAMESPACE, "--reuse-values", "--set=loadGenerator.antiAffinity=preferred",
         "--set=loadGenerator.resources.requests.cpu=250m", "--wait", "--timeout=3m"],
        check=True,
    )  # fmt: skip


class Observer:
    """When this machine first saw each pod's stages and each autoscaler's new desired replicas."""

    def __init__(self, cluster: KindCluster) -> None:
        self.cluster = cluster
        self.pods: dict[str, dict[str, float]] = {}
        self.desired: dict[str, list[tuple[float, int]]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def watch(self) -> None:
        while not self.stop.wait(POLL_S):
            now = time.time()
            try:
                pods = self.cluster.kubectl.json("get", "pods", "-n", NAMESPACE)["items"]
                hpas = self.cluster.kubectl.json("get", "hpa", "-n", NAMESPACE)["items"]
            except ControlPlaneError:
                continue
            for pod in pods:
                seen = self.pods.setdefault(pod["metadata"]["name"], {"created": now})
                status = pod.get("status") or {}
                ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
                running = any("running" in (c.get("state") or {}) for c in status.get("containerStatuses") or [])
                for stage, reached in (("scheduled", bool(pod["spec"].get("nodeName"))), ("started", running),
                                       ("ready", ready)):  # fmt: skip
                    if reached:
                        seen.setdefault(stage, now)
            for hpa in hpas:
                wanted = (hpa.get("status") or {}).get("desiredReplicas")
                history = self.desired.setdefault(hpa["metadata"]["name"], [])
                if wanted and (not history or history[-1][1] != wanted):
                    history.append((now, wanted))


def compare(report: dict, observer: Observer) -> list[str]:
    """The report's scale-up stages beside the observer's, per new replica, and the differences."""
    lines, differences = [], []
    for trial in report["trials"]:
        rehearsal = trial.get("rehearsal") or {}
        decisions = observer.desired.get(trial["name"], [])
        for scale_up in rehearsal.get("scaleUps", []):
            seen = observer.pods.get(scale_up["replica"], {})
            # The observer's decision: the first new desired count seen at or before it saw the pod.
            decided = max((at for at, _ in decisions if at <= seen.get("created", 0) + POLL_S), default=None)
            if decided is None:
                continue
            row = [f"{trial['parameters']['autoscaling']:>10} {scale_up['replica']:<28}"]
            for stage, field in (("created", "createdS"), ("scheduled", "scheduledS"), ("started", "startedS"),
                                 ("ready", "readyS")):  # fmt: skip
                mine, theirs = scale_up.get(field), seen.get(stage)
                if mine is None or theirs is None:
                    row.append(f"{stage} -")
                    continue
                watched = theirs - decided
                differences.append(mine - watched)
                row.append(f"{stage} {mine:4.0f} s (observer {watched:5.1f} s)")
            lines.append(", ".join(row))
    if differences:
        lines.append(
            f"report - observer over {len(differences)} stages: median {statistics.median(differences):+.2f} s, "
            f"largest {max(differences, key=abs):+.2f} s (the API server's timestamps are whole seconds; the observer "
            f"lists every {POLL_S} s)"
        )
    return lines


def summary(report: dict) -> list[str]:
    lines = []
    for trial in report["trials"]:
        rehearsal = trial["rehearsal"]
        ready = [s["readyS"] for s in rehearsal["scaleUps"] if s.get("readyS") is not None]
        lines.append(
            f"{trial['parameters']['autoscaling']:>10}: SLO {trial['sloVerdict']}, attainment "
            f"{rehearsal['attainment']:.1%} ({rehearsal['attainmentCiLow']:.1%}-{rehearsal['attainmentCiHigh']:.1%}), "
            f"{rehearsal['scalingMissed']} of {rehearsal['scalingRequests']} missed while scaling up, "
            f"{len(rehearsal['scaleUps'])} scale-ups (decision to ready {', '.join(f'{r:.0f}' for r in ready)} s), "
            f"{rehearsal['meanReplicas']:.2f} replicas held, {trial['costPerHour']:.3f}/h, "
            f"{trial.get('costPerMillionRequests') or 0:.2f} per million requests"
        )
    return lines


def main() -> int:
    with tempfile.TemporaryDirectory() as folder, cluster_session() as cluster:
        model = make_iris(Path(folder) / "iris.onnx")
        fit_load_generators(cluster)
        cluster.kubectl("create", "namespace", NAMESPACE)
        observer = Observer(cluster)
        observer.thread.start()
        started = time.monotonic()
        apply_with_model(cluster, NAMESPACE, model, DEPLOYMENT, RUN)
        phase = ""
        while time.monotonic() - started < 900 and phase not in ("Succeeded", "Failed"):
            time.sleep(5)
            phase = (cluster.kubectl.json("get", "profilerun", "rehearsal", "-n", NAMESPACE).get("status") or {}).get(
                "phase", ""
            )
        observer.stop.set()
        observer.thread.join()
        print(f"ProfileRun {phase} after {time.monotonic() - started:.0f} s")
        if phase != "Succeeded":
            return 1
        report = run_report(cluster, NAMESPACE, "rehearsal")
        for line in summary(report) + compare(report, observer):
            print(line)
        for trial in ProfileReport.model_validate(report).trials:  # as `kaliper report` words it
            assert trial.rehearsal is not None
            print("\n".join(f"trial {trial.index} {line}" for line in rehearsal_lines(trial.rehearsal)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
