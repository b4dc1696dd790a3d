"""Kaliper's NVML sampler (kaliper.metrics.nvml, what `kaliper run` reports for GPU trials) against a real GPU
kept busy by busy.cu with a known allocation, and against nvidia-smi read at the same moments.

    python bench/gpu/nvml_check.py          # on a machine with an NVIDIA GPU, nvcc and nvidia-ml-py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))
from kaliper.metrics.nvml import Nvml

ALLOCATED_MIB, SECONDS = 2048, 8


def smi() -> tuple[float, float]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits", "-i", "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split(",")
    return float(out[0]), float(out[1])


def main() -> None:
    nvml = Nvml()
    if not nvml.available:
        sys.exit(nvml.reason)
    idle = nvml.sample([0])[0]
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "busy"
        subprocess.run(["nvcc", "-O2", "-o", str(binary), str(Path(__file__).with_name("busy.cu"))], check=True)
        busy = subprocess.Popen([str(binary), str(ALLOCATED_MIB), str(SECONDS)], stdout=subprocess.PIPE, text=True)
        print(busy.stdout.readline().strip())
        time.sleep(1)  # past the CUDA context's start-up
        ours, theirs = [], []
        while busy.poll() is None:
            ours.append(nvml.sample([0])[0])
            theirs.append(smi())
            time.sleep(0.5)
    print(
        f"idle: utilisation {idle.utilization_percent:.0f}%, memory {idle.memory_used_mib:.0f} MiB, "
        f"power {idle.power_watts} W"
    )
    busy_samples = ours[:-2]  # the last samples may fall after the kernels ended
    print(
        f"busy ({len(busy_samples)} samples): kaliper utilisation mean "
        f"{statistics.mean(s.utilization_percent for s in busy_samples):.1f}%, nvidia-smi mean "
        f"{statistics.mean(t[0] for t in theirs[:-2]):.1f}%"
    )
    print(
        f"memory: kaliper peak {max(s.memory_used_mib for s in ours):.0f} MiB, nvidia-smi peak "
        f"{max(t[1] for t in theirs):.0f} MiB (allocated {ALLOCATED_MIB} MiB plus the CUDA context)"
    )
    print(f"power: kaliper mean {statistics.mean(s.power_watts or 0 for s in busy_samples):.0f} W while busy")


if __name__ == "__main__":
    main()
