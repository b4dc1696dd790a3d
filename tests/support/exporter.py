"""Test double of the exporters Prometheus scrapes in a cluster: cAdvisor, kube-state-metrics and
dcgm-exporter series with their real metric names and labels, and values known to the test.

Restarts and OOM kills, as documented: kube-state-metrics exports every container's restart count as the
counter `kube_pod_container_status_restarts_total{namespace,pod,uid,container}`, and, once a container has
terminated, `kube_pod_container_status_last_terminated_reason{namespace,pod,uid,container,reason} 1`;
cAdvisor counts the OOM kills in a container's cgroup in `container_oom_events_total{namespace,pod,container}`.
A test sets them per pod with `Exporter.set_terminations`; until then they are 0 (and no last reason).

dcgm-exporter, as documented: each series carries `gpu`, `UUID`, `device`, `modelName` and `Hostname`, and
the pod it is mapped to under one of three label sets (`pod`/`namespace`/`container` since 2.x,
`pod_name`/`pod_namespace`/`container_name` in 1.x, `exported_pod`/`exported_namespace`/`exported_container`
behind a ServiceMonitor without honorLabels). A MIG instance is a series with `GPU_I_PROFILE` and `GPU_I_ID`
that has no DCGM_FI_DEV_GPU_UTIL; DCGM_FI_PROF_GR_ENGINE_ACTIVE (0-1) exists only where the profiling module
is collected; power is a whole-GPU field, exported for the physical GPU without a pod. Under time-slicing,
every pod on a GPU gets its own copy of that GPU's series.

llama.cpp's llama-server, as Prometheus stores it after discovering the pod (its exposition carries no labels;
the scrape job adds `namespace` and `pod`): the gauges `llamacpp:requests_processing`,
`llamacpp:requests_deferred` and `llamacpp:n_busy_slots_per_decode` (its average since it started), and the
counter `llamacpp:n_decode_total`. A pod serves them when its `llama` field says what they read.

vLLM's server, likewise discovered (its own labels `engine` and `model_name`, as v0.32 writes them): the gauges
`vllm:num_requests_running`, `vllm:num_requests_waiting` and `vllm:kv_cache_usage_perc`, the counters
`vllm:num_preemptions_total`, `vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total`, and the
histograms `vllm:request_inference_time_seconds` (time in the RUNNING
phase) and `vllm:request_queue_time_seconds` (WAITING), of which it serves the `_sum` and `_count` (the
buckets are left out: nothing here reads them). A pod serves them when its `vllm` field says what they read.

Counters grow at fixed rates and every sample carries an explicit timestamp, so what Prometheus stores, and
therefore every rate and average over any window, is exactly known. Pods can be added while it serves (the
operator tests add each trial's pods as kwok starts them)."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ORIGIN = 1_700_000_000.0
PERIODS_PER_S, THROTTLED_PER_S = 10.0, 4.0  # 40% of CFS periods throttled
GPU = {"util": 60.0, "fb_used_mib": 4096.0, "power_w": 250.0, "gr_engine_active": 0.35, "mig_fb_used_mib": 1024.0}
# dcgm-exporter's pod, namespace and container labels, by the pod label's name.
DCGM_LABELS = {
    "pod": ("pod", "namespace", "container"),
    "pod_name": ("pod_name", "pod_namespace", "container_name"),
    "exported_pod": ("exported_pod", "exported_namespace", "exported_container"),
}


@dataclass(frozen=True)
class LlamaGauges:
    processing: float  # requests being generated
    deferred: float  # requests waiting for a free slot
    busy_slots_per_decode: float  # constant, so the running average is this at every scrape
    decodes_per_s: float  # how fast n_decode_total grows


@dataclass(frozen=True)
class VllmSeries:
    running: float  # num_requests_running, constantly
    waiting: float  # num_requests_waiting, constantly
    running_s_per_s: float  # how fast request_inference_time_seconds_sum grows
    queued_s_per_s: float  # how fast request_queue_time_seconds_sum grows
    finished_per_s: float  # how fast both histograms' _count grow
    prefix_queries_per_s: float = 0.0  # prompt tokens looked up in the prefix cache, per second
    prefix_hits_per_s: float = 0.0  # of them, found there


@dataclass(frozen=True)
class PodSeries:
    namespace: str
    cores: float  # CPU in use, constantly
    memory_bytes: float
    gpu: str | None = None  # the UUID of the GPU the pod holds (two pods on one: time-slicing)
    mig_instance: str | None = None  # GPU_I_ID of the MIG instance of that GPU it holds
    dcgm_pod_label: str = "exported_pod"
    profiling: bool = False  # DCGM's profiling module collected (DCGM_FI_PROF_*)
    container: str = "server"
    restarts: int = 0  # kube-state-metrics: times the container restarted
    last_terminated_reason: str | None = None  # kube-state-metrics: why it last terminated ("OOMKilled", ...)
    oom_events: int = 0  # cAdvisor: OOM kills in the container's cgroup
    llama: LlamaGauges | None = None  # the pod runs llama-server, scraped by pod discovery
    vllm: VllmSeries | None = None  # the pod runs vLLM, scraped by pod discovery


def pod_uid(namespace: str, pod: str) -> str:
    """The pod's UID (kube-state-metrics' `uid` label): fixed per pod, as a real one is."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{pod}"))


