"""An autoscaler rehearsed on the real cluster: a ProfileRun against an autoscaled ModelDeployment sweeps two
autoscaler settings; each trial's ModelDeployment gets its own HorizontalPodAutoscaler (made by the operator), the
controller manager's own HPA controller reads the servers' CPU from metrics-server (built here from its module,
installed by the walkthrough: examples/kind/metrics-server.yaml) and scales the Deployment under the load, and the
report reads what happened from the pods and the HPA's Events.

The server is the test's own, so that its capacity does not depend on how busy the machine is: it takes 15 s to
start listening (the startup delay) and answers one request at a time in 50 ms (20 a second per replica), 5 ms of it
busy on the CPU, which is what the autoscaler follows (a tenth of what it holds the lock for, so that two trials'
servers at once leave the machine's cores to the suite's other tests). It names itself in each answer
(Kaliper-Replica, as Kaliper's built-in server does in a pod) and closes a connection after ten answers, as nginx's
keepalive_requests does, so that the load generator's connections reach the replicas added after they were opened.
25 requests a second, sent on their clock, are more than one replica serves: without a spare replica the queue grows
until the autoscaler's second replica has started and passed its probe, and the SLO is missed; with a warm spare
(minReplicas 2) it holds from the start. The two trials run at once (`search.parallelism`), each with its own copy
of the deployment and its own autoscaler."""

from __future__ import annotations

from pathlib import Path

from tests.support.kind_cluster import IMAGE, KindCluster
from tests.support.kind_operator import Operator, apply_with_model, run_report, wait_for_phase

STARTUP_DELAY_S = 15
SERVER = f"""
import http.server, socket, threading, time
time.sleep({STARTUP_DELAY_S})
one_at_a_time = threading.Lock()
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answered = 0
    def answer(self):
        self.answered += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.send_header("Kaliper-Replica", socket.gethostname())
        if self.answered % 10 == 0:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"{{}}")
    def do_GET(self):
        self.answer()
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with one_at_a_time:
            start = time.monotonic()
            while time.monotonic() < start + 0.005:
                pass
            time.sleep(max(0.0, start + 0.05 - time.monotonic()))
        self.answer()
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("", 8080), Handler).serve_forever()
"""
DEPLOYMENT = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ModelDeployment",
    "metadata": {"name": "queue"},
    "spec": {
        "model": {"configMap": {"name": "iris-model", "key": "model.onnx"}, "name": "queue"},
        "runtime": {
            "type": "custom",
            "image": IMAGE,
            "command": ["python", "-c", SERVER],
            "port": 8080,
            "protocol": "http-json",
        },
        # A small request, so that the busy server is far above the utilisation the autoscaler aims at.
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}},
        "readiness": {"period": "1s"},
        "autoscaling": {
            "minReplicas": 1,
            "maxReplicas": 3,
            "cpuUtilization": 50,
            "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}},
        },
    },
}
RUN = {
    "apiVersion": "kaliper.dev/v1alpha1",
    "kind": "ProfileRun",
    "metadata": {"name": "rehearsal"},
    "spec": {
        "target": {"deploymentRef": {"name": "queue"}},
        "request": {"protocol": "http-json"},
        "payload": {"inline": "{}"},
        "load": {"openLoop": {"rate": 25}, "warmup": "5s", "minDuration": "80s", "maxDuration": "80s"},
        "sweep": {"autoscaling": [{"name": "warm-spare", "minReplicas": 2}, {"name": "one", "minReplicas": 1}]},
        "search": {"parallelism": 2},
        "slo": {"latency": [{"percentile": 99, "max": "1s"}]},
        "cost": {"perCoreHour": 1.0},
        "readyTimeout": "3m",
    },
}


def test_an_autoscaler_is_rehearsed_and_the_setting_with_a_warm_spare_is_chosen(
    cluster: KindCluster, operator: Operator, cluster_namespace: str, iris_model: Path
) -> None:
    namespace = cluster_namespace
    apply_with_model(cluster, namespace, iris_model, DEPLOYMENT, RUN)
    status = wait_for_phase(cluster, namespace, "rehearsal", "Succeeded", timeout=480)
    report = run_report(cluster, namespace, "rehearsal")
    assert [t["phase"] for t in status["trials"]] == ["Succeeded", "Succeeded"], status["trials"]
    warm, one = report["trials"]
    assert (warm["parameters"]["autoscaling"], one["parameters"]["autoscaling"]) == ("warm-spare", "one")
    for trial in (warm, one):
        rehearsal = trial["rehearsal"]
        assert rehearsal["autoscaler"] == trial["name"], rehearsal
        assert all(w["good"] is not None for w in trial["stage"]["windows"])

    # Without a spare: one replica until the autoscaler's next one had started and waited out its 15 s.
    rehearsal = one["rehearsal"]
    assert (rehearsal["replicas"][0]["desired"], rehearsal["replicas"][0]["ready"]) == (1, 1), rehearsal["replicas"]
    assert max(c["desired"] for c in rehearsal["replicas"]) >= 2, rehearsal
    first = rehearsal["scaleUps"][0]
    assert first["decidedAtS"] > 0 and first["readyS"] - first["startedS"] >= STARTUP_DELAY_S, first
    answered = [s for s in rehearsal["scaleUps"] if "firstAnswerS" in s]
    assert answered and all(s["firstAnswerS"] >= s["readyS"] for s in answered), rehearsal["scaleUps"]
    assert rehearsal["scalingMissed"] > 0 and rehearsal["scalingRequests"] >= rehearsal["scalingMissed"]
    assert one["sloVerdict"] == "NotMet"
    # With one: two replicas ready before the load, the SLO held.
    start = warm["rehearsal"]["replicas"][0]
    assert (start["atS"], start["desired"], start["ready"]) == (0.0, 2, 2), warm["rehearsal"]
    assert warm["sloVerdict"] == "Met", warm["slo"]
    assert 2.0 <= warm["rehearsal"]["meanReplicas"] <= 3.0
    # Priced for what it held: 0.5 of a core (its limit) an hour per replica held on average.
    assert 1.0 <= warm["costPerHour"] <= 1.5, warm
    rows = {r["parameters"]["autoscaling"]: r for r in report["configurations"]}
    assert rows["warm-spare"].get("chosen") and not rows["one"].get("chosen"), rows
