"""Parameter count and FLOPs estimate of an ONNX model, read from its graph without running it.

Conventions (per inference, at the given batch size):

- A multiply-add counts 2 FLOPs: Conv is 2 * output elements * (Cin / group) * prod(kernel), plus one per
  output element for the bias; Gemm is 2 * M * N * K plus M * N for C; MatMul is 2 * batch * M * N * K with
  the batch dimensions broadcast. ConvTranspose is 2 * input elements * (Cout / group) * prod(kernel) + bias.
- The integer forms (ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul) count as their float forms, as
  Sparsify does: they are integer operations, but the same count keeps a quantized model comparable with
  the float one. So do ONNX Runtime's quantized contrib ops (com.microsoft QLinearConv, QGemm, QLinearAdd,
  QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearWhere, QLinearAveragePool,
  QLinearGlobalAveragePool, QLinearConcat, NhwcMaxPool; MatMulIntegerToFloat as MatMul plus its bias), in
  either layout: with `channels_last` their tensors are NHWC, the count is the same.
- ONNX Runtime's fused forms count as their base op, plus one per output element for an added tensor (the
  residual a Conv sums in); what else they fuse is not counted: FusedConv, FusedGemm, FusedMatMul and the
  NCHWc Conv leave out their activation, DynamicQuantizeMatMul (a MatMul plus its bias) the quantization of
  its input and the scaling of its output. The unfused graph counts those as the elementwise ops they are.
- ONNX Runtime's NCHWc layout (com.microsoft.nchwc, written at graph optimization level all where MLAS has
  NCHWc kernels, as on x86) keeps 4-D NCHW shapes with the channel count padded up to the block size (8
  with AVX2, 16 with AVX-512). The NCHWc Conv's weights are padded in both channel dims (Cout, and Cin when
  its input is NCHWc), its bias too. The padded channels are counted, in the Conv (from its weights) and in
  every op on its output until a ReorderOutput drops them: they are computed. Its Conv, MaxPool,
  AveragePool, GlobalAveragePool and GlobalMaxPool count as ONNX's, Upsample as Resize (nearest),
  ReorderInput and ReorderOutput as data movement.
- Elementwise ops count per output element, composite ones as the primitives of their ONNX decomposition
  (each 1 per element): see `_PER_OUTPUT_ELEMENT`. Softmax and LogSoftmax are 5 (max, subtract, exp, sum,
  divide); BatchNormalization 2 (its inference form is a scale and a shift); LayerNormalization 6, +1 with
  a bias (mean, subtract, square, variance, normalize, scale); Gelu 5, its tanh form 9; QuickGelu
  (x * sigmoid(alpha * x)) 2, 3 when alpha is not 1 (ONNX Runtime skips the scaling by 1).
- Pools count prod(kernel) per output element; global pools and reductions count per input element. Resize
  and Upsample move data in nearest mode (0); linear and cubic weigh and sum taps inputs per output element,
  2 * taps - 1, with taps 2 (linear) or 4 (cubic) to the power of the number of resized axes.
- QuantizeLinear / DequantizeLinear count 2 per element (scale and zero point), DynamicQuantizeLinear 4 per
  input element (min, max, scale, zero point): they are arithmetic, not data movement. Shape and
  data-movement ops (`_DATA_MOVEMENT`) count 0, which is an estimate.
- ai.onnx.ml LinearClassifier / LinearRegressor count 2 * rows * len(coefficients) + rows * len(intercepts)
  plus their post_transform at the rates of Softmax / Sigmoid. Other ops (tree ensembles, ZipMap, custom
  ops, If / Loop / Scan, whose subgraphs are not walked) have no estimate: their flops are None.

Shapes come from ONNX's shape inference, run on a private copy of the graph in which ONNX Runtime's ops
stand as the ONNX ops of the same shapes (an NCHWc Conv as a Conv on the padded weights, an NHWC op between
transposes, a ReorderOutput as a Slice of its channels); it knows none of them, and without this nothing
after them would have a shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

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
    _as_standard_ops(copy)
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


def _as_standard_ops(model: onnx.ModelProto) -> None:
    """Stand ONNX Runtime's ops of the main graph as ONNX ops of the same output shapes (in place, on the
    copy): ONNX's shape inference knows no com.microsoft or com.microsoft.nchwc op, and without this nothing
    after a FusedConv, an NCHWc Conv or a QGemm would have a shape. A node may become several (an NHWC op
    between transposes); the added tensors and initializers have names of their own."""
    opset = next((o.version for o in model.opset_import if _domain(o.domain) == ""), 0)
    nodes: list[onnx.NodeProto] = []
    for index, node in enumerate(model.graph.node):
        form = _STANDARD_FORMS.get((_domain(node.domain), node.op_type))
        replacement = form(node, _Rewrite(model.graph, opset, index)) if form and node.output else None
        nodes.extend([node] if replacement is None else replacement)
    del model.graph.node[:]
    model.graph.node.extend(nodes)


@dataclass(frozen=True)
class _Rewrite:
    """Where a node's standard form goes: the copy's graph, its ONNX opset, the node's index."""

    graph: onnx.GraphProto
    opset: int
    index: int

    def name(self, suffix: str) -> str:
        return f"kaliper/{self.index}/{suffix}"

    def constant(self, suffix: str, values: Sequence[float], dtype: type) -> str:
        name = self.name(suffix)
        self.graph.initializer.append(numpy_helper.from_array(np.array(values, dtype), name))
        return name

    def node(
        self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], source: onnx.NodeProto
    ) -> onnx.NodeProto:
        """The ONNX op with the source node's attributes that the op defines at this opset."""
        try:
            known = onnx.defs.get_schema(op_type, self.opset).attributes
        except onnx.defs.SchemaError:
            known = {}
        attributes = [a for a in source.attribute if a.name in known]
        node = helper.make_node(op_type, list(inputs), list(outputs), name=source.name)
        node.attribute.extend(attributes)
        return node


