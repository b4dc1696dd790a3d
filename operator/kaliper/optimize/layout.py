"""Which memory layout ONNX Runtime's CPU kernels chose, and the machine that chose it.

At graph optimization level `all`, ONNX Runtime rewrites convolutions and pools into its NCHWc layout
(operators of the `com.microsoft.nchwc` domain), whose channels come in blocks whose size depends on the CPU
(MLAS: 8 on x86-64, 16 with AVX-512F; none where MLAS has no NCHWc kernels). Channels are padded to whole
blocks, so the FLOPs of the graph ONNX Runtime ran differ between machines for one model: a report says
which layout and block size it measured, so that two machines' figures can be told apart. Quantized
convolutions go channels-last instead (NHWC: ONNX Runtime's NhwcTransformer).
"""

from __future__ import annotations

import functools
import platform
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from kaliper.api.modeloptimization import GraphLayout
from kaliper.report.optimization import MachineInfo

NCHWC_DOMAIN = "com.microsoft.nchwc"
# Instruction sets that change what ONNX Runtime's CPU kernels do (NCHWc block, int8 dot products, bf16),
# as numpy's CPU dispatcher names them: it reads CPUID itself, so an emulated CPU reports its own.
INSTRUCTION_SETS = ("AVX2", "FMA3", "AVX512F", "AVX512VNNI", "AVX512BF16", "AVX512FP16", "ASIMD", "ASIMDDP", "SVE")


def graph_layout(graph: onnx.ModelProto) -> GraphLayout:
    """NCHWc when ONNX Runtime put any operator in its blocked layout, NHWC when it moved quantized ones
    channels-last, else NCHW (ONNX's own)."""
    nodes = graph.graph.node
    if any(n.domain == NCHWC_DOMAIN for n in nodes):
        return "NCHWc"
    channels_last = (a.name == "channels_last" and a.i == 1 for n in nodes for a in n.attribute)
    if any(n.op_type.startswith("Nhwc") for n in nodes) or any(channels_last):
        return "NHWC"
    return "NCHW"


@functools.cache
def nchwc_block_size() -> int | None:
    """ONNX Runtime's NCHWc block on this CPU, as ONNX Runtime itself shows it: a Conv with one filter,
    saved at level all, has its filters padded to one whole block. None where it keeps the Conv as it is
    (no NCHWc kernels on this CPU)."""
    weights = numpy_helper.from_array(np.ones((1, 8, 3, 3), np.float32), "W")
    conv = helper.make_node("Conv", ["x", "W"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [conv],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with tempfile.TemporaryDirectory(prefix="kaliper-layout-") as folder:
        source, saved = Path(folder) / "probe.onnx", Path(folder) / "ran.onnx"
        onnx.save(model, source)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(saved)
        options.log_severity_level = 3  # saving an NCHWc graph warns that it is for this CPU only
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        ran = onnx.load(str(saved))
    shapes = {i.name: list(i.dims) for i in ran.graph.initializer}
    for node in ran.graph.node:
        if node.domain == NCHWC_DOMAIN and node.op_type == "Conv":
            return shapes[node.input[1]][0]
    return None


def instruction_sets() -> list[str]:
    """The INSTRUCTION_SETS this CPU has."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features  # type: ignore[no-redef]
    return [name for name in INSTRUCTION_SETS if features.get(name)]


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's name as the kernel gives it ("model name" on x86, else the processor field)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@functools.cache
def machine() -> MachineInfo:
    """What measured: the CPU, its instruction sets, ONNX Runtime's version and its NCHWc block."""
    return MachineInfo(
        cpu=cpu_model(),
        architecture=platform.machine(),
        instruction_sets=instruction_sets(),
        onnxruntime=ort.__version__,
        nchwc_block_size=nchwc_block_size(),
    )
