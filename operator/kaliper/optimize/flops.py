"""Parameter count and FLOPs estimate of an ONNX model, read from its graph without running it.

Conventions (per inference, at the given batch size):

- A multiply-add counts 2 FLOPs: Conv is 2 * output elements * (Cin / group) * prod(kernel), plus one per
  output element for the bias; Gemm is 2 * M * N * K plus M * N for C; MatMul is 2 * batch * M * N * K with
  the batch dimensions broadcast. ConvTranspose is 2 * input elements * (Cout / group) * prod(kernel) + bias.
- The integer forms (ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul) count as their float forms, as
  Sparsify does: they are integer operations, but the same count keeps a quantized model comparable with
  the float one. ONNX Runtime's fused forms (FusedConv, FusedGemm, FusedMatMul) count as their base op; the
  fused activation is not counted.
- Elementwise ops count per output element, composite ones as the primitives of their ONNX decomposition
  (each 1 per element): see `_PER_OUTPUT_ELEMENT`. Softmax and LogSoftmax are 5 (max, subtract, exp, sum,
  divide); BatchNormalization 2 (its inference form is a scale and a shift); LayerNormalization 6, +1 with
  a bias (mean, subtract, square, variance, normalize, scale); Gelu 5, its tanh form 9.
- Pools count prod(kernel) per output element; global pools and reductions count per input element.
- QuantizeLinear / DequantizeLinear count 2 per element (scale and zero point): they are arithmetic, not
  data movement. Shape and data-movement ops (`_DATA_MOVEMENT`) count 0, which is an estimate.
- ai.onnx.ml LinearClassifier / LinearRegressor count 2 * rows * len(coefficients) + rows * len(intercepts)
  plus their post_transform at the rates of Softmax / Sigmoid. Other ops (tree ensembles, ZipMap, custom
  ops, If / Loop / Scan, whose subgraphs are not walked) have no estimate: their flops are None.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, shape_inference

Shapes = Mapping[str, tuple[int, ...]]
Rule = Callable[[onnx.NodeProto, Shapes], int | None]


@dataclass(frozen=True)
class NodeFlops:
    """One node of the stored graph. Unnamed nodes take the name ONNX Runtime's profiler gives them,
    `<op_type>_<index>`, so the two line up."""

    name: str
    op_type: str
    flops: int | None


@dataclass(frozen=True)
class FlopsEstimate:
    """Per-node FLOPs of one inference; `total` and `by_op_type` sum the nodes that have an estimate."""

    nodes: list[NodeFlops]
    total: int
    by_op_type: dict[str, int]
    without_estimate: list[str]
    """Sorted op types of the nodes with no estimate, which make `total` a lower bound."""


def parameter_count(model: onnx.ModelProto) -> int:
    """Elements of the model's initializers, subgraphs' included, read from their dims (so external data
    need not be loaded). Tensors of Constant nodes and attributes (ai.onnx.ml coefficients, trees) are not
    parameters."""
    count = 0
    for graph in _graphs(model.graph):
        count += sum(math.prod(t.dims) for t in graph.initializer)
        count += sum(math.prod(t.dims) for t in graph.sparse_initializer)
    return count


def estimate(
    model: onnx.ModelProto, batch_size: int = 1, *, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> FlopsEstimate:
    """FLOPs of each node of the main graph for one inference. Every dynamic dim of the graph inputs is
    taken as `batch_size` (normally the batch axis is the only one); `input_shapes`, such as the shapes of
    the feeds that were profiled, overrides whole inputs. The caller's model is not modified."""
    shapes = _inferred_shapes(model, batch_size, input_shapes or {})
    nodes = []
    for index, node in enumerate(model.graph.node):
        rule = _RULES.get((_domain(node.domain), node.op_type))
        flops = rule(node, shapes) if rule else None
        nodes.append(NodeFlops(node.name or f"{node.op_type}_{index}", node.op_type, flops))
    by_op_type: dict[str, int] = {}
    for n in nodes:
        if n.flops is not None:
            by_op_type[n.op_type] = by_op_type.get(n.op_type, 0) + n.flops
    without = sorted({n.op_type for n in nodes if n.flops is None})
    return FlopsEstimate(nodes, sum(by_op_type.values()), by_op_type, without)


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attribute.g)
            for g in attribute.graphs:
                yield from _graphs(g)


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _inferred_shapes(model: onnx.ModelProto, batch_size: int, input_shapes: Mapping[str, Sequence[int]]) -> Shapes:
    """Static shapes of the tensors of the main graph after fixing the inputs' dynamic dims."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    initializers = {t.name for t in copy.graph.initializer}
    for value in copy.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        shape = value.type.tensor_type.shape
        if value.name in input_shapes:
            shape.ClearField("dim")
            for size in input_shapes[value.name]:
                shape.dim.add().dim_value = int(size)
            continue
        for dim in shape.dim:
            if not dim.HasField("dim_value") or dim.dim_value <= 0:
                dim.dim_value = batch_size
    _as_standard_ops(copy.graph)
    try:
        graph = shape_inference.infer_shapes(copy, check_type=False, strict_mode=False, data_prop=True).graph
    except (shape_inference.InferenceError, ValueError):
        # A graph inference rejects (or a proto over 2 GiB) still gets the estimates its declared shapes allow.
        graph = copy.graph
    shapes = {t.name: tuple(t.dims) for t in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        shape = _static(value)
        if shape is not None:
            shapes[value.name] = shape
    return shapes


def _static(value: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return None
    dims = value.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def _as_standard_ops(graph: onnx.GraphProto) -> None:
    """Turn ONNX Runtime's fused ops into their base op (in place, on the copy): ONNX's shape inference
    knows no com.microsoft op, and without this nothing after a FusedConv would have a shape."""
    for node in graph.node:
        if node.domain != "com.microsoft":
            continue
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "FusedConv":
            keep, inputs = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"), node.input[:3]
        elif node.op_type == "FusedGemm":
            keep, inputs = ("alpha", "beta", "transA", "transB"), node.input[:3]
        elif node.op_type == "FusedMatMul" and not any(attributes.get(a) for a in _MATMUL_TRANSPOSES):
            keep, inputs = (), node.input[:2]
        else:
            continue
        replacement = helper.make_node(
            node.op_type.removeprefix("Fused"),
            list(inputs),
            list(node.output),
            name=node.name,
            **{k: v for k, v in attributes.items() if k in keep},
        )
        node.CopyFrom(replacement)


# FusedMatMul's attributes that move its operands' axes (MatMul has none).
_MATMUL_TRANSPOSES = ("transA", "transB", "transBatchA", "transBatchB")


def _input(node: onnx.NodeProto, shapes: Shapes, index: int) -> tuple[int, ...] | None:
    if index >= len(node.input) or not node.input[index]:
        return None
    return shapes.get(node.input[index])


def _output(node: onnx.NodeProto, shapes: Shapes) -> tuple[int, ...] | None:
    return shapes.get(node.output[0]) if node.output else None


def _has_input(node: onnx.NodeProto, index: int) -> bool:
    return index < len(node.input) and bool(node.input[index])


def _attribute(node: onnx.NodeProto, name: str, default: Any) -> Any:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _conv(weight: int, bias: int | None, transposed: bool = False) -> Rule:
    """2 * output elements (input elements when transposed) * prod(weight dims after the first) + output
    elements for the bias. The weight's dims after the first are Cin/group * kernel, or Cout/group * kernel
    for ConvTranspose: each input element meets them once."""

    def rule(node: onnx.NodeProto, shapes: Shapes) -> int | None:
        x, w, y = _input(node, shapes, 0), _input(node, shapes, weight), _output(node, shapes)
        if x is None or w is None or y is None:
            return None
        flops = 2 * math.prod(x if transposed else y) * math.prod(w[1:])
        if bias is not None and _has_input(node, bias):
            flops += math.prod(y)
        return flops

    return rule


def _gemm(node: onnx.NodeProto, shapes: Shapes) -> int | None:
    a, b = _input(node, shapes, 0), _input(node, shapes, 1)
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return None
    m, k = reversed(a) if _attribute(node, "transA", 0) else a
    n = b[0] if _attribute(node, "transB", 0) else b[1]
    return 2 * m * n * k + (m * n if _has_input(node, 2) else 0)


def _matmul(a_index: int, b_index: int) -> Rule:
    """2 * batch * M * N * K with numpy's rules: 1-D operands gain a unit dim, batch dims broadcast."""

    def rule(node: onnx.NodeProto, shapes: Shapes) -> int | None:
        a, b = _input(node, shapes, a_index), _input(node, shapes, b_index)
        if not a or not b or _attribute(node, "transBatchA", 0) or _attribute(node, "transBatchB", 0):
            return None
        a = (1, *a) if len(a) == 1 else a
        b = (*b, 1) if len(b) == 1 else b
        # FusedMatMul's transposes; MatMul has no such attributes.
        if _attribute(node, "transA", 0):
            a = (*a[:-2], a[-1], a[-2])
        if _attribute(node, "transB", 0):
            b = (*b[:-2], b[-1], b[-2])
        try:
            batch = np.broadcast_shapes(a[:-2], b[:-2])
        except ValueError:
            return None
        return 2 * math.prod(batch) * a[-2] * b[-1] * a[-1]

    return rule