Form = Callable[[onnx.NodeProto, _Rewrite], list[onnx.NodeProto] | None]


def _as(op_type: str, *inputs: int, like: Sequence[int] = ()) -> Form:
    """The ONNX op on the node's inputs at these indices (absent ones left empty), onto its first output. Where
    the node's output type is not the ONNX op's, it is that of its first present input in `like`, given by a
    CastLike (opset 15 on): the quantizer's value_info declares the original types, and a conflicting one
    would cost the tensor its shape."""

    def form(node: onnx.NodeProto, rewrite: _Rewrite) -> list[onnx.NodeProto]:
        names = [node.input[i] if i < len(node.input) else "" for i in inputs]
        while names and not names[-1]:
            names.pop()
        typed = next((node.input[i] for i in like if _has_input(node, i)), None)
        if typed is None or rewrite.opset < 15:
            return [rewrite.node(op_type, names, node.output[:1], node)]
        untyped = rewrite.name("untyped")
        return [
            rewrite.node(op_type, names, [untyped], node),
            helper.make_node("CastLike", [untyped, typed], node.output[:1]),
        ]

    return form


def _nhwc(form: Form, always: bool = False) -> Form:
    """ONNX Runtime's NHWC forms (`channels_last`, or every NhwcMaxPool): the NCHW form between transposes.
    The rank is the kernel's plus 2, else 4."""

    def wrapped(node: onnx.NodeProto, rewrite: _Rewrite) -> list[onnx.NodeProto] | None:
        if not always and not _attribute(node, "channels_last", 0):
            return form(node, rewrite)
        rank = len(_attribute(node, "kernel_shape", [0, 0])) + 2
        inner = onnx.NodeProto()
        inner.CopyFrom(node)
        inner.input[0], inner.output[0] = rewrite.name("nchw_input"), rewrite.name("nchw_output")
        nchw = form(inner, rewrite)
        if nchw is None:
            return None
        return [
            helper.make_node("Transpose", [node.input[0]], [inner.input[0]], perm=[0, rank - 1, *range(1, rank - 1)]),
            *nchw,
            helper.make_node("Transpose", [inner.output[0]], [node.output[0]], perm=[0, *range(2, rank), 1]),
        ]

    return wrapped