class Exporter:
    def __init__(self, pods: dict[str, PodSeries] | None = None) -> None:
        self.pods: dict[str, PodSeries] = dict(pods or {})
        self._lock = threading.Lock()

    def add(self, pod: str, series: PodSeries) -> None:
        with self._lock:
            self.pods[pod] = series

    def set_terminations(
        self, pod: str, restarts: int, oom_events: int, last_terminated_reason: str | None = None
    ) -> None:
        """From the next scrape on: the pod's container restarted `restarts` times, the kernel OOM-killed in its
        cgroup `oom_events` times, and it last terminated for `last_terminated_reason`."""
        with self._lock:
            self.pods[pod] = replace(
                self.pods[pod], restarts=restarts, oom_events=oom_events, last_terminated_reason=last_terminated_reason
            )

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
            sample("container_oom_events_total", server, float(s.oom_events))
            state = {"namespace": s.namespace, "pod": pod, "uid": pod_uid(s.namespace, pod), "container": s.container}
            sample("kube_pod_container_status_restarts_total", state, float(s.restarts))
            if s.last_terminated_reason is not None:
                terminated = {**state, "reason": s.last_terminated_reason}
                sample("kube_pod_container_status_last_terminated_reason", terminated, 1.0)
            if s.llama is not None:
                scraped = {"namespace": s.namespace, "pod": pod}
                sample("llamacpp:requests_processing", scraped, s.llama.processing)
                sample("llamacpp:requests_deferred", scraped, s.llama.deferred)
                sample("llamacpp:n_busy_slots_per_decode", scraped, s.llama.busy_slots_per_decode)
                sample("llamacpp:n_decode_total", scraped, s.llama.decodes_per_s * t)
            if s.vllm is not None:
                scraped = {"namespace": s.namespace, "pod": pod, "engine": "0", "model_name": "chat"}
                sample("vllm:num_requests_running", scraped, s.vllm.running)
                sample("vllm:num_requests_waiting", scraped, s.vllm.waiting)
                sample("vllm:kv_cache_usage_perc", scraped, 0.25)
                sample("vllm:num_preemptions_total", scraped, 0.0)
                sample("vllm:prefix_cache_queries_total", scraped, s.vllm.prefix_queries_per_s * t)
                sample("vllm:prefix_cache_hits_total", scraped, s.vllm.prefix_hits_per_s * t)
                for histogram, per_s in (
                    ("vllm:request_inference_time_seconds", s.vllm.running_s_per_s),
                    ("vllm:request_queue_time_seconds", s.vllm.queued_s_per_s),
                ):
                    sample(f"{histogram}_sum", scraped, per_s * t)
                    sample(f"{histogram}_count", scraped, s.vllm.finished_per_s * t)
            if s.gpu:
                pod_label, namespace_label, container_label = DCGM_LABELS[s.dcgm_pod_label]
                device = {"gpu": "0", "UUID": s.gpu, "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3",
                          "Hostname": "node-1"}  # fmt: skip
                mapped = {**device, pod_label: pod, namespace_label: s.namespace, container_label: s.container}
                if s.mig_instance is None:
                    sample("DCGM_FI_DEV_GPU_UTIL", mapped, GPU["util"])
                    sample("DCGM_FI_DEV_FB_USED", mapped, GPU["fb_used_mib"])
                    sample("DCGM_FI_DEV_POWER_USAGE", mapped, GPU["power_w"])
                    if s.profiling:
                        sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", mapped, GPU["gr_engine_active"])
                else:
                    instance = {**mapped, "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": s.mig_instance}
                    sample("DCGM_FI_DEV_FB_USED", instance, GPU["mig_fb_used_mib"])
                    if s.profiling:
                        sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", instance, GPU["gr_engine_active"])
                    sample("DCGM_FI_DEV_POWER_USAGE", device, GPU["power_w"])  # the physical GPU, no pod
        # One sample per series: GPUs shared by pods (or MIG instances) repeat the unmapped device series.
        return "\n".join(dict.fromkeys(lines)) + "\n"

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
# The trial's pods run llama-server too: 3 + 2 requests generating, 1 + 0 waiting, 2.5 and 1.5 busy slots per
# decode at 10 and 30 decodes/s (over any window, (2.5 x 10 + 1.5 x 30) / (10 + 30) = 1.75 per decode).
LLAMA = {
    "iris-t0-aaaaa": LlamaGauges(processing=3, deferred=1, busy_slots_per_decode=2.5, decodes_per_s=10),
    "iris-t0-bbbbb": LlamaGauges(processing=2, deferred=0, busy_slots_per_decode=1.5, decodes_per_s=30),
    OTHER_POD: LlamaGauges(processing=100, deferred=100, busy_slots_per_decode=8, decodes_per_s=1),
}


