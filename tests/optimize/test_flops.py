from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from skl2onnx import to_onnx
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from kaliper.optimize.flops import FlopsEstimate, NodeFlops, estimate, parameter_count

F, U8 = TensorProto.FLOAT, TensorProto.UINT8


def _weights(name: str, *shape: int, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(shape, dtype=dtype), name)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[int, list[int | str | None]]],
    initializers: Sequence[onnx.TensorProto] = (),
    opsets: dict[str, int] | None = None,
    output_type: int = TensorProto.UNDEFINED,
) -> onnx.ModelProto:
    """A graph whose outputs are the last node's, their shapes (and types unless given) left to inference."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(name, dtype, shape) for name, (dtype, shape) in inputs.items()],
        [helper.make_tensor_value_info(name, output_type, None) for name in nodes[-1].output],
        list(initializers),
    )
    imports = [helper.make_opsetid(domain, version) for domain, version in (opsets or {"": 20}).items()]
    return helper.make_model(graph, opset_imports=imports)


def cnn_model() -> onnx.ModelProto:
    """Conv 3->8 3x3 pad 1 with bias on Nx3x32x32, Relu, MaxPool 2x2, Flatten, Gemm to 10 classes (transB)."""
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "G", "GB"], ["y"], name="fc", transB=1),
    ]
    weights = [_weights("W", 8, 3, 3, 3), _weights("B", 8), _weights("G", 10, 2048), _weights("GB", 10)]
    return _model(nodes, {"x": (F, ["N", 3, 32, 32])}, weights, {"": 17}, output_type=F)


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
        [_weights("t", 3)],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["b"])], "else", [], [helper.make_tensor_value_info("b", F, None)]
    )
    nodes = [
        constant,
        helper.make_node("Mul", ["x", "w"], ["m"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    model = _model(nodes, {"x": (F, [3]), "c": (TensorProto.BOOL, [])}, [_weights("w", 1, 3)])
    assert parameter_count(model) == 6  # w: 1*3, t: 3 (in the If's branch); the Constant's 100 are not
    result = estimate(model)
    assert [n.flops for n in result.nodes] == [0, 3, None]
    assert result.without_estimate == ["If"]
    assert result.total == 3


def test_unnamed_nodes_take_onnx_runtime_profiler_names() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    result = estimate(_model(nodes, {"x": (F, [2, 5])}))
    assert result.nodes == [NodeFlops("Relu_0", "Relu", 10), NodeFlops("Sigmoid_1", "Sigmoid", 10)]


def test_matmul_broadcasts_batch_dims() -> None:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")]
    model = _model(nodes, {"a": (F, [2, 1, 4, 8]), "b": (F, [3, 8, 5])})
    assert estimate(model).total == 1920  # batch (2, 3): 2 * 6 * 4*5*8


def test_matmul_with_a_vector() -> None:
    nodes = [helper.make_node("MatMul", ["v", "b"], ["y"])]
    assert estimate(_model(nodes, {"v": (F, [8]), "b": (F, [8, 5])})).total == 80  # 2 * 1*5*8


def test_input_shapes_override_the_inputs() -> None:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
    model = _model(nodes, {"a": (F, ["B", "M", 8])}, [_weights("b", 8, 5)])
    assert estimate(model).total == 80  # both dynamic dims as batch 1: 2 * 1*5*8
    assert estimate(model, input_shapes={"a": (3, 4, 8)}).total == 960  # 2 * 3 * 4*5*8


# One node on a 1x4x8x8 float input (256 elements) unless said otherwise, and its hand-counted FLOPs.
CASES = {
    "softmax": (helper.make_node("Softmax", ["x"], ["y"], axis=1), [], 1280),  # 5 * 256
    "batchnorm": (
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]),
        [_weights(n, 4) for n in "sbmv"],
        512,  # 2 * 256
    ),
    "layernorm with bias": (
        helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1),
        [_weights("s", 8), _weights("b", 8)],
        1792,  # 7 * 256
    ),
    "layernorm": (
        helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-1),
        [_weights("s", 8)],
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
    "depthwise conv": (
        helper.make_node("Conv", ["x", "W"], ["y"], group=4, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        [_weights("W", 4, 1, 3, 3)],
        4608,  # 2 * 256 * 1*3*3, no bias
    ),
    "conv transpose": (
        helper.make_node("ConvTranspose", ["x", "W", "B"], ["y"], strides=[2, 2]),
        [_weights("W", 4, 2, 3, 3), _weights("B", 2)],
        9794,  # 2 * 256 * 2*3*3 + bias on 1x2x17x17 = 9216 + 578
    ),
}


@pytest.mark.parametrize("node, initializers, expected", CASES.values(), ids=CASES.keys())
def test_one_node(node: onnx.NodeProto, initializers: list[onnx.TensorProto], expected: int) -> None:
    result = estimate(_model([node], {"x": (F, [1, 4, 8, 8])}, initializers))
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
    initializers = [zero, scale, _weights("W", 6, 4, 1, 1, dtype=np.uint8), _weights("B", 6, dtype=np.int32)]
    model = _model(nodes, {"x": (U8, [1, 4, 8, 8]), "a": (U8, [4, 8]), "b": (U8, [8, 5])}, initializers)
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
    assert [n.flops for n in estimate(_model(nodes, inputs)).nodes] == [
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
    weights = [_weights("W", 8, 3, 3, 3), _weights("B", 8), _weights("G", 10, 2048), _weights("H", 4, 10)]
    model = _model(nodes, {"x": (F, [1, 3, 32, 32])}, weights, {"": 17, "com.microsoft": 1})
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
    result = estimate(_model(nodes, {"x": (F, [3])}, opsets={"": 20, "acme": 1}))
    assert result.nodes == [NodeFlops("relu", "Relu", 3), NodeFlops("Foo_1", "Foo", None)]
    assert result.without_estimate == ["Foo"]


def test_refused_shape_inference_leaves_what_declared_shapes_allow(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> onnx.ModelProto:
        raise ValueError("Message onnx.ModelProto exceeds maximum protobuf size of 2GB")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", refuse)
    result = estimate(cnn_model())
    assert [n.flops for n in result.nodes] == [None, None, None, 0, None]
    assert result.without_estimate == ["Conv", "Gemm", "MaxPool", "Relu"]
