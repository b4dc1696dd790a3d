"""Test double of the exporters Prometheus scrapes in a cluster: cAdvisor and dcgm-exporter
series with their real metric names and labels, and values known to the test.

Counters grow at fixed rates and every sample carries an explicit timestamp, so what Prometheus stores, and
therefore every rate and average over any window, is exactly known. Pods can be added while it serves (the
operator tests add each trial's pods as kwok starts them)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ORIGIN = 1_700_000_000.0
PERIODS_PER_S, THROTTLED_PER_S = 10.0, 4.0  # 40% of CFS periods throttled
GPU = {"util": 60.0, "fb_used_mib": 4096.0, "power_w": 250.0}


@dataclass(frozen=True)
class PodSeries:
    namespace: str
    cores: float  # CPU in use, constantly
    memory_bytes: float
    gpu: bool = False  # also export DCGM series for this pod
    container: str = "server"


class Exporter:
    def __init__(self, pods: dict[str, PodSeries] | None = None, dcgm_pod_label: str = "exported_pod") -> None:
        self.pods: dict[str, PodSeries] = dict(pods or {})
        self.dcgm_pod_label = dcgm_pod_label
        self._lock = threading.Lock()

    def add(self, pod: str, series: PodSeries) -> None:
        with self._lock:
            self.pods[pod] = series

    def exposition(self, now: float) -> str:
        # Samples on whole seconds: a scrape delayed by a busy machine still lands on the 1 s grid, so rates
        # over any range are exact (Prometheus extrapolates from the spacing of the samples it holds).
        ms = int(now) * 1000
        t = ms / 1000 - ORIGIN
        lines = []

        def sample(name: str, labels: dict[str, str], value: float) -> None:
            rendered = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{rendered}}} {value!r} {ms}")

        with self._lock:
            pods = dict(self.pods)
        for pod, s in pods.items():
            server = {"namespace": s.namespace, "pod": pod, "container": s.container}
            sample("container_cpu_usage_seconds_total", server, s.cores * t)
            # The pause container and the pod-level cgroup: filtered out by container!="" and container!="POD".
            sample("container_cpu_usage_seconds_total", {**server, "container": "POD"}, 1000 * t)
            sample("container_cpu_usage_seconds_total", {**server, "container": ""}, 1000 * t)
            sample("container_cpu_cfs_periods_total", server, PERIODS_PER_S * t)
            sample("container_cpu_cfs_throttled_periods_total", server, THROTTLED_PER_S * t)
            sample("container_memory_working_set_bytes", server, float(s.memory_bytes))
            if s.gpu:
                namespace_label = "exported_namespace" if self.dcgm_pod_label == "exported_pod" else "namespace"
                gpu = {
                    "gpu": "0",
                    "UUID": "GPU-test",
                    "modelName": "NVIDIA H100",
                    namespace_label: s.namespace,
                    self.dcgm_pod_label: pod,
                    "container": s.container,
                }
                sample("DCGM_FI_DEV_GPU_UTIL", gpu, GPU["util"])
                sample("DCGM_FI_DEV_FB_USED", gpu, GPU["fb_used_mib"])
                sample("DCGM_FI_DEV_POWER_USAGE", gpu, GPU["power_w"])
        return "\n".join(lines) + "\n"

    def serve(self, port: int) -> ThreadingHTTPServer:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.exposition(time.time()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


# The fixed scene of the metrics-layer tests: two pods of trial t0, and another trial's pod that must never
# be counted.
NAMESPACE = "ml"
TRIAL_PODS = {"iris-t0-aaaaa": 0.5, "iris-t0-bbbbb": 0.25}  # pod -> CPU cores used
OTHER_POD = "iris-t1-ccccc"
MEMORY = {"iris-t0-aaaaa": 200 * 2**20, "iris-t0-bbbbb": 100 * 2**20, OTHER_POD: 9 * 2**30}


def trial_scene() -> Exporter:
    pods = {pod: PodSeries(NAMESPACE, cores, MEMORY[pod], gpu=True) for pod, cores in TRIAL_PODS.items()}
    pods[OTHER_POD] = PodSeries(NAMESPACE, 8.0, MEMORY[OTHER_POD])
    return Exporter(pods)
