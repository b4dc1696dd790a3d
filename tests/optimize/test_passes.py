"""The passes on real models: iris classifiers converted from scikit-learn, and an MLP and a conv net built with
onnx.helper, run through ONNX Runtime 1.32's optimizer, quantizer and float16 converter."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import joblib
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_iris
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression

from kaliper.api.common import TensorSpec
from kaliper.api.modeloptimization import QuantizationPass
from kaliper.optimize.passes import (
    ModelLoadError,
    PassError,
    SessionSettings,
    convert_pytorch,
    convert_sklearn,
    first_rows,
    load_onnx,
    open_session,
    optimize_graph,
    quantize,
    quantized_load_failure,
    to_float16,
)
from tests.support.cpu import NCHWC_BLOCK

IRIS_INPUTS = [TensorSpec(name="float_input", shape=[-1, 4])]
CPU = SessionSettings(intra_op=1, inter_op=1)


def _iris() -> tuple[np.ndarray, np.ndarray]:
    x, y = load_iris(return_X_y=True)
    return x, y


def _sklearn_file(tmp_path: Path, estimator: object, name: str = "model.joblib") -> Path:
    x, y = _iris()
    estimator.fit(x, y)  # type: ignore[attr-defined]
    path = tmp_path / name
    joblib.dump(estimator, path)
    return path


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _weights(rng: np.random.Generator, name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name)


def mlp_model(path: Path) -> Path:
    """x[N,4] -> MatMul 4x16 -> Add -> Relu -> Gemm 16x3 -> y[N,3]."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="matmul"),
        helper.make_node("Add", ["h", "B1"], ["hb"], name="add"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "W2", "B2"], ["y"], name="gemm"),
    ]
    weights = [_weights(rng, "W1", 4, 16), _weights(rng, "B1", 16), _weights(rng, "W2", 16, 3), _weights(rng, "B2", 3)]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        weights,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def conv_model(path: Path) -> Path:
    """x[N,3,8,8] -> Conv 8x3x3x3 pad 1 -> BatchNormalization -> Relu -> y[N,8,8,8]."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["y"], name="relu"),
    ]
    weights = [
        _weights(rng, "W", 8, 3, 3, 3),
        _weights(rng, "B", 8),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, size=8).astype(np.float32), "scale"),
        _weights(rng, "shift", 8),
        _weights(rng, "mean", 8),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, size=8).astype(np.float32), "var"),
    ]
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 8, 8])],
        weights,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _ops(path: Path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def _run(path: Path, feed: dict[str, np.ndarray]) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)[0]


# --- conversion ----------------------------------------------------------------------------------------------------


def test_logistic_regression_converts_and_predicts_like_sklearn(tmp_path: Path) -> None:
    source = _sklearn_file(tmp_path, LogisticRegression(max_iter=500))
    out = convert_sklearn(source, IRIS_INPUTS, 17, tmp_path / "lr.onnx")
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    # No ZipMap: both outputs are plain tensors.
    assert [(o.name, o.type) for o in session.get_outputs()] == [
        ("label", "tensor(int64)"),
        ("probabilities", "tensor(float)"),
    ]
    # skl2onnx lists the default domain twice; the converted model has one import per domain.
    assert [(o.domain, o.version) for o in onnx.load(str(out)).opset_import] == [("ai.onnx.ml", 1), ("", 17)]
    x, y = _iris()
    labels, probabilities = session.run(None, {"float_input": x.astype(np.float32)})
    assert int((labels == joblib.load(source).predict(x)).sum()) == 150
    assert int((labels == y).sum()) == 146
    assert probabilities.shape == (150, 3)


def test_random_forest_converts_and_predicts_like_sklearn(tmp_path: Path) -> None:
    source = _sklearn_file(tmp_path, RandomForestClassifier(n_estimators=10, random_state=0))
    out = convert_sklearn(source, IRIS_INPUTS, 15, tmp_path / "rf.onnx")
    assert _ops(out) == ["TreeEnsembleClassifier"]
    x, _ = _iris()
    labels = _run(out, {"float_input": x.astype(np.float32)})
    assert int((labels == joblib.load(source).predict(x)).sum()) == 150


def test_regressor_converts_without_classifier_options(tmp_path: Path) -> None:
    source = _sklearn_file(tmp_path, LinearRegression())
    out = convert_sklearn(
        source, [TensorSpec(name="features", shape=[-1, 4], datatype="FP64")], 17, tmp_path / "r.onnx"
    )
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [("features", "tensor(double)", [None, 4])]
    assert [(o.name, o.type) for o in session.get_outputs()] == [("variable", "tensor(double)")]
    x, _ = _iris()
    values = session.run(None, {"features": x[:2]})[0].ravel()
    assert np.round(values, 4).tolist() == [-0.0825, -0.0401]


def test_convert_refuses_what_is_not_an_estimator(tmp_path: Path) -> None:
    joblib.dump({"weights": [1, 2]}, tmp_path / "dict.joblib")
    with pytest.raises(ModelLoadError) as error:
        convert_sklearn(tmp_path / "dict.joblib", IRIS_INPUTS, 17, tmp_path / "out.onnx")
    assert str(error.value) == (
        "dict.joblib holds a builtins.dict, not a scikit-learn estimator; framework sklearn needs a fitted "
        "estimator saved with joblib.dump(model, path)"
    )


def test_convert_refuses_a_file_that_is_no_pickle(tmp_path: Path) -> None:
    (tmp_path / "text.joblib").write_text("not a pickle\n")
    with pytest.raises(ModelLoadError, match=r"^text\.joblib does not load as a joblib or pickle file \("):
        convert_sklearn(tmp_path / "text.joblib", IRIS_INPUTS, 17, tmp_path / "out.onnx")


def test_convert_refuses_an_unfitted_estimator(tmp_path: Path) -> None:
    joblib.dump(LogisticRegression(), tmp_path / "unfitted.joblib")
    with pytest.raises(ModelLoadError) as error:
        convert_sklearn(tmp_path / "unfitted.joblib", IRIS_INPUTS, 17, tmp_path / "out.onnx")
    assert str(error.value) == "unfitted.joblib holds an estimator that was never fitted; fit it before saving"


def test_convert_names_a_datatype_skl2onnx_lacks(tmp_path: Path) -> None:
    source = _sklearn_file(tmp_path, LogisticRegression(max_iter=500))
    with pytest.raises(PassError) as error:
        convert_sklearn(source, [TensorSpec(name="x", shape=[-1, 4], datatype="INT8")], 17, tmp_path / "out.onnx")
    assert str(error.value) == (
        "model.inputs[0].datatype: skl2onnx takes FP32, FP64, INT64, INT32, BOOL, BYTES inputs, not INT8"
    )


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_pytorch_conversion_without_torch_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(PassError) as error:
        convert_pytorch(tmp_path / "model.pt", IRIS_INPUTS, 17, tmp_path / "out.onnx")
    assert str(error.value) == (
        "passes.conversion: converting a PyTorch model needs torch; install kaliper with the pytorch extra "
        "(pip install 'kaliper[pytorch]'), or export the model to ONNX yourself and use framework onnx"
    )


# --- loading -------------------------------------------------------------------------------------------------------


def test_load_onnx_returns_a_checked_model(tmp_path: Path) -> None:
    model = load_onnx(mlp_model(tmp_path / "mlp.onnx"))
    assert [n.name for n in model.graph.node] == ["matmul", "add", "relu", "gemm"]


def test_load_onnx_refuses_text(tmp_path: Path) -> None:
    (tmp_path / "notes.onnx").write_text("hello, not a model\n")
    with pytest.raises(ModelLoadError) as error:
        load_onnx(tmp_path / "notes.onnx")
    assert str(error.value) == (
        "notes.onnx is not an ONNX model (it does not parse as one: Error parsing message with type 'onnx.ModelProto')"
    )


def test_load_onnx_refuses_an_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(ModelLoadError) as error:
        load_onnx(tmp_path / "empty.onnx")
    assert (
        str(error.value) == "empty.onnx is not a valid ONNX model: The model does not have an ir_version set properly."
    )


def test_load_onnx_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as error:
        load_onnx(tmp_path / "absent.onnx")
    assert str(error.value) == f"{tmp_path / 'absent.onnx'} does not exist or is not a file"


# --- graph optimization --------------------------------------------------------------------------------------------


def test_basic_level_folds_the_batch_norm_into_the_conv(tmp_path: Path) -> None:
    out = optimize_graph(conv_model(tmp_path / "conv.onnx"), "basic", tmp_path / "basic.onnx")
    assert _ops(out) == ["Conv", "Relu"]


def test_extended_level_fuses_conv_and_relu(tmp_path: Path) -> None:
    source = conv_model(tmp_path / "conv.onnx")
    out = optimize_graph(source, "extended", tmp_path / "extended.onnx")
    assert [(n.op_type, n.domain) for n in onnx.load(str(out)).graph.node] == [("FusedConv", "com.microsoft")]
    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    assert np.allclose(_run(out, {"x": x}), _run(source, {"x": x}), atol=1e-4)


def test_all_level_saves_a_fused_model_for_this_cpu(tmp_path: Path) -> None:
    source = conv_model(tmp_path / "conv.onnx")
    out = optimize_graph(source, "all", tmp_path / "all.onnx")
    # On x86-64, level all rewrites the Conv into ONNX Runtime's blocked NCHWc layout (its 3 input channels
    # are read as they are, so no ReorderInput, in blocks of 8 or 16 alike); without NCHWc kernels (ARM) it
    # stays the extended level's FusedConv. Either way the BatchNormalization and Relu are gone.
    expected = {
        8: [("Conv", "com.microsoft.nchwc"), ("ReorderOutput", "com.microsoft.nchwc")],
        16: [("Conv", "com.microsoft.nchwc"), ("ReorderOutput", "com.microsoft.nchwc")],
        None: [("FusedConv", "com.microsoft")],
    }[NCHWC_BLOCK]
    assert [(n.op_type, n.domain) for n in onnx.load(str(out)).graph.node] == expected
    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    assert np.allclose(_run(out, {"x": x}), _run(source, {"x": x}), atol=1e-4)


def test_graph_optimization_names_a_model_that_does_not_load(tmp_path: Path) -> None:
    (tmp_path / "bad.onnx").write_text("nothing")
    with pytest.raises(PassError) as error:
        optimize_graph(tmp_path / "bad.onnx", "all", tmp_path / "out.onnx")
    assert str(error.value) == (
        "passes.graphOptimization: ONNX Runtime could not load bad.onnx: Protobuf parsing failed."
    )


# --- quantization --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("weight_type", "stored"), [("int8", TensorProto.INT8), ("uint8", TensorProto.UINT8)])
def test_dynamic_quantization_of_the_mlp(tmp_path: Path, weight_type: str, stored: int) -> None:
    source = mlp_model(tmp_path / "mlp.onnx")
    result = quantize(source, QuantizationPass(mode="dynamic", weight_type=weight_type), tmp_path / "q.onnx")
    assert result.path == tmp_path / "q.onnx"
    assert result.op_types_quantized == ["DynamicQuantizeLinear", "MatMulInteger"]
    assert result.quantized_nodes == 4  # one DynamicQuantizeLinear and one MatMulInteger per weight matrix
    weights = {
        i.name: i.data_type for i in onnx.load(str(result.path)).graph.initializer if i.name.endswith("_quantized")
    }
    assert sorted(weights.values()) == [stored, stored]
    x = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    assert np.allclose(_run(result.path, {"x": x}), _run(source, {"x": x}), atol=0.3)


@pytest.mark.parametrize("weight_type", ["int8", "uint8"])
def test_dynamic_quantization_of_a_conv_runs_on_the_cpu(tmp_path: Path, weight_type: str) -> None:
    # ONNX Runtime 1.32's CPU provider has ConvInteger kernels for int8 and uint8 weights alike.
    source = conv_model(tmp_path / "conv.onnx")
    result = quantize(source, QuantizationPass(weight_type=weight_type, per_channel=True), tmp_path / "q.onnx")
    assert result.op_types_quantized == ["ConvInteger", "DynamicQuantizeLinear"]
    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    assert _run(result.path, {"x": x}).shape == (2, 8, 8, 8)


def test_quantizing_a_random_forest_names_its_operators(tmp_path: Path) -> None:
    source = _sklearn_file(tmp_path, RandomForestClassifier(n_estimators=5, random_state=0))
    onnx_file = convert_sklearn(source, IRIS_INPUTS, 17, tmp_path / "rf.onnx")
    with pytest.raises(PassError) as error:
        quantize(onnx_file, QuantizationPass(), tmp_path / "q.onnx")
    assert str(error.value) == (
        "passes.quantization: none of the model's operators can be quantized by ONNX Runtime (its operators: "
        "TreeEnsembleClassifier; ONNX Runtime quantizes MatMul, Gemm, Conv, ConvTranspose, Attention, LSTM and "
        "Gather (embeddings)); remove passes.quantization for this model"
    )
    assert not (tmp_path / "q.onnx").exists()


def test_quantizing_after_graph_fusion_says_to_quantize_first(tmp_path: Path) -> None:
    fused = optimize_graph(conv_model(tmp_path / "conv.onnx"), "extended", tmp_path / "extended.onnx")
    with pytest.raises(PassError) as error:
        quantize(fused, QuantizationPass(), tmp_path / "q.onnx")
    assert str(error.value) == (
        "passes.quantization: none of the model's operators can be quantized by ONNX Runtime (its operators: "
        "FusedConv; ONNX Runtime quantizes MatMul, Gemm, Conv, ConvTranspose, Attention, LSTM and Gather "
        "(embeddings)); the model holds ONNX Runtime's fused operators (FusedConv), which graph optimization at "
        "level extended or all writes: quantize before graph optimization, or use passes.graphOptimization.level basic"
    )


def test_static_quantization_calibrates_on_the_feeds(tmp_path: Path) -> None:
    source = mlp_model(tmp_path / "mlp.onnx")
    rng = np.random.default_rng(2)
    calibration = [{"x": rng.normal(size=(8, 4)).astype(np.float32)} for _ in range(4)]
    options = QuantizationPass(mode="static", calibration_samples=20)
    result = quantize(source, options, tmp_path / "s.onnx", calibration)
    assert result.op_types_quantized == ["DequantizeLinear", "QuantizeLinear"]
    # Pre-processing fused MatMul and Add into a Gemm: QDQ pairs around the two Gemms and the activations.
    assert _ops(result.path).count("Gemm") == 2
    assert result.quantized_nodes == 10
    x = rng.normal(size=(5, 4)).astype(np.float32)
    assert np.allclose(_run(result.path, {"x": x}), _run(source, {"x": x}), atol=0.5)


def test_calibration_stops_after_the_rows_asked_for() -> None:
    feeds = iter([{"x": np.arange(8).reshape(4, 2)}, {"x": np.arange(8, 16).reshape(4, 2)}, {"x": np.zeros((4, 2))}])
    taken = list(first_rows(feeds, 6))
    assert [f["x"].tolist() for f in taken] == [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8, 9], [10, 11]]]
    assert next(feeds)["x"].shape == (4, 2)  # the third feed was not pulled


def test_static_quantization_needs_calibration_data(tmp_path: Path) -> None:
    with pytest.raises(PassError) as error:
        quantize(mlp_model(tmp_path / "mlp.onnx"), QuantizationPass(mode="static"), tmp_path / "s.onnx")
    assert str(error.value) == (
        "passes.quantization: mode static calibrates on evaluator.accuracy.dataset; add it or use mode dynamic"
    )


def test_a_missing_kernel_is_explained_with_the_fix() -> None:
    message = (
        "q.onnx does not load in ONNX Runtime: Could not find an implementation for ConvInteger(10) node with name "
        "'conv_quant'"
    )
    assert quantized_load_failure(message, QuantizationPass()) == (
        "passes.quantization: ONNX Runtime's CPU provider has no kernel for ConvInteger with these types (node "
        "'conv_quant', weightType int8, mode dynamic); set passes.quantization.weightType to uint8, or mode to static"
    )
    assert quantized_load_failure(message, QuantizationPass(weight_type="uint8")).endswith(
        "(node 'conv_quant', weightType uint8, mode dynamic); set passes.quantization.mode to static"
    )
    assert quantized_load_failure("Protobuf parsing failed.", QuantizationPass(mode="static")) == (
        "passes.quantization: the quantized model does not load on ONNX Runtime's CPU provider (Protobuf parsing "
        "failed.); try passes.quantization.mode static, or remove passes.quantization for this model"
    )


# --- float16 -------------------------------------------------------------------------------------------------------


def test_float16_keeps_float32_inputs_and_outputs(tmp_path: Path) -> None:
    source = conv_model(tmp_path / "conv.onnx")
    out = to_float16(source, True, tmp_path / "fp16.onnx")
    model = onnx.load(str(out))
    assert {i.data_type for i in model.graph.initializer} == {TensorProto.FLOAT16}
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [TensorProto.FLOAT]
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [TensorProto.FLOAT]
    assert [n.op_type for n in model.graph.node] == ["Conv", "BatchNormalization", "Relu", "Cast", "Cast"]
    # The CPU provider runs it, casting around the operators it has no float16 kernel for.
    x = np.random.default_rng(1).normal(size=(2, 3, 8, 8)).astype(np.float32)
    assert np.allclose(_run(out, {"x": x}), _run(source, {"x": x}), atol=0.05)


def test_float16_without_keeping_io_types_takes_float16(tmp_path: Path) -> None:
    out = to_float16(mlp_model(tmp_path / "mlp.onnx"), False, tmp_path / "fp16.onnx")
    model = onnx.load(str(out))
    assert [i.type.tensor_type.elem_type for i in model.graph.input] == [TensorProto.FLOAT16]
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [TensorProto.FLOAT16]
    x = np.ones((2, 4), dtype=np.float16)
    assert _run(out, {"x": x}).dtype == np.float16


def test_float16_refuses_the_nchwc_layout(tmp_path: Path) -> None:
    blocked = optimize_graph(conv_model(tmp_path / "conv.onnx"), "all", tmp_path / "all.onnx")
    if "com.microsoft.nchwc" not in {n.domain for n in onnx.load(str(blocked)).graph.node}:
        pytest.skip("this CPU gets no NCHWc layout at level all")
    with pytest.raises(PassError) as error:
        to_float16(blocked, True, tmp_path / "fp16.onnx")
    assert str(error.value) == (
        "passes.float16: the model holds ONNX Runtime's CPU-specific NCHWc operators (Conv, ReorderOutput), which "
        "graph optimization at level all writes: convert to float16 before graph optimization, or use "
        "passes.graphOptimization.level extended"
    )


def test_float16_refuses_a_model_of_ml_operators(tmp_path: Path) -> None:
    source = _sklearn_file(tmp_path, LogisticRegression(max_iter=500))
    onnx_file = convert_sklearn(source, IRIS_INPUTS, 17, tmp_path / "lr.onnx")
    with pytest.raises(PassError) as error:
        to_float16(onnx_file, True, tmp_path / "fp16.onnx")
    assert str(error.value) == (
        "passes.float16: no operator of this model can compute in float16 (LinearClassifier, Normalizer are "
        "ai.onnx.ml operators, which compute in float32 or float64 only); remove passes.float16 for this model"
    )


def test_float16_names_a_tree_ensemble(tmp_path: Path) -> None:
    source = _sklearn_file(tmp_path, RandomForestClassifier(n_estimators=5, random_state=0))
    onnx_file = convert_sklearn(source, IRIS_INPUTS, 17, tmp_path / "rf.onnx")
    with pytest.raises(PassError) as error:
        to_float16(onnx_file, True, tmp_path / "fp16.onnx")
    assert str(error.value) == (
        "passes.float16: no operator of this model can compute in float16 (TreeEnsembleClassifier is an "
        "ai.onnx.ml operator, which computes in float32 or float64 only); remove passes.float16 for this model"
    )


# --- sessions ------------------------------------------------------------------------------------------------------


def test_session_settings_describe_and_options() -> None:
    settings = SessionSettings(intra_op=4, inter_op=2, execution_mode="parallel", graph_level="extended")
    assert settings.describe() == {
        "intraOp": "4",
        "interOp": "2",
        "executionMode": "parallel",
        "graphLevel": "extended",
    }
    options = settings.options()
    assert options.intra_op_num_threads == 4
    assert options.inter_op_num_threads == 2
    assert options.execution_mode == ort.ExecutionMode.ORT_PARALLEL
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED


def test_session_settings_leave_out_what_is_unset() -> None:
    settings = SessionSettings(intra_op=None, inter_op=None)
    assert settings.describe() == {"executionMode": "sequential", "graphLevel": "all"}
    assert settings.options().intra_op_num_threads == 0  # ONNX Runtime's default: one thread per core
    assert settings.options().execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL


def test_open_session_runs_the_model(tmp_path: Path) -> None:
    session = open_session(mlp_model(tmp_path / "mlp.onnx"), CPU)
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert [i.name for i in session.get_inputs()] == ["x"]


def test_open_session_cleans_up_a_missing_kernel_message(tmp_path: Path) -> None:
    # ONNX Runtime's CPU provider has no Relu for int16.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="the_relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT16, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.INT16, ["N"])],
    )
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "relu16.onnx")
    with pytest.raises(ModelLoadError) as error:
        open_session(path, CPU)
    assert str(error.value) == (
        "relu16.onnx does not load in ONNX Runtime: Could not find an implementation for Relu(14) node with name "
        "'the_relu'"
    )


def test_open_session_cleans_up_a_parse_failure(tmp_path: Path) -> None:
    (tmp_path / "bad.onnx").write_text("nothing")
    with pytest.raises(ModelLoadError) as error:
        open_session(tmp_path / "bad.onnx", CPU)
    assert str(error.value) == "bad.onnx does not load in ONNX Runtime: Protobuf parsing failed."


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="this onnxruntime has CUDA")
@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider' is not in available provider names")
def test_open_session_refuses_to_fall_back_to_the_cpu(tmp_path: Path) -> None:
    settings = SessionSettings(intra_op=1, inter_op=1, providers=("CUDAExecutionProvider", "CPUExecutionProvider"))
    with pytest.raises(ModelLoadError) as error:
        open_session(mlp_model(tmp_path / "mlp.onnx"), settings)
    assert str(error.value) == (
        "mlp.onnx was opened with CUDAExecutionProvider, but ONNX Runtime runs it on CPUExecutionProvider (this "
        f"onnxruntime has {', '.join(ort.get_available_providers())}): install onnxruntime-gpu and make the GPU "
        "visible to this process, or set target.device to cpu"
    )