def _fused_matmul(node: onnx.NodeProto, rewrite: _Rewrite) -> list[onnx.NodeProto] | None:
    if any(_attribute(node, a, 0) for a in _MATMUL_TRANSPOSES):
        return None
    return _as("MatMul", 0, 1)(node, rewrite)


# FusedMatMul's attributes that move its operands' axes (MatMul has none).
_MATMUL_TRANSPOSES = ("transA", "transB", "transBatchA", "transBatchB")


def _reorder_input(node: onnx.NodeProto, rewrite: _Rewrite) -> list[onnx.NodeProto]:
    """NCHW (or NHWC, `channels_last`) to NCHWc. ONNX Runtime pads the channels to the block size, which the
    graph does not record, so the count is kept: no estimate depends on it. The tensor feeds only NCHWc Convs,
    counted from their padded weights (ONNX's Conv takes its output channels from them too), and NCHWc pools,
    which ONNX Runtime reorders only at block-aligned channel counts."""
    if _attribute(node, "channels_last", 0):
        return [helper.make_node("Transpose", node.input[:1], node.output[:1], perm=[0, 3, 1, 2])]
    return [helper.make_node("Identity", node.input[:1], node.output[:1])]


def _reorder_output(node: onnx.NodeProto, rewrite: _Rewrite) -> list[onnx.NodeProto] | None:
    """NCHWc back to NCHW (or NHWC, `channels_last`): the first `channels` channels, the padding dropped."""
    channels = _attribute(node, "channels", 0)
    if channels <= 0:
        return None
    channels_last = _attribute(node, "channels_last", 0)
    sliced = rewrite.name("sliced") if channels_last else node.output[0]
    if rewrite.opset >= 10:
        bounds = [rewrite.constant(n, [v], np.int64) for n, v in (("starts", 0), ("ends", channels), ("axes", 1))]
        nodes = [helper.make_node("Slice", [node.input[0], *bounds], [sliced])]
    else:
        nodes = [helper.make_node("Slice", node.input[:1], [sliced], starts=[0], ends=[channels], axes=[1])]
    if channels_last:
        nodes.append(helper.make_node("Transpose", [sliced], node.output[:1], perm=[0, 2, 3, 1]))
    return nodes


def _nchwc_upsample(node: onnx.NodeProto, rewrite: _Rewrite) -> list[onnx.NodeProto] | None:
    """Integer `scales` per axis, nearest: ONNX's Resize (Upsample before opset 10)."""
    scales = rewrite.constant("scales", [float(s) for s in _attribute(node, "scales", [])], np.float32)
    if rewrite.opset >= 11:
        return [helper.make_node("Resize", [node.input[0], "", scales], node.output[:1], mode="nearest")]
    if rewrite.opset >= 9:
        op_type = "Resize" if rewrite.opset == 10 else "Upsample"
        return [helper.make_node(op_type, [node.input[0], scales], node.output[:1], mode="nearest")]
    return None


def _qlinear_concat(node: onnx.NodeProto, rewrite: _Rewrite) -> list[onnx.NodeProto]:
    """Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per tensor."""
    return [rewrite.node("Concat", node.input[2::3], node.output[:1], node)]


_MS, _NCHWC = "com.microsoft", "com.microsoft.nchwc"
# Shape-preserving com.microsoft ops, as Identity.
_MS_ELEMENTWISE = "QLinearSigmoid QLinearLeakyRelu QLinearSoftmax QuickGelu Gelu FastGelu BiasGelu"