def _per_output_element(per: int) -> Rule:
    def rule(node: onnx.NodeProto, shapes: Shapes) -> int | None:
        y = _output(node, shapes)
        return None if y is None else per * math.prod(y)

    return rule


def _per_input_element(per: int) -> Rule:
    def rule(node: onnx.NodeProto, shapes: Shapes) -> int | None:
        x = _input(node, shapes, 0)
        return None if x is None else per * math.prod(x)

    return rule


def _variadic(extra: int) -> Rule:
    """Sum, Max, Min: one op per input beyond the first, per output element; Mean one more (the divide)."""

    def rule(node: onnx.NodeProto, shapes: Shapes) -> int | None:
        y = _output(node, shapes)
        inputs = sum(1 for name in node.input if name)
        return None if y is None else (inputs - 1 + extra) * math.prod(y)

    return rule


def _pool(node: onnx.NodeProto, shapes: Shapes) -> int | None:
    y = _output(node, shapes)
    kernel = _attribute(node, "kernel_shape", None)
    return None if y is None or not kernel else math.prod(kernel) * math.prod(y)


def _layer_normalization(node: onnx.NodeProto, shapes: Shapes) -> int | None:
    y = _output(node, shapes)
    return None if y is None else (6 + _has_input(node, 2)) * math.prod(y)


