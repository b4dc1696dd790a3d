from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static
from skl2onnx import to_onnx
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from kaliper.optimize.flops import FlopsEstimate, NodeFlops, estimate, parameter_count
from tests.support.cpu import NCHWC_BLOCK
from tests.support.graphs import cnn_model, cnn_nodes, make_model, ones

F, U8 = TensorProto.FLOAT, TensorProto.UINT8


def test_cnn_per_node_and_total() -> None:
    result = estimate(cnn_model())
    assert result == FlopsEstimate(
        nodes=[
            NodeFlops("conv", "Conv", 450560),  # 2 * (8*32*32) * 3 * 9 + 8*32*32 (bias)
            NodeFlops("relu", "Relu", 8192),  # 8*32*32
            NodeFlops("pool", "MaxPool", 8192),  # (8*16*16) * 2*2
            NodeFlops("flatten", "Flatten", 0),
            NodeFlops("fc", "Gemm", 40970),  # 2 * 1*10*2048 + 1*10 (bias)
        ],
        total=507914,
        by_op_type={"Conv": 450560, "Relu": 8192, "MaxPool": 8192, "Flatten": 0, "Gemm": 40970},
        without_estimate=[],
    )


def test_batch_size_fixes_the_dynamic_dim_without_touching_the_model() -> None:
    model = cnn_model()
    assert estimate(model, batch_size=4).total == 2031656  # 4 * 507914
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert len(model.graph.value_info) == 0


def test_cnn_parameters() -> None:
    assert parameter_count(cnn_model()) == 20714  # 8*3*3*3 + 8 + 10*2048 + 10


def test_parameters_read_from_dims_with_external_data_unloaded(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(cnn_model(), path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    model = onnx.load(path, load_external_data=False)
    assert parameter_count(model) == 20714
    assert estimate(model).total == 507914


def test_constant_nodes_are_not_parameters_but_subgraph_initializers_are() -> None:
    constant = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.ones(100, np.float32)))
    then = helper.make_graph(
        [helper.make_node("Add", ["x", "t"], ["a"])],
        "then",
        [],
        [helper.make_tensor_value_info("a", F, None)],
        [ones("t", 3)],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["b"])], "else", [], [helper.make_tensor_value_info("b", F, None)]
    )
    nodes = [
        constant,
        helper.make_node("Mul", ["x", "w"], ["m"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    model = make_model(nodes, {"x": (F, [3]), "c": (TensorProto.BOOL, [])}, [ones("w", 1, 3)])
    assert parameter_count(model) == 6  # w: 1*3, t: 3 (in the If's branch); the Constant's 100 are not
    result = estimate(model)
    assert [n.flops for n in result.nodes] == [0, 3, None]
    assert result.without_estimate == ["If"]
    assert result.total == 3


def test_unnamed_nodes_take_onnx_runtime_profiler_names() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    result = estimate(make_model(nodes, {"x": (F, [2, 5])}))
    assert result.nodes == [NodeFlops("Relu_0", "Relu", 10), NodeFlops("Sigmoid_1", "Sigmoid", 10)]


def test_matmul_broadcasts_batch_dims() -> None:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")]
    model = make_model(nodes, {"a": (F, [2, 1, 4, 8]), "b": (F, [3, 8, 5])})
    assert estimate(model).total == 1920  # batch (2, 3): 2 * 6 * 4*5*8


def test_matmul_with_a_vector() -> None:
    nodes = [helper.make_node("MatMul", ["v", "b"], ["y"])]
    assert estimate(make_model(nodes, {"v": (F, [8]), "b": (F, [8, 5])})).total == 80  # 2 * 1*5*8


def test_input_shapes_override_the_inputs() -> None:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    model = make_model(nodes, {"a": (F, ["B", "M", 8])}, [ones("b", 8, 5)])
    assert estimate(model).total == 80  # both dynamic dims as batch 1: 2 * 1*5*8
    assert estimate(model, input_shapes={"a": (3, 4, 8)}).total == 960  # 2 * 3 * 4*5*8


def _scales(*scales: float) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(scales, np.float32), "sc")


# One node on a 1x4x8x8 float input (256 elements) unless said otherwise, and its hand-counted FLOPs.
CASES = {
    "softmax": (helper.make_node("Softmax", ["x"], ["y"], axis=1), [], 1280),  # 5 * 256
    "batchnorm": (
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]),
        [ones(n, 4) for n in "sbmv"],
        512,  # 2 * 256
    ),
    "layernorm with bias": (
        helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1),
        [ones("s", 8), ones("b", 8)],
        1792,  # 7 * 256
    ),
    "layernorm": (
        helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-1),
        [ones("s", 8)],
        1536,
    ),  # 6*256
    "gelu": (helper.make_node("Gelu", ["x"], ["y"]), [], 1280),  # 5 * 256
    "gelu tanh": (helper.make_node("Gelu", ["x"], ["y"], approximate="tanh"), [], 2304),  # 9 * 256
    "global average pool": (helper.make_node("GlobalAveragePool", ["x"], ["y"]), [], 256),
    "reduce mean": (
        helper.make_node("ReduceMean", ["x", "axes"], ["y"]),
        [numpy_helper.from_array(np.array([2, 3], np.int64), "axes")],
        256,
    ),
    "average pool": (
        helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        [],
        2304,  # 256 * 3*3
    ),
    "sum of three": (helper.make_node("Sum", ["x", "x", "x"], ["y"]), [], 512),  # (3-1) * 256
    "mean of two": (helper.make_node("Mean", ["x", "x"], ["y"]), [], 512),  # (2-1+1) * 256
    "leaky relu": (helper.make_node("LeakyRelu", ["x"], ["y"]), [], 256),
    "clip": (helper.make_node("Clip", ["x"], ["y"]), [], 256),
    "erf": (helper.make_node("Erf", ["x"], ["y"]), [], 256),
    "quantize": (
        helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["y"]),
        [numpy_helper.from_array(np.float32(0.1), "sc"), numpy_helper.from_array(np.uint8(0), "zp")],
        512,  # 2 * 256
    ),
    "transpose": (helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1]), [], 0),
    "resize nearest": (helper.make_node("Resize", ["x", "", "sc"], ["y"]), [_scales(1, 1, 2, 2)], 0),
    "resize linear": (
        helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear"),
        [_scales(1, 1, 2, 2)],
        7168,  # 1x4x16x16 = 1024 outputs, each 2*2 taps weighed and summed: (2*4 - 1) * 1024
    ),
    "resize cubic on one axis": (
        helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="cubic"),
        [_scales(1, 1, 1, 2)],
        3584,  # 1x4x8x16 = 512 outputs, 4 taps each: (2*4 - 1) * 512
    ),
    "depthwise conv": (
        helper.make_node("Conv", ["x", "W"], ["y"], group=4, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        [ones("W", 4, 1, 3, 3)],
        4608,  # 2 * 256 * 1*3*3, no bias
    ),
    "conv transpose": (
        helper.make_node("ConvTranspose", ["x", "W", "B"], ["y"], strides=[2, 2]),
        [ones("W", 4, 2, 3, 3), ones("B", 2)],
        9794,  # 2 * 256 * 2*3*3 + bias on 1x2x17x17 = 9216 + 578
    ),
}