_STANDARD_FORMS: dict[tuple[str, str], Form] = {
    (_MS, "FusedConv"): _as("Conv", 0, 1, 2),
    (_MS, "FusedGemm"): _as("Gemm", 0, 1, 2),
    (_MS, "FusedMatMul"): _fused_matmul,
    (_MS, "DynamicQuantizeMatMul"): _as("MatMul", 0, 1),
    (_MS, "MatMulIntegerToFloat"): _as("MatMul", 0, 1, like=[2]),  # float, as a_scale
    (_MS, "QGemm"): _as("Gemm", 0, 3, 6, like=[8, 1]),  # quantized as y_zero_point, else float as a_scale
    (_MS, "QLinearConv"): _nhwc(_as("Conv", 0, 3)),
    (_MS, "NhwcMaxPool"): _nhwc(_as("MaxPool", 0), always=True),
    (_MS, "QLinearAveragePool"): _nhwc(_as("AveragePool", 0)),
    (_MS, "QLinearGlobalAveragePool"): _nhwc(_as("GlobalAveragePool", 0)),
    (_MS, "QLinearAdd"): _as("Add", 0, 3),
    (_MS, "QLinearMul"): _as("Mul", 0, 3),
    (_MS, "QLinearWhere"): _as("Where", 0, 1, 4),
    (_MS, "QLinearConcat"): _qlinear_concat,
    **{(_MS, op): _as("Identity", 0) for op in _MS_ELEMENTWISE.split()},
    (_MS, "QuantizeLinear"): _as("Identity", 0, like=[2]),  # as y_zero_point
    (_MS, "DequantizeLinear"): _as("Identity", 0, like=[1]),  # as x_scale
    (_NCHWC, "Conv"): _as("Conv", 0, 1, 2),
    **{(_NCHWC, op): _as(op, 0) for op in ("MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool")},
    (_NCHWC, "ReorderInput"): _reorder_input,
    (_NCHWC, "ReorderOutput"): _reorder_output,
    (_NCHWC, "Upsample"): _nchwc_upsample,
}


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


def _conv(weight: int, bias: int | None, transposed: bool = False, summand: int | None = None) -> Rule:
    """2 * output elements (input elements when transposed) * prod(weight dims after the first) + output
    elements for the bias, and again for the tensor a fused Conv adds to its output (`summand`). The weight's
    dims after the first are Cin/group * kernel, or Cout/group * kernel for ConvTranspose: each input element
    meets them once."""

    def rule(node: onnx.NodeProto, shapes: Shapes) -> int | None:
        x, w, y = _input(node, shapes, 0), _input(node, shapes, weight), _output(node, shapes)
        if x is None or w is None or y is None:
            return None
        flops = 2 * math.prod(x if transposed else y) * math.prod(w[1:])
        for added in (bias, summand):
            if added is not None and _has_input(node, added):
                flops += math.prod(y)
        return flops

    return rule


def _gemm(a_index: int, b_index: int, c_index: int) -> Rule:
    def rule(node: onnx.NodeProto, shapes: Shapes) -> int | None:
        a, b = _input(node, shapes, a_index), _input(node, shapes, b_index)
        if a is None or b is None or len(a) != 2 or len(b) != 2:
            return None
        m, k = reversed(a) if _attribute(node, "transA", 0) else a
        n = b[0] if _attribute(node, "transB", 0) else b[1]
        return 2 * m * n * k + (m * n if _has_input(node, c_index) else 0)

    return rule


def _matmul(a_index: int, b_index: int, bias: int | None = None) -> Rule:
    """2 * batch * M * N * K with numpy's rules: 1-D operands gain a unit dim, batch dims broadcast; plus
    batch * M * N for a `bias` (ONNX Runtime's DynamicQuantizeMatMul and MatMulIntegerToFloat add one)."""

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
        added = 1 if bias is not None and _has_input(node, bias) else 0
        return (2 * a[-1] + added) * math.prod(batch) * a[-2] * b[-1]

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


def _quick_gelu(node: onnx.NodeProto, shapes: Shapes) -> int | None:
    y = _output(node, shapes)
    per = 2 if _attribute(node, "alpha", 1.702) == 1.0 else 3
    return None if y is None else per * math.prod(y)