# Namespace chat: a trial's two vLLM pods (running 3 + 1, 1 + 0 queued by the gauges; their requests spent
# 2.5 + 1.5 seconds running and 0.5 + 0.25 queued per second: 4.0 running and 0.75 queued over time). Their
# prefix caches found 600 of 1,000 and 150 of 500 prompt tokens a second: a hit rate of 0.5 together.
VLLM = {
    "chat-t0-aaaaa": VllmSeries(
        running=3,
        waiting=1,
        running_s_per_s=2.5,
        queued_s_per_s=0.5,
        finished_per_s=5,
        prefix_queries_per_s=1000,
        prefix_hits_per_s=600,
    ),
    "chat-t0-bbbbb": VllmSeries(
        running=1,
        waiting=0,
        running_s_per_s=1.5,
        queued_s_per_s=0.25,
        finished_per_s=3,
        prefix_queries_per_s=500,
        prefix_hits_per_s=150,
    ),
}


def trial_scene() -> Exporter:
    """Namespace ml: the trial's two pods, each with a GPU of its own (behind a ServiceMonitor that renames
    the pod labels) and llama-server's gauges. Namespaces old, mig and shared: one trial's GPU pods as
    dcgm-exporter 1.x labels them, on two MIG instances of one GPU (profiling module on), and time-sliced on
    one GPU. Namespace chat: a trial's two vLLM pods."""
    pods = {
        pod: PodSeries(NAMESPACE, cores, MEMORY[pod], gpu=f"GPU-{i}", llama=LLAMA[pod])
        for i, (pod, cores) in enumerate(TRIAL_PODS.items())
    }
    pods[OTHER_POD] = PodSeries(NAMESPACE, 8.0, MEMORY[OTHER_POD], llama=LLAMA[OTHER_POD])
    pods["iris-t0-old00"] = PodSeries("old", 0.5, 2**28, gpu="GPU-10", dcgm_pod_label="pod_name")
    for i, instance in enumerate(("7", "8")):
        pods[f"iris-t0-mig0{i}"] = PodSeries(
            "mig", 0.5, 2**28, gpu="GPU-20", mig_instance=instance, dcgm_pod_label="pod", profiling=True
        )
        pods[f"iris-t0-shr0{i}"] = PodSeries("shared", 0.5, 2**28, gpu="GPU-30", dcgm_pod_label="pod")
    for pod, vllm in VLLM.items():
        pods[pod] = PodSeries("chat", 1.0, 2**30, vllm=vllm)
    return Exporter(pods)
