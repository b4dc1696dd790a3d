"""Test double of the exporters Prometheus scrapes in a cluster: cAdvisor, kube-state-metrics and
dcgm-exporter series with their real metric names and labels, and values known to the test.

Counters grow at fixed rates and every sample carries an explicit timestamp, so what Prometheus stores, and
therefore every rate and average over any window, is exactly known."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAMESPACE = "ml"
TRIAL_PODS = {"iris-t0-aaaaa": 0.5, "iris-t0-bbbbb": 0.25}  # pod -> CPU cores used
OTHER_POD = "iris-t1-ccccc"  # another trial's pod: must never be counted
MEMORY = {"iris-t0-aaaaa": 200 * 2**20, "iris-t0-bbbbb": 100 * 2**20, OTHER_POD: 9 * 2**30}
PERIODS_PER_S, THROTTLED_PER_S = 10.0, 4.0  # 40% of CFS periods throttled
GPU = {"util": 60.0, "fb_used_mib": 4096.0, "power_w": 250.0}
ORIGIN = 1_700_000_000.0


def exposition(now: float, dcgm_pod_label: str = "exported_pod") -> str:
    ms = int(now * 1000)
    t = ms / 1000 - ORIGIN
    lines = []

    def sample(name: str, labels: dict[str, str], value: float) -> None:
        rendered = ",".join(f'{k}="{v}"' for k, v in labels.items())
        lines.append(f"{name}{{{rendered}}} {value!r} {ms}")

    for pod, cores in {**TRIAL_PODS, OTHER_POD: 8.0}.items():
        server = {"namespace": NAMESPACE, "pod": pod, "container": "server"}
        sample("container_cpu_usage_seconds_total", server, cores * t)
        # The pause container and the pod-level cgroup: filtered out by container!="" and container!="POD".
        sample("container_cpu_usage_seconds_total", {**server, "container": "POD"}, 1000 * t)
        sample("container_cpu_usage_seconds_total", {**server, "container": ""}, 1000 * t)
        sample("container_cpu_cfs_periods_total", server, PERIODS_PER_S * t)
        sample("container_cpu_cfs_throttled_periods_total", server, THROTTLED_PER_S * t)
        sample("container_memory_working_set_bytes", server, float(MEMORY[pod]))
        sample("kube_pod_container_status_restarts_total", server, 1.0)
        sample("kube_pod_container_status_last_terminated_reason", {**server, "reason": "OOMKilled"}, 0.0)
    for pod in TRIAL_PODS:
        namespace_label = "exported_namespace" if dcgm_pod_label == "exported_pod" else "namespace"
        gpu = {
            "gpu": "0",
            "UUID": "GPU-test",
            "modelName": "NVIDIA H100",
            namespace_label: NAMESPACE,
            dcgm_pod_label: pod,
            "container": "server",
        }
        sample("DCGM_FI_DEV_GPU_UTIL", gpu, GPU["util"])
        sample("DCGM_FI_DEV_FB_USED", gpu, GPU["fb_used_mib"])
        sample("DCGM_FI_DEV_POWER_USAGE", gpu, GPU["power_w"])
    return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = exposition(time.time()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
