"""GPU figures through NVML. No GPU exists on these machines, so the NVML library is replaced by a test double
that implements the same functions (names, arguments, units) as pynvml; on a machine with a GPU the real
library is used by the same code."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kaliper.local.sampler import Point, summarize
from kaliper.metrics.nvml import Nvml


class FakeNvml:
    """Test double of pynvml: two GPUs whose utilisation and memory are set by the test."""

    def __init__(self, utilization: list[float], used_mib: list[float]) -> None:
        self.utilization, self.used_mib, self.initialised = utilization, used_mib, False

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        return len(self.utilization)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self.utilization[handle], memory=0)

    nvmlMemory_v2 = 0x02000028  # pynvml's version tag of the v2 struct (an opaque number to callers)
    RESERVED = 480 * 2**20  # what the driver keeps for itself: an idle H100 with driver 580 reports this

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> SimpleNamespace:
        """v1 (no version) counts the driver's reserved memory as used; v2 reports it apart, as real NVML."""
        used = int(self.used_mib[handle] * 2**20)
        total = 80 * 2**30
        if version is not None and version == self.nvmlMemory_v2:
            return SimpleNamespace(used=used, reserved=self.RESERVED, total=total, free=total - used - self.RESERVED)
        return SimpleNamespace(used=used + self.RESERVED, total=total, free=total - used - self.RESERVED)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 250_000  # milliwatts


def test_samples_every_gpu_in_nvml_units() -> None:
    nvml = Nvml(FakeNvml([40, 80], [1024, 2048]))
    assert nvml.available and nvml.count == 2
    first, second = nvml.sample()
    assert (first.utilization_percent, first.memory_used_mib, first.power_watts) == (40, 1024, 250)
    assert second.memory_used_mib == 2048


def test_memory_excludes_what_the_driver_reserves_and_older_libraries_fall_back() -> None:
    class OldLibrary(FakeNvml):
        nvmlMemory_v2 = None  # a pynvml from before NVML's v2 memory struct

    assert Nvml(FakeNvml([0], [1024])).sample()[0].memory_used_mib == 1024
    assert Nvml(OldLibrary([0], [1024])).sample()[0].memory_used_mib == 1024 + 480


def test_missing_nvml_is_unavailable_with_the_reason() -> None:
    class Broken:
        def nvmlInit(self) -> None:
            raise OSError("NVML Shared Library Not Found")

    nvml = Nvml(Broken())
    assert not nvml.available and "NVML Shared Library Not Found" in nvml.reason and nvml.sample() == []


def test_a_machine_without_the_gpu_driver_is_reported_not_zeroed(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real pynvml, as Nvml() imports it, on a machine where libnvidia-ml.so.1 cannot be loaded (no NVIDIA
    # driver): simulated, so that the expectation holds on a machine with a GPU as well.
    import pynvml

    def no_driver(name: str, *args: object, **kwargs: object) -> None:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(pynvml, "nvmlLib", None)  # not loaded yet (on a GPU machine it may be)
    monkeypatch.setattr(pynvml, "CDLL", no_driver)
    nvml = Nvml()
    assert (nvml.available, nvml.count, nvml.sample()) == (False, 0, [])
    assert nvml.reason == "NVML is not available: NVML Shared Library Not Found"


def test_a_driver_that_sees_no_gpu_is_reported_not_zeroed() -> None:
    nvml = Nvml(FakeNvml([], []))
    assert (nvml.available, nvml.count, nvml.reason, nvml.sample()) == (False, 0, "NVML found no GPU", [])


def point(wall: float, gpus: list) -> Point:
    return Point(
        wall=wall,
        gpus=tuple(gpus),
        cpu_usage_s=wall,
        periods=0,
        throttled=0,
        memory_bytes=1,
        memory_peak_bytes=1,
        oom_kills=0,
        io_read=0,
        io_write=0,
    )


def test_trial_figures_average_utilisation_and_take_peak_memory() -> None:
    nvml = Nvml(FakeNvml([50], [1000]))
    points = [point(0, nvml.sample())]
    nvml._nvml.utilization, nvml._nvml.used_mib = [90], [3000]
    points.append(point(1, nvml.sample()))
    resources = summarize(points, 0, 1, 0)
    assert resources.gpu_utilization_percent == 70 and resources.gpu_memory_peak_mib == 3000
    assert resources.cpu_avg_cores == 1.0  # one CPU-second per second in this made-up series
    assert resources.unavailable == []

    without = summarize([point(0, []), point(1, [])], 0, 1, 0, gpu_unavailable="NVML is not available: no driver")
    assert without.gpu_utilization_percent is None and without.unavailable == ["gpu: NVML is not available: no driver"]
