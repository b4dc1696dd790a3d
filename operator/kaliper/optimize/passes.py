"""The optimization passes: each reads one model file and writes another (conversion to ONNX, ONNX Runtime's
transformer fusions, ONNX Runtime graph optimization, 8-bit quantization, float16), and the session settings a
candidate is measured with.

Every error says which field of the ModelOptimization spec it is about and what to change there.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
import onnxruntime as ort

from kaliper.api.common import TensorSpec
from kaliper.api.modeloptimization import QuantizationPass, TransformersOptimizationPass
from kaliper.serving.model import GPU_PROVIDERS


class PassError(Exception):
    """A pass could not be applied to this model; the message names the spec field and the fix."""


class ModelLoadError(Exception):
    """A model file that does not load: not the format it claims, or rejected by ONNX or ONNX Runtime."""


# --- conversion --------------------------------------------------------------------------------------

# TensorSpec datatypes skl2onnx has input types for (its converters take these; FP16 and the small integer
# types have no scikit-learn meaning).
_SKL2ONNX_TYPES = {
    "FP32": "FloatTensorType",
    "FP64": "DoubleTensorType",
    "INT64": "Int64TensorType",
    "INT32": "Int32TensorType",
    "BOOL": "BooleanTensorType",
    "BYTES": "StringTensorType",
}


def convert_sklearn(source: Path, inputs: list[TensorSpec], target_opset: int, out: Path) -> Path:
    """A scikit-learn estimator saved with joblib or pickle, converted to ONNX with skl2onnx.

    Classifiers get plain tensor outputs (label, probabilities) instead of skl2onnx's default ZipMap (a list of
    dicts), so every output can be read as an array. Loading unpickles the file, which runs code from it: only
    convert models you trust.
    """
    import joblib
    from skl2onnx import convert_sklearn as skl2onnx_convert
    from skl2onnx.common import data_types
    from sklearn.base import BaseEstimator, is_classifier
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        estimator = joblib.load(source)
    except Exception as exc:  # unpickling fails in many ways: wrong format, missing module, truncated file
        raise ModelLoadError(
            f"{source.name} does not load as a joblib or pickle file ({type(exc).__name__}: {_first_line(exc)}); "
            "save the estimator with joblib.dump(model, path)"
        ) from exc
    if not isinstance(estimator, BaseEstimator):
        raise ModelLoadError(
            f"{source.name} holds a {type(estimator).__module__}.{type(estimator).__qualname__}, not a scikit-learn "
            "estimator; framework sklearn needs a fitted estimator saved with joblib.dump(model, path)"
        )
    try:
        check_is_fitted(estimator)
    except NotFittedError as exc:
        raise ModelLoadError(f"{source.name} holds an estimator that was never fitted; fit it before saving") from exc
    initial_types = []
    for i, spec in enumerate(inputs):
        type_name = _SKL2ONNX_TYPES.get(spec.datatype)
        if type_name is None:
            raise PassError(
                f"model.inputs[{i}].datatype: skl2onnx takes {', '.join(_SKL2ONNX_TYPES)} inputs, not {spec.datatype}"
            )
        shape = [None if d < 0 else d for d in spec.shape]
        initial_types.append((spec.name, getattr(data_types, type_name)(shape)))
    options = {"zipmap": False} if is_classifier(estimator) else None
    try:
        with warnings.catch_warnings():
            # skl2onnx warns when the opset is newer than it was tested with; the model is checked below.
            warnings.simplefilter("ignore", UserWarning)
            model = skl2onnx_convert(estimator, initial_types=initial_types, options=options, target_opset=target_opset)
    except Exception as exc:  # MissingShapeCalculator, RuntimeError, ValueError: skl2onnx has no common base
        raise PassError(
            f"passes.conversion: skl2onnx cannot convert {type(estimator).__name__} "
            f"({type(exc).__name__}: {_first_line(exc)}); check model.inputs, or convert the model yourself and "
            "use framework onnx"
        ) from exc
    _merge_opsets(model)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return out


def convert_pytorch(source: Path, inputs: list[TensorSpec], target_opset: int, out: Path) -> Path:
    """A PyTorch model (a whole module saved with torch.save, or TorchScript) exported to ONNX with a dynamic
    batch axis. torch is optional: it is imported here only."""
    try:
        import torch
    except ImportError as exc:
        raise PassError(
            "passes.conversion: converting a PyTorch model needs torch; install kaliper with the pytorch extra "
            "(pip install 'kaliper[pytorch]'), or export the model to ONNX yourself and use framework onnx"
        ) from exc
    from kaliper.serving.protocol import DTYPES

    try:
        module = torch.jit.load(str(source), map_location="cpu")
    except Exception:  # not TorchScript: try a pickled module
        try:
            module = torch.load(str(source), map_location="cpu", weights_only=False)
        except Exception as exc:
            raise ModelLoadError(
                f"{source.name} does not load with torch.jit.load or torch.load "
                f"({type(exc).__name__}: {_first_line(exc)})"
            ) from exc
    if not isinstance(module, torch.nn.Module):
        raise ModelLoadError(
            f"{source.name} holds a {type(module).__name__}, not a module (a state_dict holds weights only); save "
            "the whole model with torch.save(model, path) or torch.jit.save(torch.jit.script(model), path)"
        )
    module.eval()
    examples = []
    for i, spec in enumerate(inputs):
        if any(d < 0 for d in spec.shape[1:]):
            raise PassError(
                f"model.inputs[{i}].shape: only the first (batch) dimension of {spec.name} may be -1 for export; "
                f"give the others a size (it is {spec.shape})"
            )
        shape = [1 if d < 0 else d for d in spec.shape]
        examples.append(torch.from_numpy(np.zeros(shape, dtype=DTYPES[spec.datatype])))
    names = [spec.name for spec in inputs]
    _export(torch, module, tuple(examples), names, {name: {0: "batch"} for name in names}, target_opset, out)
    return out


def convert_huggingface(source: Path, inputs: list[TensorSpec], target_opset: int, out: Path) -> Path:
    """A Hugging Face model folder (config.json and weights, as save_pretrained writes it) loaded offline with
    the class its config names (BertForSequenceClassification...) and exported to ONNX. Inputs are taken by
    name in model.inputs' order; their -1 dimensions become dynamic axes. torch and transformers are optional:
    imported here only."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise PassError(
            "passes.conversion: converting a Hugging Face model needs torch and transformers; install kaliper with "
            "the pytorch extra (pip install 'kaliper[pytorch]'), or export the model to ONNX yourself and use "
            "framework onnx"
        ) from exc
    from kaliper.serving.protocol import DTYPES

    if not (source / "config.json").is_file():
        raise ModelLoadError(
            f"{source} is not a Hugging Face model folder (no config.json); give the folder save_pretrained wrote"
        )
    try:
        config = transformers.AutoConfig.from_pretrained(str(source), local_files_only=True)
        architecture = (config.architectures or [""])[0]
        model_class = getattr(transformers, architecture, None)
        if model_class is None:
            raise ModelLoadError(
                f"{source.name}/config.json names architecture {architecture or '(none)'}, which this transformers "
                f"{transformers.__version__} does not have; use the transformers version the model was saved with"
            )
        # Eager attention exports as the MatMul-Softmax-MatMul pattern that ONNX Runtime fuses into Attention;
        # the default (SDPA) exports a masked form that no fusion recognises.
        module = model_class.from_pretrained(str(source), local_files_only=True, attn_implementation="eager")
    except ModelLoadError:
        raise
    except Exception as exc:  # missing weights, a config transformers cannot read...
        raise ModelLoadError(
            f"{source.name} does not load with transformers ({type(exc).__name__}: {_first_line(exc)})"
        ) from exc
    module.eval()
    module.config.return_dict = False  # tuples, which the exporter flattens into outputs
    examples = tuple(
        torch.from_numpy(
            np.zeros(
                [(1 if j == 0 else 16) if d < 0 else d for j, d in enumerate(spec.shape)], dtype=DTYPES[spec.datatype]
            )
        )
        for spec in inputs
    )
    dynamic = {
        spec.name: {j: ("batch" if j == 0 else f"{spec.name}_{j}") for j, d in enumerate(spec.shape) if d < 0}
        for spec in inputs
    }
    _export(torch, module, examples, [spec.name for spec in inputs], dynamic, target_opset, out)
    return out


