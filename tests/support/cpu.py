"""The CPU the tests run on, read without the code under test.

ONNX Runtime's MLAS picks its NCHWc block from CPUID (onnxruntime/core/mlas/lib/platform.cpp): 8 channels on
x86-64, 16 where AVX2, FMA3 and AVX-512F are usable; on other architectures it has no NCHWc kernels. numpy's
CPU dispatcher reads the same CPUID bits itself, so under an emulator (qemu-user `-cpu Haswell`) both see
the emulated CPU, while /proc/cpuinfo would still describe the host's.
"""

from __future__ import annotations

import platform

try:
    from numpy._core._multiarray_umath import __cpu_features__ as FEATURES
except ImportError:  # numpy 1.x
    from numpy.core._multiarray_umath import __cpu_features__ as FEATURES  # type: ignore[no-redef]


def has(*features: str) -> bool:
    return all(FEATURES.get(name, False) for name in features)


def nchwc_block() -> int | None:
    """MLAS's NCHWc block on this CPU, None where it has no NCHWc layout."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return 16 if has("AVX2", "FMA3", "AVX512F") else 8


NCHWC_BLOCK = nchwc_block()