@pytest.mark.parametrize("node, initializers, expected", CASES.values(), ids=CASES.keys())
def test_one_node(node: onnx.NodeProto, initializers: list[onnx.TensorProto], expected: int) -> None:
    result = estimate(make_model([node], {"x": (F, [1, 4, 8, 8])}, initializers))
    assert result.total == expected
    assert result.nodes[0].flops == expected


def test_integer_forms_count_as_float_ones() -> None:
    zero = numpy_helper.from_array(np.uint8(0), "zp")
    scale = numpy_helper.from_array(np.float32(0.5), "sc")
    nodes = [
        helper.make_node("ConvInteger", ["x", "W"], ["ci"], name="conv_integer"),
        helper.make_node("QLinearConv", ["x", "sc", "zp", "W", "sc", "zp", "sc", "zp", "B"], ["qc"], name="qconv"),
        helper.make_node("MatMulInteger", ["a", "b"], ["mi"], name="matmul_integer"),
        helper.make_node("QLinearMatMul", ["a", "sc", "zp", "b", "sc", "zp", "sc", "zp"], ["qm"], name="qmatmul"),
        helper.make_node("DequantizeLinear", ["qm", "sc", "zp"], ["y"], name="dequantize"),
    ]
    initializers = [zero, scale, ones("W", 6, 4, 1, 1, dtype=np.uint8), ones("B", 6, dtype=np.int32)]
    model = make_model(nodes, {"x": (U8, [1, 4, 8, 8]), "a": (U8, [4, 8]), "b": (U8, [8, 5])}, initializers)
    assert {n.name: n.flops for n in estimate(model).nodes} == {
        "conv_integer": 3072,  # 2 * (6*8*8) * 4*1*1
        "qconv": 3456,  # 3072 + 6*8*8 (bias)
        "matmul_integer": 320,  # 2 * 4*5*8
        "qmatmul": 320,
        "dequantize": 40,  # 2 * 4*5
    }


def test_gemm_transposes_and_bias() -> None:
    nodes = [
        helper.make_node("Gemm", ["a", "b"], ["y1"], name="trans_a", transA=1),
        helper.make_node("Gemm", ["a", "b", "c"], ["y2"], name="trans_a_bias", transA=1),
        helper.make_node("Gemm", ["y2", "d"], ["y"], name="trans_b", transB=1),
    ]
    inputs = {"a": (F, [6, 3]), "b": (F, [6, 4]), "c": (F, [4]), "d": (F, [7, 4])}
    assert [n.flops for n in estimate(make_model(nodes, inputs)).nodes] == [
        144,  # M=3, K=6, N=4: 2 * 3*4*6
        156,  # + 3*4
        168,  # M=3, K=4, N=7: 2 * 3*7*4
    ]


def test_fused_onnx_runtime_ops_count_as_their_base_op() -> None:
    nodes = [
        helper.make_node(
            "FusedConv",
            ["x", "W", "B"],
            ["c"],
            name="conv",
            domain="com.microsoft",
            activation="Relu",
            pads=[1, 1, 1, 1],
        ),
        helper.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node(
            "FusedGemm", ["f", "G"], ["g"], name="fc", domain="com.microsoft", transB=1, activation="Relu"
        ),
        helper.make_node("FusedMatMul", ["g", "H"], ["y"], name="mm", domain="com.microsoft", transB=1),
    ]
    weights = [ones("W", 8, 3, 3, 3), ones("B", 8), ones("G", 10, 2048), ones("H", 4, 10)]
    model = make_model(nodes, {"x": (F, [1, 3, 32, 32])}, weights, {"": 17, "com.microsoft": 1})
    assert [n.flops for n in estimate(model).nodes] == [
        450560,  # as Conv: 2 * (8*32*32) * 3*3*3 + 8*32*32
        8192,  # shapes go on past the FusedConv: (8*16*16) * 2*2
        0,
        40960,  # as Gemm: 2 * 1*10*2048
        80,  # transB: 2 * 1*4*10
    ]


def test_model_optimized_by_onnx_runtime(tmp_path: Path) -> None:
    source, optimized = tmp_path / "model.onnx", tmp_path / "optimized.onnx"
    onnx.save(cnn_model(), source)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimized)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    result = estimate(onnx.load(optimized))
    assert [(n.name, n.op_type, n.flops) for n in result.nodes] == [
        ("conv", "FusedConv", 450560),  # the Conv and its Relu, counted as the Conv
        ("pool", "MaxPool", 8192),
        ("flatten", "Flatten", 0),
        ("fc", "Gemm", 40970),
    ]
    assert result.total == 499722  # 507914 - 8192 (the Relu)


# --- graphs as ONNX Runtime writes them: fused, NCHWc, quantized ----------------------------------------------
#
# Each float model is quantized for real (or not), then saved by ONNX Runtime optimized at each level, as the
# ModelOptimization engine does with its candidates. Level all depends on the CPU: NCHWc pads channels to whole
# blocks of 8 on x86-64 and 16 with AVX-512F, and a CPU without NCHWc kernels (ARM) keeps ONNX's layout. So level
# all is stated for every layout: an entry keyed by block (8, 16, None for no NCHWc) is read at this CPU's block
# (tests/support/cpu.py, from CPUID), and "all, no NCHWc" is level all with ONNX Runtime's NCHWc transformer
# turned off, checked on every machine. On x86 ONNX Runtime turns int8 activations into uint8 ones
# (QDQIsInt8Allowed is false there), which is why the int8 variants show uint8 forms; on ARM they are kept.

