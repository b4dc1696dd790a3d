"""Resource sampling from cgroup accounting while load runs, summed over a trial's replicas."""

from __future__ import annotations

import itertools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kaliper.local.cgroups import Cgroup, Sample
from kaliper.metrics.nvml import GpuSample, Nvml
from kaliper.report.schema import ResourceSeriesPoint, TrialResources


@dataclass(frozen=True)
class Point:
    wall: float  # time.time(), to match the load generator's windows
    gpus: tuple[GpuSample, ...]
    cpu_usage_s: float  # cumulative, all replicas
    periods: int
    throttled: int
    memory_bytes: int
    memory_peak_bytes: int
    oom_kills: int
    io_read: int
    io_write: int
    host_busy_s: float | None = None  # CPU-seconds the whole machine has spent busy (/proc/stat), cumulative


def host_busy_seconds(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU time the machine has spent on anything but idling and waiting for I/O, all CPUs, in seconds."""
    try:
        fields = stat.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    # cpu user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user)
    ticks = [int(v) for v in fields[1:9]]
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
    return busy / os.sysconf("SC_CLK_TCK")


def combine(
    samples: list[Sample], wall: float, gpus: list[GpuSample] | None = None, host_busy_s: float | None = None
) -> Point:
    return Point(
        host_busy_s=host_busy_s,
        wall=wall,
        gpus=tuple(gpus or ()),
        cpu_usage_s=sum(s.cpu_usage_s for s in samples),
        periods=sum(s.periods for s in samples),
        throttled=sum(s.throttled_periods for s in samples),
        memory_bytes=sum(s.memory_working_set_bytes for s in samples),
        memory_peak_bytes=sum(s.memory_peak_bytes for s in samples),
        oom_kills=sum(s.oom_kills for s in samples),
        io_read=sum(s.io_read_bytes for s in samples),
        io_write=sum(s.io_write_bytes for s in samples),
    )


class Sampler:
    """Samples the groups every `interval_s` on a thread until stopped."""

    def __init__(self, groups: list[Cgroup], interval_s: float, nvml: Nvml | None = None) -> None:
        self.groups, self.interval_s, self.nvml = groups, interval_s, nvml
        self.points: list[Point] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kaliper-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> list[Point]:
        self._stop.set()
        self._thread.join()
        return self.points

    def _run(self) -> None:
        while True:
            self.points.append(self._point())
            if self._stop.wait(self.interval_s):
                self.points.append(self._point())
                return

    def _point(self) -> Point:
        gpus = self.nvml.sample() if self.nvml is not None else []
        return combine([g.sample() for g in self.groups], time.time(), gpus, host_busy_seconds())


def summarize(
    points: list[Point], start_wall: float, end_wall: float, origin_wall: float, gpu_unavailable: str = ""
) -> TrialResources:
    """Figures over [start, end): rates between consecutive samples, gauges as sampled."""
    inside = [p for p in points if start_wall - 1e-6 <= p.wall <= end_wall + 1e-6]
    if len(inside) < 2:
        return TrialResources(source="cgroup", unavailable=["fewer than two cgroup samples in the window"])
    series = []
    for a, b in itertools.pairwise(inside):
        span = b.wall - a.wall
        if span <= 0:
            continue
        periods = b.periods - a.periods
        series.append(
            ResourceSeriesPoint(
                t_s=round(b.wall - origin_wall, 3),
                cpu_cores=round((b.cpu_usage_s - a.cpu_usage_s) / span, 4),
                memory_bytes=b.memory_bytes,
                throttled_ratio=round((b.throttled - a.throttled) / periods, 4) if periods > 0 else None,
            )
        )
    first, last = inside[0], inside[-1]
    cpus = sorted(p.cpu_cores for p in series)
    periods = last.periods - first.periods
    return TrialResources(
        source="cgroup",
        cpu_avg_cores=round((last.cpu_usage_s - first.cpu_usage_s) / (last.wall - first.wall), 4),
        cpu_p90_cores=cpus[max(0, int(len(cpus) * 0.9 + 0.5) - 1)] if cpus else None,
        cpu_peak_cores=cpus[-1] if cpus else None,
        cpu_throttled_ratio=round((last.throttled - first.throttled) / periods, 4) if periods > 0 else 0.0,
        memory_avg_bytes=sum(p.memory_bytes for p in inside) / len(inside),
        memory_peak_bytes=max(max(p.memory_bytes for p in inside), last.memory_peak_bytes),
        oom_kills=last.oom_kills,
        io_read_bytes=last.io_read - first.io_read,
        io_write_bytes=last.io_write - first.io_write,
        host_cpu_cores=round((last.host_busy_s - first.host_busy_s) / (last.wall - first.wall), 4)
        if last.host_busy_s is not None and first.host_busy_s is not None
        else None,
        series=series,
        unavailable=[f"gpu: {gpu_unavailable}"] if gpu_unavailable else [],
        **gpu_figures(inside),
    )


def gpu_figures(points: list[Point]) -> dict[str, float]:
    """Average utilisation over samples and GPUs; peak memory of the busiest GPU."""
    samples = [g for p in points for g in p.gpus]
    if not samples:
        return {}
    return {
        "gpu_utilization_percent": round(sum(g.utilization_percent for g in samples) / len(samples), 2),
        "gpu_memory_peak_mib": round(max(g.memory_used_mib for g in samples), 1),
    }
