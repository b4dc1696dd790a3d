"""ONNX graphs the optimizer tests build by hand (their FLOPs are counted by hand in the tests)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def ones(name: str, *shape: int, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(shape, dtype=dtype), name)


def make_model(
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


def cnn_nodes() -> list[onnx.NodeProto]:
    """Conv (W, B) 3x3 pad 1, Relu, MaxPool 2x2, Flatten, Gemm (G, GB, transB) from x to y."""
    return [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "G", "GB"], ["y"], name="fc", transB=1),
    ]


def cnn_model() -> onnx.ModelProto:
    """Conv 3->8 3x3 pad 1 with bias on Nx3x32x32, Relu, MaxPool 2x2, Flatten, Gemm to 10 classes (transB)."""
    nodes = cnn_nodes()
    weights = [ones("W", 8, 3, 3, 3), ones("B", 8), ones("G", 10, 2048), ones("GB", 10)]
    return make_model(nodes, {"x": (F, ["N", 3, 32, 32])}, weights, {"": 17}, output_type=F)