_LEVELS: dict[str, tuple[ort.GraphOptimizationLevel, list[str]]] = {
    "basic": (ort.GraphOptimizationLevel.ORT_ENABLE_BASIC, []),
    "extended": (ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, []),
    "all": (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, []),
    # Level all as a CPU without NCHWc kernels runs it (ARM, where MLAS has none): the same transformers
    # but the NCHWc one.
    "all, no NCHWc": (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ["NchwcTransformer"]),
}
_DOMAINS = {"": "", "com.microsoft": "ms.", "com.microsoft.nchwc": "nchwc."}


def _random(rng: np.random.Generator, name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)


def mlp() -> onnx.ModelProto:
    """Nx16 MatMul to 32, Add bias, Relu, MatMul to 4, Add bias."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
        helper.make_node("Add", ["h", "B1"], ["a"], name="add1"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["m"], name="mm2"),
        helper.make_node("Add", ["m", "B2"], ["y"], name="add2"),
    ]
    weights = [_random(rng, "W1", 16, 32), _random(rng, "B1", 32), _random(rng, "W2", 32, 4), _random(rng, "B2", 4)]
    return make_model(nodes, {"x": (F, ["N", 16])}, weights, {"": 17}, output_type=F)


def conv_net() -> onnx.ModelProto:
    """Conv 3->12 3x3 pad 1 with bias on Nx3x8x8, Relu, MaxPool 2x2, Flatten, Gemm to 10 classes (transB)."""
    rng = np.random.default_rng(0)
    nodes = cnn_nodes()
    weights = [_random(rng, "W", 12, 3, 3, 3), _random(rng, "B", 12), _random(rng, "G", 10, 192)]
    return make_model(nodes, {"x": (F, ["N", 3, 8, 8])}, [*weights, _random(rng, "GB", 10)], {"": 17}, output_type=F)


def residual_net() -> onnx.ModelProto:
    """On Nx3x8x8: Conv 3->16 3x3 pad 1 + bias, Relu (r1); Conv 16->16 likewise, + r1 (s); s * Sigmoid(s) (sw);
    AveragePool 2x2 and Resize back x2 (nearest, asymmetric, floor: what NCHWc's Upsample takes), concatenated
    with sw to 32 channels; MaxPool 2x2, GlobalAveragePool, Flatten, Gemm to 10 classes (transB)."""
    rng = np.random.default_rng(0)
    pads = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", **pads),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], name="conv2", **pads),
        helper.make_node("Add", ["c2", "r1"], ["s"], name="residual"),
        helper.make_node("Sigmoid", ["s"], ["g"], name="sigmoid"),
        helper.make_node("Mul", ["s", "g"], ["sw"], name="swish"),
        helper.make_node("AveragePool", ["sw"], ["ap"], name="average", **pool),
        helper.make_node(
            "Resize",
            ["ap", "", "scales"],
            ["up"],
            name="upsample",
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        helper.make_node("Concat", ["up", "sw"], ["cat"], name="concat", axis=1),
        helper.make_node("MaxPool", ["cat"], ["mp"], name="max", **pool),
        helper.make_node("GlobalAveragePool", ["mp"], ["gp"], name="global"),
        helper.make_node("Flatten", ["gp"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "G", "GB"], ["y"], name="fc", transB=1),
    ]
    weights = [
        *(_random(rng, "W1", 16, 3, 3, 3), _random(rng, "B1", 16), _random(rng, "W2", 16, 16, 3, 3)),
        *(_random(rng, "B2", 16), numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")),
        *(_random(rng, "G", 10, 32), _random(rng, "GB", 10)),
    ]
    return make_model(nodes, {"x": (F, ["N", 3, 8, 8])}, weights, {"": 17}, output_type=F)


class _Calibration(CalibrationDataReader):
    def __init__(self, shape: Sequence[int]) -> None:
        rng = np.random.default_rng(0)
        self.feeds = iter([{"x": rng.uniform(-1, 1, (1, *shape)).astype(np.float32)} for _ in range(3)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.feeds, None)


def _onnx_runtime_graphs(model: onnx.ModelProto, quantization: str, tmp_path: Path) -> dict[str, onnx.ModelProto]:
    """The model quantized as `quantization` says (float: not at all; dynamic and static: the quantizer's defaults,
    int8 weights and, static, int8 activations in QDQ format; static_u8: uint8 both), as stored ("stored") and as
    ONNX Runtime saves it optimized at each level."""
    source = tmp_path / "float.onnx"
    onnx.save(model, source)
    if quantization != "float":
        quantized = tmp_path / f"{quantization}.onnx"
        if quantization == "dynamic":
            quantize_dynamic(source, quantized)
        else:
            shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
            kind = QuantType.QUInt8 if quantization == "static_u8" else QuantType.QInt8
            calibration = _Calibration(shape)
            quantize_static(
                source, quantized, calibration, quant_format=QuantFormat.QDQ, activation_type=kind, weight_type=kind
            )
        source = quantized
    graphs = {"stored": onnx.load(source)}
    for level, (value, disabled) in _LEVELS.items():
        options = ort.SessionOptions()
        options.graph_optimization_level = value
        options.optimized_model_filepath = str(tmp_path / f"{level}.onnx")
        options.log_severity_level = 3  # level all warns that the NCHWc graph is for this CPU only
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
        graphs[level] = onnx.load(options.optimized_model_filepath)
    return graphs


Figures = tuple[int, str]  # the estimate's total and the graph's op types
PerLayout = dict[int | None, Figures]  # keyed by NCHWc block, None for no NCHWc


def _on_this_cpu(table: dict[str, Figures | PerLayout]) -> dict[str, Figures]:
    """The table's figures for this CPU's layout: entries keyed by block are read at NCHWC_BLOCK."""
    return {level: (v[NCHWC_BLOCK] if isinstance(v, dict) else v) for level, v in table.items()}


def _estimates(graphs: dict[str, onnx.ModelProto]) -> dict[str, Figures]:
    """Per graph, the estimate's total and the graph's op types (ONNX Runtime's prefixed ms. or nchwc.); every
    node has an estimate."""
    estimates = {level: estimate(graph) for level, graph in graphs.items()}
    assert {level: e.without_estimate for level, e in estimates.items()} == {level: [] for level in graphs}
    return {
        level: (e.total, " ".join(sorted({_DOMAINS[n.domain] + n.op_type for n in graphs[level].graph.node})))
        for level, e in estimates.items()
    }


# The MLP at batch 1: MatMul 2*16*32 = 1024, Add 32, Relu 32, MatMul 2*32*4 = 256, Add 4: 1348. Quantized, the
# Relu goes into the quantization range (QDQ) or stays (dynamic). Q and DQ are 2 per element, so a Q/DQ pair on a
# tensor 4; DynamicQuantizeLinear 4 per element. No convolution or pool: level all is the same on every layout.
MLP_GRAPHS: dict[str, dict[str, Figures | PerLayout]] = {
    "float": {
        "stored": (1348, "Add MatMul Relu"),
        "basic": (1348, "Gemm Relu"),  # MatMul+Add as Gemm: 1024+32, Relu 32, 256+4
        "extended": (1316, "Gemm ms.FusedGemm"),  # the Relu fused into the first Gemm: 1348 - 32
        "all": (1316, "Gemm ms.FusedGemm"),
        "all, no NCHWc": (1316, "Gemm ms.FusedGemm"),
    },
    "dynamic": {
        # DynamicQuantizeLinear 4*16, scale Mul 1, MatMulInteger 1024, Cast 0, dequantize Mul 32, bias Add 32,
        # Relu 32, DynamicQuantizeLinear 4*32, Mul 1, MatMulInteger 256, Cast 0, Mul 4, Add 4:
        # 64+1+1024+32+32 + 32 + 128+1+256+4+4 = 1578
        "stored": (1578, "Add Cast DynamicQuantizeLinear MatMulInteger Mul Relu"),
        "basic": (1578, "Add Cast DynamicQuantizeLinear MatMulInteger Mul Relu"),
        # DynamicQuantizeMatMul as MatMul + bias, what it fuses not counted: 1024+32, Relu 32, 256+4 = 1348
        "extended": (1348, "Relu ms.DynamicQuantizeMatMul"),
        "all": (1348, "Relu ms.DynamicQuantizeMatMul"),
        "all, no NCHWc": (1348, "Relu ms.DynamicQuantizeMatMul"),
    },
    "static": {
        # DQ of the weights and biases 2*(512+32+128+4) = 1352; Q/DQ pairs on x, h, r, m, y 4*(16+32+32+4+4) = 352;
        # MatMul 1024, Add 32, MatMul 256, Add 4 (no Relu) = 1316: 1352+352+1316 = 3020
        "stored": (3020, "Add DequantizeLinear MatMul QuantizeLinear"),
        "basic": (3020, "Add DequantizeLinear MatMul QuantizeLinear"),
        # Q x 32, QLinearMatMul 1024, DQ h 64, DQ B1 64, Add 32, Q r 64, QLinearMatMul 256, DQ m 8, DQ B2 8, Add 4,
        # Q y 8, DQ y 8 = 1572
        "extended": (1572, "Add DequantizeLinear QLinearMatMul QuantizeLinear"),
        "all": (1572, "Add DequantizeLinear QLinearMatMul QuantizeLinear"),
        "all, no NCHWc": (1572, "Add DequantizeLinear QLinearMatMul QuantizeLinear"),
    },
    "static_u8": {
        "stored": (3020, "Add DequantizeLinear MatMul QuantizeLinear"),  # as static
        "basic": (3020, "Add DequantizeLinear MatMul QuantizeLinear"),
        # Q x 32, QLinearMatMul 1024, QLinearAdd 32, QLinearMatMul 256, QLinearAdd 4, DQ y 8 = 1356
        "extended": (1356, "DequantizeLinear QLinearMatMul QuantizeLinear ms.QLinearAdd"),
        "all": (1356, "DequantizeLinear QLinearMatMul QuantizeLinear ms.QLinearAdd"),
        "all, no NCHWc": (1356, "DequantizeLinear QLinearMatMul QuantizeLinear ms.QLinearAdd"),
    },
}


@pytest.mark.parametrize("quantization", MLP_GRAPHS)
def test_mlp_as_onnx_runtime_writes_it(quantization: str, tmp_path: Path) -> None:
    assert _estimates(_onnx_runtime_graphs(mlp(), quantization, tmp_path)) == _on_this_cpu(MLP_GRAPHS[quantization])


# The conv net at batch 1: Conv 2*(12*8*8)*3*3*3 + 768 (bias) = 42240, Relu 768, MaxPool (12*4*4)*2*2 = 768,
# Flatten 0, Gemm 2*10*192 + 10 = 3850: 47626.
CONV_NET_GRAPHS: dict[str, dict[str, Figures | PerLayout]] = {
    "float": {
        "stored": (47626, "Conv Flatten Gemm MaxPool Relu"),
        "basic": (47626, "Conv Flatten Gemm MaxPool Relu"),
        "extended": (46858, "Flatten Gemm MaxPool ms.FusedConv"),  # the Relu fused: 47626 - 768
        # NCHWc: the Conv (Relu fused) reads its 3 input channels unblocked and pads its 12 output channels to whole
        # blocks, 16 with 8- and 16-channel blocks alike (1.5 blocks of 8 round up to 2; 0.75 of 16 to 1):
        # 2*(16*8*8)*27 + 16*8*8 = 56320; its ReorderOutput drops the padding, and the MaxPool on 12 channels (not
        # a multiple of either block) stays ONNX's: 56320 + 768 + 3850 = 60938. No NCHWc: as extended.
        "all": {
            8: (60938, "Flatten Gemm MaxPool nchwc.Conv nchwc.ReorderOutput"),
            16: (60938, "Flatten Gemm MaxPool nchwc.Conv nchwc.ReorderOutput"),
            None: (46858, "Flatten Gemm MaxPool ms.FusedConv"),
        },
        "all, no NCHWc": (46858, "Flatten Gemm MaxPool ms.FusedConv"),
    },
    "dynamic": {
        # DynamicQuantizeLinear 4*192 = 768, scale Mul 1, ConvInteger 2*768*27 = 41472, dequantize Mul 768, bias Add
        # 768, Relu 768, MaxPool 768, DynamicQuantizeLinear 4*192 = 768, Mul 1, MatMulInteger 3840, Mul 10, Add 10
        # (Reshape, Cast, Flatten 0): 768+1+41472+768+768+768+768+768+1+3840+10+10 = 49942
        "stored": (49942, "Add Cast ConvInteger DynamicQuantizeLinear Flatten MatMulInteger MaxPool Mul Relu Reshape"),
        "basic": (49942, "Add Cast ConvInteger DynamicQuantizeLinear Flatten MatMulInteger MaxPool Mul Relu"),
        # The Gemm's DynamicQuantizeLinear, Mul, MatMulInteger, Cast, Mul, Add (768+1+3840+10+10) as a
        # DynamicQuantizeMatMul, 3840+10: 49942 - 4629 + 3850 = 49163. No NCHWc: it takes only float Convs, and
        # the MaxPool's 12 channels are not a multiple of the block.
        "extended": (
            49163,
            "Add Cast ConvInteger DynamicQuantizeLinear Flatten MaxPool Mul Relu ms.DynamicQuantizeMatMul",
        ),
        "all": (49163, "Add Cast ConvInteger DynamicQuantizeLinear Flatten MaxPool Mul Relu ms.DynamicQuantizeMatMul"),
        "all, no NCHWc": (
            49163,
            "Add Cast ConvInteger DynamicQuantizeLinear Flatten MaxPool Mul Relu ms.DynamicQuantizeMatMul",
        ),
    },
    "static": {
        # DQ of W, B, G, GB 2*(324+12+1920+10) = 4532; Q/DQ pairs on x, r, p, f, y 4*(192+768+192+192+10) = 5416;
        # Conv 42240, MaxPool 768, Gemm 3850 (no Relu) = 46858: 4532+5416+46858 = 56806
        "stored": (56806, "Conv DequantizeLinear Flatten Gemm MaxPool QuantizeLinear"),
        "basic": (56806, "Conv DequantizeLinear Flatten Gemm MaxPool QuantizeLinear"),
        # Q x 384, QLinearConv 42240, MaxPool 768, QGemm 3850, DQ y 20 = 47262
        "extended": (47262, "DequantizeLinear Flatten MaxPool QLinearConv QuantizeLinear ms.QGemm"),
        # The same in NHWC between Transposes: com.microsoft QLinearConv and NhwcMaxPool count as in NCHW
        "all": (47262, "DequantizeLinear Flatten QuantizeLinear Transpose ms.NhwcMaxPool ms.QGemm ms.QLinearConv"),
        "all, no NCHWc": (
            47262,
            "DequantizeLinear Flatten QuantizeLinear Transpose ms.NhwcMaxPool ms.QGemm ms.QLinearConv",
        ),
    },
    "static_u8": {
        "stored": (56806, "Conv DequantizeLinear Flatten Gemm MaxPool QuantizeLinear"),
        "basic": (56806, "Conv DequantizeLinear Flatten Gemm MaxPool QuantizeLinear"),
        "extended": (47262, "DequantizeLinear Flatten MaxPool QLinearConv QuantizeLinear ms.QGemm"),
        "all": (47262, "DequantizeLinear Flatten QuantizeLinear Transpose ms.NhwcMaxPool ms.QGemm ms.QLinearConv"),
        "all, no NCHWc": (
            47262,
            "DequantizeLinear Flatten QuantizeLinear Transpose ms.NhwcMaxPool ms.QGemm ms.QLinearConv",
        ),
    },
}


@pytest.mark.parametrize("quantization", CONV_NET_GRAPHS)
def test_conv_net_as_onnx_runtime_writes_it(quantization: str, tmp_path: Path) -> None:
    expected = _on_this_cpu(CONV_NET_GRAPHS[quantization])
    assert _estimates(_onnx_runtime_graphs(conv_net(), quantization, tmp_path)) == expected


# The residual net at batch 1, 16*8*8 = 1024 elements a channel map: Conv1 2*1024*3*3*3 + 1024 = 56320, Relu 1024,
# Conv2 2*1024*16*3*3 + 1024 = 295936, Add 1024, Sigmoid 1024, Mul 1024, AveragePool (16*4*4)*2*2 = 1024, Resize
# (nearest) 0, Concat 0, MaxPool (32*4*4)*2*2 = 2048, GlobalAveragePool 32*4*4 = 512, Flatten 0, Gemm
# 2*10*32 + 10 = 650: 360586.
RESIDUAL_NET_GRAPHS: dict[str, dict[str, Figures | PerLayout]] = {
    "float": {
        "stored": (
            360586,
            "Add AveragePool Concat Conv Flatten Gemm GlobalAveragePool MaxPool Mul Relu Resize Sigmoid",
        ),
        "basic": (360586, "Add AveragePool Concat Conv Flatten Gemm GlobalAveragePool MaxPool Mul Relu Resize Sigmoid"),
        # Conv1+Relu as FusedConv (-1024); Sigmoid and Mul as QuickGelu, x * sigmoid(x): 2 per element, as before
        "extended": (
            359562,
            "Add AveragePool Concat Conv Flatten Gemm GlobalAveragePool MaxPool Resize ms.FusedConv ms.QuickGelu",
        ),
        # NCHWc throughout (16 and 32 channels fill 8- and 16-channel blocks alike: no padding): Conv1 with its
        # Relu 56320, Conv2 summing in the residual 295936 + 1024 (the Add it replaces), QuickGelu 2048,
        # AveragePool 1024, Upsample 0, Concat 0, MaxPool 2048, GlobalAveragePool 512, ReorderOutput 0, Gemm 650:
        # as extended, 359562. No NCHWc: as "all, no NCHWc".
        "all": {
            8: (
                359562,
                "Concat Flatten Gemm ms.QuickGelu nchwc.AveragePool nchwc.Conv nchwc.GlobalAveragePool nchwc.MaxPool "
                "nchwc.ReorderOutput nchwc.Upsample",
            ),
            16: (
                359562,
                "Concat Flatten Gemm ms.QuickGelu nchwc.AveragePool nchwc.Conv nchwc.GlobalAveragePool nchwc.MaxPool "
                "nchwc.ReorderOutput nchwc.Upsample",
            ),
            None: (
                359562,
                "AveragePool Concat Flatten Gemm GlobalAveragePool MaxPool Resize ms.FusedConv ms.QuickGelu",
            ),
        },
        # Conv2 takes the residual Add into its FusedConv (295936 + 1024, as the Add was): 359562
        "all, no NCHWc": (
            359562,
            "AveragePool Concat Flatten Gemm GlobalAveragePool MaxPool Resize ms.FusedConv ms.QuickGelu",
        ),
    },
    "dynamic": {
        # Conv1: DynamicQuantizeLinear 4*192 = 768, scale Mul 1, ConvInteger 2*1024*27 = 55296, dequantize Mul 1024,
        # bias Add 1024, Relu 1024: 59137. Conv2: DynamicQuantizeLinear 4*1024 = 4096, Mul 1, ConvInteger
        # 2*1024*144 = 294912, Mul 1024, Add 1024: 301057. Add, Sigmoid, Mul, AveragePool 1024 each, MaxPool 2048,
        # GlobalAveragePool 512: 6656. Gemm: DynamicQuantizeLinear 4*32 = 128, Mul 1, MatMulInteger 640, Mul 10,
        # Add 10: 789. 59137 + 301057 + 6656 + 789 = 367639
        "stored": (
            367639,
            "Add AveragePool Cast Concat ConvInteger DynamicQuantizeLinear Flatten GlobalAveragePool MatMulInteger "
            "MaxPool Mul Relu Reshape Resize Sigmoid",
        ),
        "basic": (
            367639,
            "Add AveragePool Cast Concat ConvInteger DynamicQuantizeLinear Flatten GlobalAveragePool MatMulInteger "
            "MaxPool Mul Relu Resize Sigmoid",
        ),
        # Sigmoid and Mul as QuickGelu (2048, as before); the Gemm's 789 as DynamicQuantizeMatMul 650: 367500
        "extended": (
            367500,
            "Add AveragePool Cast Concat ConvInteger DynamicQuantizeLinear Flatten GlobalAveragePool MaxPool Mul Relu "
            "Resize ms.DynamicQuantizeMatMul ms.QuickGelu",
        ),
        # AveragePool, Upsample, MaxPool, GlobalAveragePool in NCHWc between ReorderInput and ReorderOutput (16 and
        # 32 channels: whole blocks of 8 or 16): 367500. No NCHWc: as extended.
        "all": {
            8: (
                367500,
                "Add Cast Concat ConvInteger DynamicQuantizeLinear Flatten Mul Relu ms.DynamicQuantizeMatMul "
                "ms.QuickGelu nchwc.AveragePool nchwc.GlobalAveragePool nchwc.MaxPool nchwc.ReorderInput "
                "nchwc.ReorderOutput nchwc.Upsample",
            ),
            16: (
                367500,
                "Add Cast Concat ConvInteger DynamicQuantizeLinear Flatten Mul Relu ms.DynamicQuantizeMatMul "
                "ms.QuickGelu nchwc.AveragePool nchwc.GlobalAveragePool nchwc.MaxPool nchwc.ReorderInput "
                "nchwc.ReorderOutput nchwc.Upsample",
            ),
            None: (
                367500,
                "Add AveragePool Cast Concat ConvInteger DynamicQuantizeLinear Flatten GlobalAveragePool MaxPool Mul "
                "Relu Resize ms.DynamicQuantizeMatMul ms.QuickGelu",
            ),
        },
        "all, no NCHWc": (
            367500,
            "Add AveragePool Cast Concat ConvInteger DynamicQuantizeLinear Flatten GlobalAveragePool MaxPool Mul Relu "
            "Resize ms.DynamicQuantizeMatMul ms.QuickGelu",
        ),
    },
    "static_u8": {
        # The float net without its Relu, 360586 - 1024 = 359562; DQ of W1, B1, W2, B2, G, GB
        # 2*(432+16+2304+16+320+10) = 6196; Q/DQ pairs on x, then r1 c2 s g sw up, then ap, cat, mp, gp, f, y
        # 4*(192 + 6*1024 + 256 + 2048 + 512 + 32 + 32 + 10) = 36904: 359562+6196+36904 = 402662
        "stored": (
            402662,
            "Add AveragePool Concat Conv DequantizeLinear Flatten Gemm GlobalAveragePool MaxPool Mul QuantizeLinear "
            "Resize Sigmoid",
        ),
        # ONNX Runtime gives each consumer of r1, s and sw a DQ of its own: + 3 * 2*1024 = 408806
        "basic": (
            408806,
            "Add AveragePool Concat Conv DequantizeLinear Flatten Gemm GlobalAveragePool MaxPool Mul QuantizeLinear "
            "Resize Sigmoid",
        ),
        # Q x 384, QLinearConv 56320 and 295936, QLinearAdd, QLinearSigmoid, QLinearMul, QLinearAveragePool 1024
        # each, Resize 0, QLinearConcat 0, MaxPool 2048, QLinearGlobalAveragePool 512, QGemm 650, DQ y 20:
        # 359562 + 384 + 20 = 359966
        "extended": (
            359966,
            "DequantizeLinear Flatten MaxPool QLinearConv QuantizeLinear Resize ms.QGemm ms.QLinearAdd "
            "ms.QLinearAveragePool ms.QLinearConcat ms.QLinearGlobalAveragePool ms.QLinearMul ms.QLinearSigmoid",
        ),
        # The convolutions and the Add in NHWC between Transposes: 359966 (NCHWc takes only float operators)
        "all": (
            359966,
            "DequantizeLinear Flatten MaxPool QuantizeLinear Resize Transpose ms.QGemm ms.QLinearAdd "
            "ms.QLinearAveragePool ms.QLinearConcat ms.QLinearConv ms.QLinearGlobalAveragePool ms.QLinearMul "
            "ms.QLinearSigmoid",
        ),
        "all, no NCHWc": (
            359966,
            "DequantizeLinear Flatten MaxPool QuantizeLinear Resize Transpose ms.QGemm ms.QLinearAdd "
            "ms.QLinearAveragePool ms.QLinearConcat ms.QLinearConv ms.QLinearGlobalAveragePool ms.QLinearMul "
            "ms.QLinearSigmoid",
        ),
    },
}


@pytest.mark.parametrize("quantization", RESIDUAL_NET_GRAPHS)
def test_residual_net_as_onnx_runtime_writes_it(quantization: str, tmp_path: Path) -> None:
    expected = _on_this_cpu(RESIDUAL_NET_GRAPHS[quantization])
    assert _estimates(_onnx_runtime_graphs(residual_net(), quantization, tmp_path)) == expected


def test_nchwc_graph_at_a_batch_of_32(tmp_path: Path) -> None:
    graphs = _onnx_runtime_graphs(conv_net(), "float", tmp_path)
    # 32 * 60938 with NCHWc (8- or 16-channel blocks alike), 32 * 46858 without
    assert estimate(graphs["all"], batch_size=32).total == {8: 1950016, 16: 1950016, None: 1499456}[NCHWC_BLOCK]
    assert estimate(graphs["all, no NCHWc"], batch_size=32).total == 1499456


# A 12->16 channel Conv 3x3 pad 1 on 8x8, with its Relu, at level all: per layout, the nodes ONNX Runtime writes
# with their FLOPs, and the filter shape the Conv is given. The Relu is fused in each case.
PADDED_INPUT = {
    # 8-channel blocks: the 12 input channels are a block and a half, so ReorderInput pads them to 2 blocks and
    # the filters to 16x16x3x3: 2*(16*8*8)*16*3*3 + 16*8*8 = 295936
    8: ([("ReorderInput", 0), ("Conv", 295936), ("ReorderOutput", 0)], [16, 16, 3, 3]),
    # 16-channel blocks: 12 input channels are less than one block, so the Conv reads them unblocked (NCHW),
    # filters 16x12x3x3: 2*(16*8*8)*12*3*3 + 16*8*8 = 222208
    16: ([("Conv", 222208), ("ReorderOutput", 0)], [16, 12, 3, 3]),
    # No NCHWc: a FusedConv with the model's own filters, 222208
    None: ([("FusedConv", 222208)], [16, 12, 3, 3]),
}


@pytest.mark.parametrize("level", ["all", "all, no NCHWc"])
def test_nchwc_conv_pads_its_input_channels_to_the_block(level: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    weights = [_random(rng, "W", 16, 12, 3, 3), _random(rng, "B", 16)]
    model = make_model(nodes, {"x": (F, ["N", 12, 8, 8])}, weights, {"": 17}, output_type=F)
    # The float model: Conv 2*(16*8*8)*12*3*3 + 1024 = 222208, Relu 1024
    assert estimate(model).total == 223232
    graph = _onnx_runtime_graphs(model, "float", tmp_path)[level]
    expected, filters = PADDED_INPUT[NCHWC_BLOCK if level == "all" else None]
    assert [(n.op_type, n.flops) for n in estimate(graph).nodes] == expected
    conv = next(n for n in graph.graph.node if n.op_type in ("Conv", "FusedConv"))
    assert next(list(i.dims) for i in graph.graph.initializer if i.name == conv.input[1]) == filters


def test_matmuls_sharing_a_dynamically_quantized_input(tmp_path: Path) -> None:
    """Two MatMuls of one input: dynamic quantization gives both a MatMulIntegerToFloat fed by one
    DynamicQuantizeLinear, which stays. The quantizer's value_info types their outputs float."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["a"], name="mm1"),
        helper.make_node("MatMul", ["x", "W2"], ["b"], name="mm2"),
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
    ]
    model = make_model(
        nodes, {"x": (F, ["N", 16])}, [_random(rng, "W1", 16, 8), _random(rng, "W2", 16, 8)], {"": 17}, F
    )
    assert _estimates(_onnx_runtime_graphs(model, "dynamic", tmp_path)) == {
        # DynamicQuantizeLinear 4*16, 2 scale Muls 1, 2 MatMulIntegers 2*8*16, 2 Casts 0, 2 Muls 8, Add 8:
        # 64 + 2 + 512 + 16 + 8 = 602
        "stored": (602, "Add Cast DynamicQuantizeLinear MatMulInteger Mul"),
        "basic": (602, "Add Cast DynamicQuantizeLinear MatMulInteger Mul"),
        # DynamicQuantizeLinear 64, 2 MatMulIntegerToFloat 256 (no bias), Add 8 = 584
        "extended": (584, "Add DynamicQuantizeLinear ms.MatMulIntegerToFloat"),
        "all": (584, "Add DynamicQuantizeLinear ms.MatMulIntegerToFloat"),
        "all, no NCHWc": (584, "Add DynamicQuantizeLinear ms.MatMulIntegerToFloat"),
    }


def test_quantized_contrib_ops_in_nhwc() -> None:
    """ONNX Runtime's quantized ops, channels last where they can be, on a 1x8x8x4 uint8 NHWC input."""
    ms = {"domain": "com.microsoft"}
    q = ["sc", "zp"]  # one scale and zero point for every tensor
    nodes = [
        helper.make_node(
            "QLinearAveragePool", ["x", *q, *q], ["ap"], kernel_shape=[2, 2], strides=[2, 2], channels_last=1, **ms
        ),
        helper.make_node("QLinearLeakyRelu", ["ap", *q, *q], ["lr"], **ms),
        helper.make_node("QLinearGlobalAveragePool", ["lr", *q, *q], ["gp"], channels_last=1, **ms),
        helper.make_node("QLinearSoftmax", ["gp", *q, *q], ["sm"], axis=-1, opset=13, **ms),
        helper.make_node("QLinearWhere", ["c", "sm", *q, "sm", *q, *q], ["wh"], **ms),
        helper.make_node("DequantizeLinear", ["wh", *q], ["dq"], **ms),
        helper.make_node("QuickGelu", ["dq"], ["qg"], **ms),  # alpha 1.702 by default
        helper.make_node("BiasGelu", ["qg", "b"], ["bg"], **ms),
        helper.make_node("QuantizeLinear", ["bg", *q], ["y"], **ms),
    ]
    initializers = [
        numpy_helper.from_array(np.float32(0.5), "sc"),
        numpy_helper.from_array(np.uint8(128), "zp"),
        numpy_helper.from_array(np.zeros(4, np.float32), "b"),
    ]
    inputs = {"x": (U8, [1, 8, 8, 4]), "c": (TensorProto.BOOL, [1, 1, 1, 4])}
    model = make_model(nodes, inputs, initializers, {"": 17, "com.microsoft": 1})
    assert [n.flops for n in estimate(model).nodes] == [
        256,  # NHWC output 1x4x4x4 = 64, * 2*2
        64,
        64,  # per input element; the output is 1x1x1x4
        20,  # 5 * 4
        4,
        8,  # 2 * 4
        12,  # alpha is not 1: 3 * 4
        24,  # the bias add and Gelu: 6 * 4
        8,  # 2 * 4
    ]


def test_nchwc_reorders_channels_last() -> None:
    """A 1x4x4x8 NHWC input reordered to NCHWc, a 1x1 NCHWc Conv with its bias and the input summed in, nearest
    Upsample x2, back to NHWC keeping 6 of the 8 channels (2 were padding), then a Relu."""
    nchwc = {"domain": "com.microsoft.nchwc"}
    nodes = [
        helper.make_node("ReorderInput", ["x"], ["r"], channels_last=1, **nchwc),
        helper.make_node("Conv", ["r", "W", "B", "r"], ["c"], kernel_shape=[1, 1], activation="Relu", **nchwc),
        helper.make_node("Upsample", ["c"], ["u"], scales=[1, 1, 2, 2], **nchwc),
        helper.make_node("ReorderOutput", ["u"], ["o"], channels=6, channels_last=1, **nchwc),
        helper.make_node("Relu", ["o"], ["y"]),
    ]
    model = make_model(
        nodes,
        {"x": (F, [1, 4, 4, 8])},
        [ones("W", 8, 8, 1, 1), ones("B", 8)],
        {"": 17, "com.microsoft.nchwc": 1},
    )
    assert [n.flops for n in estimate(model).nodes] == [
        0,
        2304,  # 2 * (8*4*4) * 8*1*1 = 2048, + 128 (bias) + 128 (the sum); the Relu fused is not counted
        0,
        0,
        384,  # 1x8x8x6
    ]


def test_nchwc_before_opset_10() -> None:
    """Slice took attributes and Resize did not exist: the standard forms follow."""
    nchwc = {"domain": "com.microsoft.nchwc"}
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], kernel_shape=[1, 1], **nchwc),
        helper.make_node("Upsample", ["c"], ["u"], scales=[1, 1, 2, 2], **nchwc),
        helper.make_node("ReorderOutput", ["u"], ["o"], channels=6, **nchwc),
        helper.make_node("Relu", ["o"], ["y"]),
    ]
    model = make_model(nodes, {"x": (F, [1, 8, 4, 4])}, [ones("W", 8, 8, 1, 1)], {"": 9, "com.microsoft.nchwc": 1})
    assert [n.flops for n in estimate(model).nodes] == [2048, 0, 0, 384]  # 2 * (8*4*4) * 8; 6*8*8