def _export(torch: Any, module: Any, examples: tuple, names: list[str], dynamic: dict, opset: int, out: Path) -> None:
    import inspect

    options: dict[str, Any] = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        # The TorchScript exporter takes TorchScript modules and needs no onnxscript; newer torch defaults to dynamo.
        options["dynamo"] = False
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with torch.no_grad():
            torch.onnx.export(
                module, examples, str(out), input_names=names, dynamic_axes=dynamic, opset_version=opset, **options
            )
    except Exception as exc:
        raise PassError(
            f"passes.conversion: torch.onnx.export failed ({type(exc).__name__}: {_first_line(exc)}); check "
            "model.inputs against what the model's forward() takes, or try another passes.conversion.targetOpset"
        ) from exc


def _merge_opsets(model: onnx.ModelProto) -> None:
    """One opset import per domain (the highest): skl2onnx 1.20 lists the default domain twice, and ONNX Runtime's
    quantizer refuses such a model ("Failed to find proper ai.onnx domain")."""
    versions: dict[str, int] = {}
    for opset in model.opset_import:
        domain = "" if opset.domain == "ai.onnx" else opset.domain
        versions[domain] = max(versions.get(domain, 0), opset.version)
    if len(versions) == len(model.opset_import):
        return
    del model.opset_import[:]
    model.opset_import.extend(onnx.helper.make_opsetid(d, v) for d, v in versions.items())


