"""GPU utilisation, memory and power from NVML (the library behind nvidia-smi and dcgm-exporter).

Absent NVML (no driver, no GPU) is not zero: `available` is False and `reason` says why, and reports list
the GPU figures as unavailable with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization_percent: float
    memory_used_mib: float
    power_watts: float | None


class Nvml:
    def __init__(self, library: ModuleType | Any | None = None) -> None:
        self.available, self.reason = False, ""
        try:
            if library is None:
                import pynvml as library  # nvidia-ml-py
            library.nvmlInit()
            self._nvml = library
            self.count = library.nvmlDeviceGetCount()
            self.available = self.count > 0
            self.reason = "" if self.available else "NVML found no GPU"
        except Exception as exc:  # library missing, driver missing: say which
            self.reason = f"NVML is not available: {exc or type(exc).__name__}"
            self.count = 0

    def sample(self, indices: list[int] | None = None) -> list[GpuSample]:
        if not self.available:
            return []
        samples = []
        for index in indices if indices is not None else range(self.count):
            handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            utilization = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = self._memory(handle)
            try:
                power = self._nvml.nvmlDeviceGetPowerUsage(handle) / 1000  # milliwatts
            except Exception:  # some boards do not report power
                power = None
            samples.append(GpuSample(index, float(utilization.gpu), memory.used / 2**20, power))
        return samples

    def _memory(self, handle: Any) -> Any:
        """Memory info without the driver's reserved memory (NVML's v2 struct, what nvidia-smi shows): the v1
        `used` counts it too, 480 MiB on an idle H100 with driver 580. Older drivers only know v1."""
        version = getattr(self._nvml, "nvmlMemory_v2", None)
        if version is not None:
            try:
                return self._nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
            except Exception:  # a driver before v2 (R510): fall back to v1
                pass
        return self._nvml.nvmlDeviceGetMemoryInfo(handle)

    def close(self) -> None:
        if self.available:
            self._nvml.nvmlShutdown()