def test_fused_conv_sums_its_z_input() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["z"]),
        helper.make_node("FusedConv", ["x", "W", "B", "z"], ["y"], kernel_shape=[1, 1], domain="com.microsoft"),
    ]
    model = make_model(nodes, {"x": (F, [1, 4, 8, 8])}, [ones("W", 4, 4, 1, 1), ones("B", 4)], {"": 17})
    assert estimate(model).nodes[1].flops == 2560  # 2 * 256 * 4 + 256 (bias) + 256 (z)


def _iris_like() -> tuple[np.ndarray, np.ndarray]:
    x = (np.arange(48, dtype=np.float32).reshape(12, 4) * 7) % 11
    return x, np.arange(12) % 3


def test_logistic_regression_linear_classifier() -> None:
    x, y = _iris_like()
    model = to_onnx(LogisticRegression(max_iter=1000).fit(x, y), x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    result = estimate(model)
    assert [(n.op_type, n.flops) for n in result.nodes] == [
        ("LinearClassifier", 42),  # 2 * 1 * (3 classes * 4 features) + 3 intercepts + 5 * 3 (softmax)
        ("Cast", 0),
        ("Normalizer", None),
        ("ZipMap", None),
    ]
    assert result.without_estimate == ["Normalizer", "ZipMap"]
    assert result.total == 42
    assert estimate(model, batch_size=2).total == 84
    assert parameter_count(model) == 0  # the coefficients are attributes, not initializers


def test_binary_logistic_regression() -> None:
    x, y = _iris_like()
    estimator = LogisticRegression().fit(x, y % 2)
    model = to_onnx(estimator, x[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3})
    linear = next(n for n in estimate(model).nodes if n.op_type == "LinearClassifier")
    assert linear.flops == 20  # 2 * (2 scores * 4 features) + 2 intercepts + 2 (logistic)


def test_random_forest_has_no_estimate() -> None:
    x, y = _iris_like()
    forest = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(x, y)
    result = estimate(to_onnx(forest, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}))
    assert [(n.op_type, n.flops) for n in result.nodes] == [
        ("TreeEnsembleClassifier", None),
        ("Cast", 0),
        ("ZipMap", None),
    ]
    assert result.without_estimate == ["TreeEnsembleClassifier", "ZipMap"]
    assert result.total == 0
    assert result.by_op_type == {"Cast": 0}


def test_unknown_custom_op() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Foo", ["r"], ["y"], domain="acme")]
    result = estimate(make_model(nodes, {"x": (F, [3])}, opsets={"": 20, "acme": 1}))
    assert result.nodes == [NodeFlops("relu", "Relu", 3), NodeFlops("Foo_1", "Foo", None)]
    assert result.without_estimate == ["Foo"]


def test_refused_shape_inference_leaves_what_declared_shapes_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> onnx.ModelProto:
        raise ValueError("Message onnx.ModelProto exceeds maximum protobuf size of 2GB")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", refuse)
    result = estimate(cnn_model())
    assert [n.flops for n in result.nodes] == [None, None, None, 0, None]
    assert result.without_estimate == ["Conv", "Gemm", "MaxPool", "Relu"]
