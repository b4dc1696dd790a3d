"""Ground truth for the kind tier: the CPU a pod's container used, read from its own cgroup on the node
(`cpuacct.usage`, nanoseconds) while a test runs, so a figure the operator reports can be checked against
what the kernel accounted over the same window."""

from __future__ import annotations

import bisect
import contextlib
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Protocol

from tests.support.controlplane import Kubectl


class PodHost(Protocol):
    """Where the pods run: a kind cluster (tests/support/kind.py)."""

    @property
    def kubectl(self) -> Kubectl: ...

    def pod_cgroup(self, pod: dict, container: str, controller: str) -> Path: ...


class PodCpuSampler:
    """Samples `cpuacct.usage` of one container of every pod matching a label selector, every 0.2 s, in a
    thread; finds new pods every 2 s."""

    def __init__(self, node: PodHost, namespace: str, selector: str, container: str) -> None:
        self.node, self.namespace, self.selector, self.container = node, namespace, selector, container
        self.samples: dict[str, list[tuple[float, int]]] = {}  # pod -> [(unix s, ns used)]
        self.pods: dict[str, dict] = {}  # as first seen running
        self._paths: dict[str, Path] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PodCpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _discover(self) -> None:
        pods = self.node.kubectl.json("get", "pods", "-n", self.namespace, "-l", self.selector)["items"]
        for pod in pods:
            name = pod["metadata"]["name"]
            if name not in self._paths:
                with contextlib.suppress(KeyError, StopIteration):
                    self._paths[name] = self.node.pod_cgroup(pod, self.container, "cpuacct") / "cpuacct.usage"
                    self.pods[name] = pod

    def _run(self) -> None:
        next_discovery = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_discovery:
                with contextlib.suppress(Exception):
                    self._discover()
                next_discovery = time.monotonic() + 2
            for name, path in list(self._paths.items()):
                with contextlib.suppress(OSError, ValueError):
                    used = int(path.read_text())
                    self.samples.setdefault(name, []).append((time.time(), used))
            self._stop.wait(0.2)

    def cores(self, pod_prefix: str, start: float, end: float) -> float:
        """Average cores the pods named `pod_prefix*` used between two unix times (interpolated)."""
        total = 0.0
        for name, samples in self.samples.items():
            if name.startswith(pod_prefix):
                total += _at(samples, end) - _at(samples, start)
        return total / 1e9 / (end - start)


def _at(samples: list[tuple[float, int]], t: float) -> float:
    times = [s[0] for s in samples]
    i = bisect.bisect_left(times, t)
    if i == 0 or i == len(samples):
        raise ValueError(f"no cgroup samples around {t:.1f} (have {times[0]:.1f}..{times[-1]:.1f})")
    (t0, u0), (t1, u1) = samples[i - 1], samples[i]
    return u0 + (u1 - u0) * (t - t0) / (t1 - t0)


def measured_window(trial: dict) -> tuple[float, float]:
    """The window the operator queries Prometheus over: the stage's measured seconds after its warm-up."""
    stage = trial["stage"]
    end = datetime.fromisoformat(stage["startedAt"]).timestamp() + stage["warmupS"] + stage["measuredS"]
    return end - round(stage["measuredS"]), end