def _gelu(node: onnx.NodeProto, shapes: Shapes) -> int | None:
    y = _output(node, shapes)
    per = 9 if _attribute(node, "approximate", b"none") in (b"tanh", "tanh") else 5
    return None if y is None else per * math.prod(y)


def _zero(node: onnx.NodeProto, shapes: Shapes) -> int:
    return 0


# post_transform of the ai.onnx.ml linear models, per score, at the rates of Softmax and Sigmoid.
_POST_TRANSFORM = {"NONE": 0, "SOFTMAX": 5, "SOFTMAX_ZERO": 5, "LOGISTIC": 1, "PROBIT": 1}


def _linear_ml(node: onnx.NodeProto, shapes: Shapes) -> int | None:
    x = _input(node, shapes, 0)
    coefficients = list(_attribute(node, "coefficients", []))
    intercepts = list(_attribute(node, "intercepts", []))
    if x is None or not x or not coefficients:
        return None
    rows = math.prod(x[:-1])
    scores = len(coefficients) // x[-1] if x[-1] else 0
    transform = _attribute(node, "post_transform", b"NONE")
    transform = transform.decode() if isinstance(transform, bytes) else str(transform)
    per_score = _POST_TRANSFORM.get(transform, 0)
    return 2 * rows * len(coefficients) + rows * len(intercepts) + per_score * rows * scores


_PER_OUTPUT_ELEMENT = {
    1: (
        "Add Sub Mul Div Pow Mod Neg Abs Reciprocal Sqrt Exp Log Erf Sin Cos Tan Floor Ceil Round Sign "
        "Relu LeakyRelu PRelu Elu Selu Celu ThresholdedRelu Sigmoid HardSigmoid HardSwish Tanh Softplus "
        "Softsign Clip Equal Less LessOrEqual Greater GreaterOrEqual Where Not And Or Xor IsNaN IsInf"
    ),
    2: "BatchNormalization QuantizeLinear DequantizeLinear",
    3: "Mish",  # x * tanh(softplus(x))
    5: "Softmax LogSoftmax",
    7: "InstanceNormalization",  # LayerNormalization's six with scale and bias always present
}
_PER_INPUT_ELEMENT = {
    1: "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ArgMax ArgMin GlobalAveragePool GlobalMaxPool",
    2: "ReduceL1 ReduceL2 ReduceSumSquare ReduceLogSumExp",
    4: "DynamicQuantizeLinear",  # min, max, scale, zero point
}
_DATA_MOVEMENT = (
    "Reshape Flatten Transpose Concat Split Slice Gather GatherElements GatherND ScatterElements ScatterND "
    "Squeeze Unsqueeze Shape Size Identity Cast CastLike Constant ConstantOfShape Expand Tile Pad "
    "DepthToSpace SpaceToDepth Dropout"
)

_RULES: dict[tuple[str, str], Rule] = {
    **{("", op): _per_output_element(per) for per, ops in _PER_OUTPUT_ELEMENT.items() for op in ops.split()},
    **{("", op): _per_input_element(per) for per, ops in _PER_INPUT_ELEMENT.items() for op in ops.split()},
    **{("", op): _zero for op in _DATA_MOVEMENT.split()},
    ("", "Conv"): _conv(1, 2),
    ("com.microsoft", "FusedConv"): _conv(1, 2),
    ("", "ConvInteger"): _conv(1, None),
    ("", "QLinearConv"): _conv(3, 8),
    ("", "ConvTranspose"): _conv(1, 2, transposed=True),
    ("", "Gemm"): _gemm,
    ("com.microsoft", "FusedGemm"): _gemm,
    ("", "MatMul"): _matmul(0, 1),
    ("com.microsoft", "FusedMatMul"): _matmul(0, 1),
    ("", "MatMulInteger"): _matmul(0, 1),
    ("", "QLinearMatMul"): _matmul(0, 3),
    ("", "Sum"): _variadic(0),
    ("", "Max"): _variadic(0),
    ("", "Min"): _variadic(0),
    ("", "Mean"): _variadic(1),
    ("", "MaxPool"): _pool,
    ("", "AveragePool"): _pool,
    ("", "LpPool"): _pool,
    ("", "LayerNormalization"): _layer_normalization,
    ("", "Gelu"): _gelu,
    ("com.microsoft", "Gelu"): _gelu,
    ("com.microsoft", "FastGelu"): _per_output_element(9),
    ("ai.onnx.ml", "LinearClassifier"): _linear_ml,
    ("ai.onnx.ml", "LinearRegressor"): _linear_ml,
}