def _first_line(exc: BaseException, limit: int = 400) -> str:
    """The first line of an exception's message, cut to `limit` characters (they end up in status messages)."""
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 1] + "…"


# --- loading -----------------------------------------------------------------------------------------


def load_onnx(path: Path) -> onnx.ModelProto:
    """The model in an ONNX file, checked by onnx.checker (external data stays on disk)."""
    if not path.is_file():
        raise ModelLoadError(f"{path} does not exist or is not a file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ModelLoadError(f"{path.name} is not an ONNX model (it does not parse as one: {exc})") from exc
    try:
        # The checker takes a path so that models over protobuf's 2 GiB limit can be checked too.
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as exc:
        raise ModelLoadError(f"{path.name} is not a valid ONNX model: {_first_line(exc)}") from exc
    return model


# --- graph optimization ------------------------------------------------------------------------------

_GRAPH_LEVELS = {
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def optimize_graph(
    source: Path, level: Literal["basic", "extended", "all"], out: Path, providers: list[str] | None = None
) -> Path:
    """The graph ONNX Runtime makes of the model at this level, saved (what it would otherwise redo at every start).

    basic folds constants and removes redundant nodes (a BatchNormalization after a Conv goes into the Conv's
    weights); the result is plain ONNX and runs anywhere. extended and all fuse nodes into ONNX Runtime's own
    operators (com.microsoft FusedConv, FusedGemm...), and all also changes the layout for the CPU it runs on
    (com.microsoft.nchwc Conv with a block size for this CPU's vector width). Such a model runs only on ONNX
    Runtime, with the providers it was optimized for, and for all on a CPU like this one: optimize on the
    hardware that serves, and give `providers` as the serving session will.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = _GRAPH_LEVELS[level]
    options.optimized_model_filepath = str(out)
    # ONNX Runtime warns on every save at level all that the result is hardware specific; the docstring says so.
    options.log_severity_level = 3
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        ort.InferenceSession(str(source), options, providers=providers or ["CPUExecutionProvider"])
    except Exception as exc:  # ONNX Runtime's errors derive from Exception only
        raise PassError(f"passes.graphOptimization: ONNX Runtime could not load {source.name}: {_clean(exc)}") from exc
    return out


# --- transformer fusions ----------------------------------------------------------------------------

# FusionOptions attribute of each of TransformerFusions' fields.
_FUSION_OPTIONS = {
    "attention": "enable_attention",
    "skip_layer_norm": "enable_skip_layer_norm",
    "bias_skip_layer_norm": "enable_bias_skip_layer_norm",
    "embed_layer_norm": "enable_embed_layer_norm",
    "layer_norm": "enable_layer_norm",
    "gelu": "enable_gelu",
    "bias_gelu": "enable_bias_gelu",
    "gelu_approximation": "enable_gelu_approximation",
}


@dataclass(frozen=True)
class TransformersResult:
    path: Path
    fused_operators: dict[str, int]
    """ONNX Runtime's count of each operator it fused in (those with a count above zero)."""


def optimize_transformer(
    source: Path, options: TransformersOptimizationPass, out: Path, use_gpu: bool = False
) -> TransformersResult:
    """The model with ONNX Runtime's transformer fusions (onnxruntime.transformers.optimizer.optimize_model),
    and float16 after them when asked. A model in which none of the patterns was found is a PassError: its
    model type, heads or hidden size are not what the spec says, or the exporter wrote another pattern."""
    import logging

    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    fusion_options = FusionOptions(options.model_type)
    for name, attribute in _FUSION_OPTIONS.items():
        setattr(fusion_options, attribute, getattr(options.fusions, name))
    source, out = source.resolve(), out.resolve()
    # ONNX Runtime's symbolic shape inference leaves scratch files (sym_shape_infer_temp.onnx, *.data) in the
    # working folder: give it one of its own.
    with tempfile.TemporaryDirectory(prefix="kaliper-transformers-") as scratch, contextlib.chdir(scratch):
        # Its modules log a warning for every model whose producer is not the one they expect and for patterns
        # half found; the counts it returns say what matters, and go into the report.
        logging.disable(logging.WARNING)
        try:
            model = optimize_model(
                str(source),
                model_type=options.model_type,
                num_heads=options.num_heads,
                hidden_size=options.hidden_size,
                optimization_options=fusion_options,
                # The Python fusions only: ONNX Runtime's own graph levels are passes.graphOptimization and the
                # sessions' level (and its optimize_by_onnxruntime step imports torch).
                opt_level=0,
                use_gpu=use_gpu,
            )
            fused = {op: count for op, count in model.get_fused_operator_statistics().items() if count > 0}
            if not fused:
                raise PassError(
                    f"passes.transformersOptimization: ONNX Runtime's transformer optimizer found none of the "
                    f"{options.model_type} patterns in {source.name} (its operators: {', '.join(_op_types(source))}); "
                    "check modelType, numHeads and hiddenSize, or remove the pass for this model"
                )
            if options.float16:
                model.convert_float_to_float16(keep_io_types=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            model.save_model_to_file(str(out))
        except PassError:
            raise
        except Exception as exc:  # shape inference, a pattern half matched: the optimizer raises anything
            raise PassError(
                f"passes.transformersOptimization: ONNX Runtime's transformer optimizer failed on {source.name} "
                f"({type(exc).__name__}: {_first_line(exc)}); check modelType, or remove the pass for this model"
            ) from exc
        finally:
            logging.disable(logging.NOTSET)
    return TransformersResult(out, dict(sorted(fused.items())))


# --- quantization ------------------------------------------------------------------------------------

# Operators that only exist in quantized graphs: dynamic quantization (DynamicQuantizeLinear feeding MatMulInteger
# or ConvInteger), QDQ (QuantizeLinear/DequantizeLinear around float operators) and the QOperator forms.
_QUANTIZED_OPS = frozenset(
    {
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "ConvInteger",
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "DynamicQuantizeLSTM",
        "QAttention",
        "QGemm",
        "QEmbedLayerNormalization",
    }
)
# What ONNX Runtime's quantizer has weights to quantize in (its registries list more, following these).
_QUANTIZABLE_OPS = "MatMul, Gemm, Conv, ConvTranspose, Attention, LSTM and Gather (embeddings)"


@dataclass(frozen=True)
class QuantizationResult:
    path: Path
    quantized_nodes: int
    """Nodes of the output whose operator is a quantized one."""
    op_types_quantized: list[str] = field(default_factory=list)
    """Those operators, sorted."""


def is_quantized_op(op_type: str) -> bool:
    """Whether an operator exists only in quantized graphs."""
    return op_type in _QUANTIZED_OPS or op_type.startswith("QLinear")


def quantize(
    source: Path,
    options: QuantizationPass,
    out: Path,
    calibration: Iterable[dict[str, np.ndarray]] | None = None,
) -> QuantizationResult:
    """The model with 8-bit weights, made by ONNX Runtime's quantizer.

    dynamic: weights quantized now, activations at run time (MatMulInteger/ConvInteger). static: activations
    too, with ranges calibrated on `calibration` (up to options.calibration_samples rows), in the QDQ format.
    The model is pre-processed first (shape inference and basic optimization), as ONNX Runtime recommends,
    unless that fails. A model with nothing to quantize, or one ONNX Runtime's CPU provider cannot run, is a
    PassError.
    """
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    if options.mode == "static" and calibration is None:
        raise PassError(
            "passes.quantization: mode static calibrates on evaluator.accuracy.dataset; add it or use mode dynamic"
        )
    weight_type = QuantType.QInt8 if options.weight_type == "int8" else QuantType.QUInt8
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kaliper-quantize-") as work:
        prepared = _prepare_for_quantization(source, Path(work))
        try:
            if options.mode == "dynamic":
                quantize_dynamic(prepared, out, weight_type=weight_type, per_channel=options.per_channel)
            else:
                assert calibration is not None
                quantize_static(
                    prepared,
                    out,
                    _CalibrationReader(calibration, options.calibration_samples),
                    quant_format=QuantFormat.QDQ,
                    # Signed activations with signed weights (S8S8) is ONNX Runtime's advice for QDQ on CPUs;
                    # uint8 weights go with uint8 activations (U8U8), which every provider runs.
                    activation_type=weight_type,
                    weight_type=weight_type,
                    per_channel=options.per_channel,
                )
        except Exception as exc:  # the quantizer raises ValueError, RuntimeError and ONNX Runtime's own errors
            raise PassError(
                f"passes.quantization: ONNX Runtime could not quantize {source.name} ({type(exc).__name__}: "
                f"{_first_line(exc)}); {_quantization_fix(source)}"
            ) from exc
    quantized = [
        n.op_type for n in onnx.load(str(out), load_external_data=False).graph.node if is_quantized_op(n.op_type)
    ]
    if not quantized:
        out.unlink(missing_ok=True)
        raise PassError(
            f"passes.quantization: none of the model's operators can be quantized by ONNX Runtime (its operators: "
            f"{', '.join(_op_types(source))}; ONNX Runtime quantizes {_QUANTIZABLE_OPS}); {_quantization_fix(source)}"
        )
    try:
        # The settings candidates are measured with: at level all, QDQ pairs fuse into QLinear kernels.
        open_session(out, SessionSettings(intra_op=1, inter_op=1))
    except ModelLoadError as exc:
        out.unlink(missing_ok=True)
        raise PassError(quantized_load_failure(str(exc), options)) from exc
    return QuantizationResult(out, len(quantized), sorted(set(quantized)))


def quantized_load_failure(message: str, options: QuantizationPass) -> str:
    """What to say when a quantized model does not load on the CPU provider, from ONNX Runtime's message
    ("Could not find an implementation for ConvInteger(10) node with name '...'")."""
    match = re.search(r"implementation for (\w+)\((\d+)\) node with name '([^']*)'", message)
    if match is None:
        return (
            f"passes.quantization: the quantized model does not load on ONNX Runtime's CPU provider ({message}); "
            "try passes.quantization.mode static, or remove passes.quantization for this model"
        )
    op_type, _, node = match.groups()
    if options.mode == "dynamic" and options.weight_type == "int8":
        fix = "set passes.quantization.weightType to uint8, or mode to static"
    elif options.mode == "dynamic":
        fix = "set passes.quantization.mode to static"
    else:
        fix = "remove passes.quantization for this model"
    return (
        f"passes.quantization: ONNX Runtime's CPU provider has no kernel for {op_type} with these types (node "
        f"'{node}', weightType {options.weight_type}, mode {options.mode}); {fix}"
    )


class _CalibrationReader:
    """ONNX Runtime's CalibrationDataReader protocol over feeds, stopping after `rows` rows."""

    def __init__(self, feeds: Iterable[dict[str, np.ndarray]], rows: int) -> None:
        self._feeds = first_rows(feeds, rows)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


def first_rows(feeds: Iterable[dict[str, np.ndarray]], rows: int) -> Iterator[dict[str, np.ndarray]]:
    """The feeds up to `rows` rows in all, the last one cut short if needed."""
    left = rows
    if left <= 0:
        return
    for feed in feeds:
        # Rows lie along the first axis; inputs without one count as one row.
        size = min((len(v) for v in feed.values() if np.ndim(v) > 0), default=1)
        if size > left:
            feed = {k: v[:left] if np.ndim(v) > 0 else v for k, v in feed.items()}
            size = left
        yield feed
        left -= size
        if left <= 0:
            return  # before pulling another feed: the dataset may be read lazily


def _prepare_for_quantization(source: Path, work: Path) -> Path:
    from onnxruntime.quantization import quant_pre_process

    model = onnx.load(str(source), load_external_data=False)
    merged = len(model.opset_import)
    _merge_opsets(model)
    if len(model.opset_import) != merged:
        model = onnx.load(str(source))
        _merge_opsets(model)
        source = work / "merged.onnx"
        onnx.save(model, str(source))
    prepared = work / "prepared.onnx"
    # Symbolic shape inference fails on some graphs where ONNX's own succeeds: try both. It leaves scratch
    # files in the working folder, which the work folder takes.
    for skip_symbolic_shape in (False, True):
        try:
            with contextlib.chdir(work):
                quant_pre_process(str(source.resolve()), str(prepared), skip_symbolic_shape=skip_symbolic_shape)
            return prepared
        except Exception:  # pre-processing is advice, not a requirement
            continue
    # Quantize the model as it is, from a copy: the quantizer writes its shape-inferred copy beside its input,
    # and the input's folder may be read-only (a PVC mounted so in the optimizer Job).
    copy = work / "original.onnx"
    shutil.copyfile(source, copy)
    return copy
    return prepared


def _quantization_fix(source: Path) -> str:
    """What to do about a model the quantizer could not quantize: graph optimization at level extended or all
    writes ONNX Runtime's own fused operators, which the quantizer does not know."""
    fused = _runtime_op_types(source)
    if fused:
        return (
            f"the model holds ONNX Runtime's fused operators ({', '.join(fused)}), which graph optimization at level "
            "extended or all writes: quantize before graph optimization, or use passes.graphOptimization.level basic"
        )
    return "remove passes.quantization for this model"


def _runtime_op_types(path: Path) -> list[str]:
    """Operators of ONNX Runtime's own domains (com.microsoft, com.microsoft.nchwc) in the model, each once."""
    graph = onnx.load(str(path), load_external_data=False).graph
    return list(dict.fromkeys(n.op_type for n in graph.node if n.domain.startswith("com.microsoft")))


def _op_types(path: Path) -> list[str]:
    """The model's operator types, each once, in graph order."""
    graph = onnx.load(str(path), load_external_data=False).graph
    return list(dict.fromkeys(n.op_type for n in graph.node))


# --- float16 -----------------------------------------------------------------------------------------


def to_float16(source: Path, keep_io_types: bool, out: Path) -> Path:
    """The model with float16 weights and compute, by onnxruntime.transformers' converter.

    Operators without float16 kernels (the ai.onnx.ml ones such as TreeEnsembleClassifier, LinearClassifier,
    Scaler, and the converter's block list) stay float32 behind Cast nodes; a model made only of those has
    nothing to convert and is a PassError. On CPUs ONNX Runtime runs most float16 operators by casting back to
    float32 around them, so the pass pays off on GPUs.
    """
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    model = onnx.load(str(source))
    nchwc = list(dict.fromkeys(n.op_type for n in model.graph.node if n.domain == "com.microsoft.nchwc"))
    if nchwc:
        # These are float32 CPU kernels in a blocked layout; in float16 the model no longer loads.
        raise PassError(
            f"passes.float16: the model holds ONNX Runtime's CPU-specific NCHWc operators ({', '.join(nchwc)}), which "
            "graph optimization at level all writes: convert to float16 before graph optimization, or use "
            "passes.graphOptimization.level extended"
        )
    blocked = set(DEFAULT_OP_BLOCK_LIST)
    # Cast and Identity compute nothing: a graph of only those and blocked nodes has nothing to convert.
    if all(
        n.domain == "ai.onnx.ml" or n.op_type in blocked or n.op_type in ("Cast", "Identity") for n in model.graph.node
    ):
        raise PassError(_float16_refusal([(n.domain, n.op_type) for n in model.graph.node]))
    try:
        converted = convert_float_to_float16(model, keep_io_types=keep_io_types)
    except Exception as exc:  # shape inference or an unexpected graph inside the converter
        raise PassError(
            f"passes.float16: the float16 converter failed on {source.name} ({type(exc).__name__}: "
            f"{_first_line(exc)}); remove passes.float16 for this model"
        ) from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(converted, str(out))
    return out


def _float16_refusal(nodes: list[tuple[str, str]]) -> str:
    """Why a model of (domain, op type) nodes has nothing to convert to float16."""
    ml = list(dict.fromkeys(op for domain, op in nodes if domain == "ai.onnx.ml"))
    kept = list(dict.fromkeys(op for domain, op in nodes if domain != "ai.onnx.ml" and op not in ("Cast", "Identity")))
    reasons = []
    if ml:
        verb = (
            "is an ai.onnx.ml operator, which computes" if len(ml) == 1 else "are ai.onnx.ml operators, which compute"
        )
        reasons.append(f"{', '.join(ml)} {verb} in float32 or float64 only")
    if kept:
        reasons.append(f"ONNX Runtime's float16 converter keeps {', '.join(kept)} in float32")
    return (
        f"passes.float16: no operator of this model can compute in float16 ({'; '.join(reasons) or 'it has none'}); "
        "remove passes.float16 for this model"
    )


# --- sessions ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionSettings:
    """How an ONNX Runtime session is set up: threads, execution mode, graph level, providers."""

    intra_op: int | None
    inter_op: int | None
    execution_mode: Literal["sequential", "parallel"] = "sequential"
    graph_level: Literal["disabled", "basic", "extended", "all"] = "all"
    providers: tuple[str, ...] = ("CPUExecutionProvider",)

    def options(self) -> ort.SessionOptions:
        """ONNX Runtime's SessionOptions for these settings (None leaves ONNX Runtime's default)."""
        options = ort.SessionOptions()
        if self.intra_op is not None:
            options.intra_op_num_threads = self.intra_op
        if self.inter_op is not None:
            options.inter_op_num_threads = self.inter_op
        options.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL if self.execution_mode == "parallel" else ort.ExecutionMode.ORT_SEQUENTIAL
        )
        options.graph_optimization_level = _GRAPH_LEVELS[self.graph_level]
        return options

    def describe(self) -> dict[str, str]:
        """The settings as report parameters (keys as the spec spells them; unset ones left out)."""
        described = {
            "intraOp": None if self.intra_op is None else str(self.intra_op),
            "interOp": None if self.inter_op is None else str(self.inter_op),
            "executionMode": self.execution_mode,
            "graphLevel": self.graph_level,
        }
        return {k: v for k, v in described.items() if v is not None}


def open_session(path: Path, settings: SessionSettings) -> ort.InferenceSession:
    """An ONNX Runtime session on the model. A GPU provider that did not start is an error, not a silent fall
    back to the CPU (which would measure the wrong hardware)."""
    try:
        session = ort.InferenceSession(str(path), settings.options(), providers=list(settings.providers))
    except Exception as exc:  # ONNX Runtime's errors (Fail, InvalidGraph, NotImplemented...) derive from Exception
        raise ModelLoadError(f"{path.name} does not load in ONNX Runtime: {_clean(exc)}") from exc
    wanted = [p for p in settings.providers if p in GPU_PROVIDERS]
    if wanted and not any(p in wanted for p in session.get_providers()):
        raise ModelLoadError(
            f"{path.name} was opened with {', '.join(wanted)}, but ONNX Runtime runs it on "
            f"{', '.join(session.get_providers())} (this onnxruntime has {', '.join(ort.get_available_providers())}): "
            "install onnxruntime-gpu and make the GPU visible to this process, or set target.device to cpu"
        )
    return session


def _clean(exc: BaseException) -> str:
    """ONNX Runtime's message without its status prefix ("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : ") and
    the "Load model from <path> failed:" preamble."""
    message = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", str(exc).strip())
    return re.sub(r"^Load model from .*? failed:\s*", "", message)
