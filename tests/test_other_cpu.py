"""The optimizer's tests again, on a second CPU model.

The CPU decides how ONNX Runtime runs a model (its NCHWc block is 16 channels with AVX-512F, 8 on other x86-64
CPUs), and with it the FLOPs of the graph it ran. So the tests of tests/optimize that depend on it run a
second time under qemu-user presenting a Haswell (AVX2 and FMA3, no AVX-512), whatever CPU this machine has:
every run of the suite sees an 8-channel layout as well as this machine's own. Only the modules whose figures
depend on the CPU run again (the layout, FLOPs, passes and profiles); the search, datasets and transformer
fusions are the same on every CPU, and under emulation they only cost time.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EMULATED_CPU = "Haswell"
CPU_DEPENDENT = ["test_layout.py", "test_flops.py", "test_passes.py", "test_profile.py"]


def emulated(*args: str, timeout: float) -> subprocess.CompletedProcess:
    qemu = shutil.which("qemu-x86_64")
    assert qemu is not None, "qemu-x86_64 is missing: `make system-deps` installs Debian's qemu-user"
    # qemu 7.2's emulation crashes (SIGSEGV) in numpy's X86_V3-dispatched sort: numpy keeps to its baseline
    # kernels there. numpy still reports the emulated CPU's features, and ONNX Runtime is not affected.
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": "X86_V3"}
    return subprocess.run(
        [qemu, "-cpu", EMULATED_CPU, sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# One emulated interpreter for the probe and the tests: under emulation its start and imports (scikit-learn's
# alone take 20 s) cost more than the tests themselves.
PROBE_THEN_TEST = """
import sys
import pytest
from kaliper.optimize.layout import machine
m = machine()
print("cpu:", m.nchwc_block_size, *m.instruction_sets, flush=True)
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="qemu-x86_64 emulates an x86-64 CPU for x86-64 programs")
def test_the_optimizer_tests_pass_on_an_avx2_cpu() -> None:
    modules = [f"tests/optimize/{name}" for name in CPU_DEPENDENT]
    done = emulated("-c", PROBE_THEN_TEST, *modules, timeout=900)
    lines = done.stdout.strip().splitlines()
    # The emulated CPU is the one ONNX Runtime sees: 8-channel blocks, AVX2 and FMA3, no AVX-512.
    assert lines and lines[0] == "cpu: 8 AVX2 FMA3", done.stdout[-3000:] + done.stderr[-3000:]
    summary = lines[-1]
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary, summary
