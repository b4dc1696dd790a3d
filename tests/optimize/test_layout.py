from __future__ import annotations

from pathlib import Path

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from kaliper.optimize.layout import INSTRUCTION_SETS, cpu_model, graph_layout, machine, nchwc_block_size
from tests.support.cpu import NCHWC_BLOCK


def _graph(*nodes: onnx.NodeProto) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph)


def test_the_block_onnx_runtime_pads_to_is_the_one_mlas_picks_from_cpuid() -> None:
    """ONNX Runtime's own padding agrees with MLAS's rule read from CPUID (tests/support/cpu.py): 8 on x86-64,
    16 with AVX-512F; on this project's AMD EPYC with AVX-512 that is 16, under `qemu-x86_64 -cpu Haswell` 8."""
    assert nchwc_block_size() == NCHWC_BLOCK


def test_graph_layouts() -> None:
    nchwc = {"domain": "com.microsoft.nchwc"}
    assert graph_layout(_graph(helper.make_node("ReorderInput", ["x"], ["y"], **nchwc))) == "NCHWc"
    nhwc_pool = helper.make_node("NhwcMaxPool", ["x"], ["y"], kernel_shape=[2, 2], domain="com.microsoft")
    assert graph_layout(_graph(nhwc_pool)) == "NHWC"
    channels_last = helper.make_node("QLinearAveragePool", ["x"], ["y"], channels_last=1, domain="com.microsoft")
    assert graph_layout(_graph(channels_last)) == "NHWC"
    channels_first = helper.make_node("QLinearAveragePool", ["x"], ["y"], channels_last=0, domain="com.microsoft")
    assert graph_layout(_graph(channels_first, helper.make_node("Relu", ["y"], ["z"]))) == "NCHW"


def test_cpu_model_from_the_kernel(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu\n")
    assert cpu_model(cpuinfo) == "AMD EPYC 9R14"


def test_machine_names_what_decides_onnx_runtime_kernels() -> None:
    info = machine()
    assert info.nchwc_block_size == NCHWC_BLOCK
    assert info.onnxruntime == ort.__version__
    assert set(info.instruction_sets) <= set(INSTRUCTION_SETS)
    # AVX-512F is listed exactly where ONNX Runtime pads to 16-channel blocks
    assert ("AVX512F" in info.instruction_sets) == (nchwc_block_size() == 16)