def _resize(node: onnx.NodeProto, shapes: Shapes) -> int | None:
    """Resize and Upsample: nearest picks an input (0); linear and cubic weigh 2 or 4 inputs per resized axis,
    2 * taps - 1 per output element (a multiply per tap, the adds between them)."""
    x, y = _input(node, shapes, 0), _output(node, shapes)
    mode = _attribute(node, "mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode == "nearest":
        return 0
    taps = {"linear": 2, "bilinear": 2, "cubic": 4}.get(mode)
    if x is None or y is None or len(x) != len(y) or taps is None:
        return None
    resized = sum(1 for before, after in zip(x, y, strict=True) if before != after)
    return (2 * taps**resized - 1) * math.prod(y) if resized else 0


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

# ONNX Runtime's quantized contrib ops that count as a float op: per output element, or nothing (QLinearConcat).
_MS_PER_OUTPUT_ELEMENT = {
    0: "QLinearConcat",
    1: "QLinearAdd QLinearMul QLinearSigmoid QLinearLeakyRelu QLinearWhere",
    2: "QuantizeLinear DequantizeLinear",  # the contrib forms (16-bit, 4-bit) count as ONNX's
    5: "QLinearSoftmax",
    6: "BiasGelu",  # the bias add, then Gelu
}

_RULES: dict[tuple[str, str], Rule] = {
    **{("", op): _per_output_element(per) for per, ops in _PER_OUTPUT_ELEMENT.items() for op in ops.split()},
    **{("", op): _per_input_element(per) for per, ops in _PER_INPUT_ELEMENT.items() for op in ops.split()},
    **{("", op): _zero for op in _DATA_MOVEMENT.split()},
    **{(_MS, op): _per_output_element(per) for per, ops in _MS_PER_OUTPUT_ELEMENT.items() for op in ops.split()},
    ("", "Conv"): _conv(1, 2),
    (_MS, "FusedConv"): _conv(1, 2, summand=3),
    (_NCHWC, "Conv"): _conv(1, 2, summand=3),
    ("", "ConvInteger"): _conv(1, None),
    ("", "QLinearConv"): _conv(3, 8),
    (_MS, "QLinearConv"): _conv(3, 8),
    ("", "ConvTranspose"): _conv(1, 2, transposed=True),
    ("", "Gemm"): _gemm(0, 1, 2),
    (_MS, "FusedGemm"): _gemm(0, 1, 2),
    (_MS, "QGemm"): _gemm(0, 3, 6),
    ("", "MatMul"): _matmul(0, 1),
    (_MS, "FusedMatMul"): _matmul(0, 1),
    ("", "MatMulInteger"): _matmul(0, 1),
    ("", "QLinearMatMul"): _matmul(0, 3),
    (_MS, "DynamicQuantizeMatMul"): _matmul(0, 1, bias=4),
    (_MS, "MatMulIntegerToFloat"): _matmul(0, 1, bias=6),
    ("", "Sum"): _variadic(0),
    ("", "Max"): _variadic(0),
    ("", "Min"): _variadic(0),
    ("", "Mean"): _variadic(1),
    ("", "MaxPool"): _pool,
    ("", "AveragePool"): _pool,
    ("", "LpPool"): _pool,
    (_NCHWC, "MaxPool"): _pool,
    (_NCHWC, "AveragePool"): _pool,
    (_MS, "NhwcMaxPool"): _pool,
    (_MS, "QLinearAveragePool"): _pool,
    (_NCHWC, "GlobalAveragePool"): _per_input_element(1),
    (_NCHWC, "GlobalMaxPool"): _per_input_element(1),
    (_MS, "QLinearGlobalAveragePool"): _per_input_element(1),
    (_NCHWC, "ReorderInput"): _zero,
    (_NCHWC, "ReorderOutput"): _zero,
    ("", "Resize"): _resize,
    ("", "Upsample"): _resize,
    (_NCHWC, "Upsample"): _resize,
    ("", "LayerNormalization"): _layer_normalization,
    ("", "Gelu"): _gelu,
    (_MS, "Gelu"): _gelu,
    (_MS, "FastGelu"): _per_output_element(9),
    (_MS, "QuickGelu"): _quick_gelu,
    ("ai.onnx.ml", "LinearClassifier"): _linear_ml,
    ("ai.onnx.ml", "LinearRegressor"): _linear_ml,
}
