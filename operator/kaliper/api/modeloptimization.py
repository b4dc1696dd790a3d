"""ModelOptimization: make a model faster under an accuracy goal, report candidates and the Pareto frontier."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from kaliper.api.base import KaliperModel, Rule, at_most_one_of, only_with
from kaliper.api.common import (
    CpuQuantity,
    GpuRequest,
    Name,
    PvcReference,
    TensorSpec,
    WorkStatus,
    set_of,
)
from kaliper.api.modeldeployment import ExecutionProvider, ModelDeploymentTemplate, ModelSource
from kaliper.api.profilerun import DatasetSource, ProfileRunTemplate, TtlSpec

# --- input -------------------------------------------------------------------------------------------


# How ONNX Runtime laid out the graph it ran: NCHWc (its CPU kernels' blocked channels), NHWC (quantized
# kernels channels-last) or NCHW (ONNX's own).
GraphLayout = Literal["NCHW", "NCHWc", "NHWC"]


class OptimizationInput(KaliperModel):
    """The model to optimize."""

    source: ModelSource
    """Where the model comes from."""
    framework: Literal["onnx", "sklearn", "pytorch", "huggingface", "gguf"] = "onnx"
    """What the model is; sklearn, pytorch and huggingface need passes.conversion; gguf (a llama.cpp model) is
    quantized with passes.ggufQuantization and measured with evaluator.generation. huggingface: a folder as
    save_pretrained writes it (config.json, the weights, tokenizer.json), loaded with the class its config
    names, offline."""
    inputs: Annotated[list[TensorSpec], Field(min_length=1, max_length=16)] | None = None
    """Input tensors (names, shapes, types). Needed to convert a model and to generate latency inputs. For
    conversion, a -1 dimension is a dynamic axis of the exported model (exported with size 1 for the first
    dimension, 16 for others); for a text model give the sequence length, as in [-1, 128]."""
    outputs: Annotated[list[Annotated[str, Field(max_length=128)]], Field(max_length=16)] | None = None
    """Output names to keep. Default: all."""


# --- passes ------------------------------------------------------------------------------------------


class ConversionPass(KaliperModel):
    """Convert a scikit-learn or PyTorch model to ONNX."""

    target_opset: Annotated[int, Field(ge=7, le=23)] = 17
    """ONNX opset of the converted model."""


class GraphOptimizationPass(KaliperModel):
    """ONNX Runtime graph optimizations (constant folding, node fusion), saved as a new model."""

    level: Literal["basic", "extended", "all"] = "all"
    """ONNX Runtime graph optimization level."""


class QuantizationPass(KaliperModel):
    """Store weights (and, when static, activations) as 8-bit integers."""

    mode: Literal["dynamic", "static"] = "dynamic"
    """dynamic: activations quantized at run time; static: calibrated on evaluator.accuracy.dataset."""
    weight_type: Literal["int8", "uint8"] = "int8"
    """Integer type of the weights."""
    per_channel: bool = False
    """One scale per output channel instead of per tensor (often more accurate, a little slower)."""
    calibration_samples: Annotated[int, Field(ge=1, le=100000)] = 100
    """Rows of the dataset used for static calibration."""


class Float16Pass(KaliperModel):
    """Convert weights and compute to float16 (pays off on GPUs)."""

    keep_io_types: bool = True
    """Keep float32 inputs and outputs so clients need no change."""


ThreadCounts = set_of(Annotated[int, Field(ge=1, le=256)], 16)


class ThreadTuningPass(KaliperModel):
    """Try ONNX Runtime session settings and keep the fastest (what Olive's OrtPerfTuning does)."""

    intra_op: ThreadCounts | None = None
    """Intra-op thread counts to try. Default: 1, 2, 4 up to the CPU count."""
    inter_op: ThreadCounts | None = None
    """Inter-op thread counts to try. Default: 1."""
    execution_modes: set_of(Literal["sequential", "parallel"], 2) | None = None
    """ONNX Runtime execution modes to try. Default: sequential."""


# llama.cpp's quantization types (llama-quantize), from the largest and closest to the original to the smallest.
GgufType = Literal["F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q5_0", "Q4_K_M", "Q4_K_S", "Q4_0", "Q3_K_M", "Q2_K"]


class GgufQuantizationPass(KaliperModel):
    """llama.cpp's own quantizer (llama-quantize, built from the same source as the llamacpp runtime) on a
    GGUF model: one candidate per type."""

    types: set_of(GgufType, 11)
    """Quantization types to make, such as Q8_0 and Q4_K_M."""


# The model types of ONNX Runtime's transformer optimizer (onnxruntime.transformers.optimizer.MODEL_TYPES) whose
# fusions serve encoders and vision transformers; the generative and diffusion ones need other tooling.
TransformerModelType = Literal[
    "bert", "bert_tf", "bert_keras", "clip", "conformer", "gpt2", "gpt2_tf", "gpt_neox", "swin", "tnlr", "vit"
]


class TransformerFusions(KaliperModel):
    """Which of ONNX Runtime's transformer fusions to apply (its FusionOptions). Each replaces a subgraph with
    one of ONNX Runtime's own operators; whether that is faster depends on the CPU and the build, which the
    candidates' latencies and profiles show."""

    attention: bool = True
    """Query, key and value projections, the scaled dot product, the mask and the softmax into Attention."""
    skip_layer_norm: bool = True
    """A residual Add and the LayerNormalization after it into SkipLayerNormalization."""
    bias_skip_layer_norm: bool = True
    """The bias Add before a residual into SkipLayerNormalization too."""
    embed_layer_norm: bool = True
    """Word, position and segment embedding lookups, their sum and its LayerNormalization (and the attention
    mask) into EmbedLayerNormalization."""
    layer_norm: bool = True
    """LayerNormalization written as ReduceMean, Sub, Pow... into LayerNormalization."""
    gelu: bool = True
    """Gelu written with Erf into Gelu."""
    bias_gelu: bool = True
    """The bias Add before a Gelu into BiasGelu."""
    gelu_approximation: bool = False
    """Replace Gelu by FastGelu (tanh approximation): faster, and the outputs change slightly."""


class TransformersOptimizationPass(KaliperModel):
    """ONNX Runtime's transformer optimizer (onnxruntime.transformers, what Olive's OrtTransformersOptimization
    runs): fuses attention, layer normalization, embeddings and Gelu into ONNX Runtime's own operators."""

    model_type: TransformerModelType = "bert"
    """The architecture whose patterns to look for (bert for BERT, RoBERTa, DistilBERT and similar encoders
    exported from PyTorch)."""
    num_heads: Annotated[int, Field(ge=0, le=1024)] = 0
    """Attention heads. 0: read them from the graph (its Reshape shapes)."""
    hidden_size: Annotated[int, Field(ge=0, le=65536)] = 0
    """Hidden size. 0: read it from the graph."""
    float16: bool = False
    """Also convert the fused model to float16 (GPU targets: ONNX Runtime's CPU kernels for the fused
    operators are float32)."""
    fusions: TransformerFusions = Field(default_factory=TransformerFusions)
    """Which fusions to apply."""

    cross_field_rules = (
        Rule(
            cel="(has(self.numHeads) && self.numHeads != 0) == (has(self.hiddenSize) && self.hiddenSize != 0)",
            message="give both numHeads and hiddenSize, or neither (0: read from the graph)",
            check=lambda p: (p.num_heads == 0) == (p.hidden_size == 0),
            field_path=".numHeads",
        ),
        Rule(
            cel="!has(self.numHeads) || self.numHeads == 0 || !has(self.hiddenSize) || "
            "self.hiddenSize % self.numHeads == 0",
            message="hiddenSize must be a multiple of numHeads (each head takes hiddenSize/numHeads)",
            check=lambda p: p.num_heads == 0 or p.hidden_size % p.num_heads == 0,
            field_path=".hiddenSize",
        ),
    )


# The Passes fields that act on ONNX models (every pass but ggufQuantization).
ONNX_PASSES = (
    "conversion",
    "transformers_optimization",
    "graph_optimization",
    "quantization",
    "float16",
    "thread_tuning",
)


class Passes(KaliperModel):
    """The optimizations to apply, run in this order: conversion, transformers optimization, quantization,
    float16, graph optimization (last, so ONNX Runtime's fusions apply to the quantized operators too; its
    quantizer cannot read the fused operators of that level), thread tuning. The search tries combinations of
    the passes listed here."""

    conversion: ConversionPass | None = None
    transformers_optimization: TransformersOptimizationPass | None = None
    """Transformer models: ONNX Runtime's transformer fusions (attention, skip layer norm, embeddings, Gelu)."""
    graph_optimization: GraphOptimizationPass | None = None
    quantization: QuantizationPass | None = None
    float16: Float16Pass | None = None
    thread_tuning: ThreadTuningPass | None = None
    gguf_quantization: GgufQuantizationPass | None = None
    """GGUF models (model.framework gguf): llama.cpp's quantization types, the only pass for them."""

    cross_field_rules = (
        Rule(
            cel="[has(self.conversion), has(self.transformersOptimization), has(self.graphOptimization), "
            "has(self.quantization), has(self.float16), has(self.threadTuning), has(self.ggufQuantization)]"
            ".exists(x, x)",
            message="list at least one pass: conversion, transformersOptimization, graphOptimization, quantization, "
            "float16, threadTuning or ggufQuantization",
            check=lambda p: any(getattr(p, n) is not None for n in (*ONNX_PASSES, "gguf_quantization")),
        ),
        at_most_one_of("quantization", "float16"),
    )


# --- evaluation --------------------------------------------------------------------------------------


class TextColumns(KaliperModel):
    """Rows of text, tokenized for the model with the tokenizer that ships with it (a Hugging Face
    tokenizer.json, read with the tokenizers library; nothing is fetched from a hub)."""

    input_cols: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=128)]],
        Field(min_length=1, max_length=2, json_schema_extra={"x-kubernetes-list-type": "atomic"}),
    ]
    """The one or two text columns of each row, in order (a sentence pair is encoded as the tokenizer's
    template pairs them, such as [CLS] first [SEP] second [SEP])."""
    label_col: Annotated[str, Field(min_length=1, max_length=128)] = "label"
    """The column holding the label (a class index for models that output scores)."""
    tokenizer: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[^/]")] = "tokenizer.json"
    """The tokenizer file, relative to the model's folder (the folder that holds model.source's file, or the
    model itself when it is a folder)."""
    max_length: Annotated[int, Field(ge=1, le=65536)] | None = None
    """Tokens per row: longer rows are truncated, shorter ones padded. Default: the model's sequence length
    (its input_ids dimension, or model.inputs)."""

    cross_field_rules = (
        Rule(
            cel="!has(self.tokenizer) || !self.tokenizer.matches('(^|/)[.][.](/|$)')",
            message="tokenizer is a path inside the model's folder; remove the '..'",
            check=lambda t: ".." not in t.tokenizer.split("/"),
            field_path=".tokenizer",
        ),
    )


class AccuracyEvaluator(KaliperModel):
    """How accuracy is measured, and how much of it may be given up."""

    metric: Literal["accuracy", "f1", "mae", "mse", "rmse", "r2"] = "accuracy"
    """accuracy/f1 for classifiers (higher is better), mae/mse/rmse (lower is better) and r2 for regressors."""
    dataset: DatasetSource
    """Labelled rows, one JSON object per line: {"inputs": {...}, "label": ...}, or with text, the columns that
    text names: {"sentence1": "...", "sentence2": "...", "label": 1}."""
    text: TextColumns | None = None
    """The rows hold text to tokenize (text classification), not tensors."""
    max_degradation: Annotated[float, Field(ge=0)]
    """Largest acceptable loss against the original model, in the metric's units (0.01 = one point of
    accuracy)."""
    samples: Annotated[int, Field(ge=1, le=1000000)] | None = None
    """Rows to evaluate. Default: the whole dataset."""


class LatencyEvaluator(KaliperModel):
    """How latency is measured (in-process, on generated inputs)."""

    metric: Literal["avg", "p50", "p90", "p95", "p99"] = "avg"
    """Which latency figure decides."""
    min_improvement_percent: Annotated[float, Field(gt=-100, lt=100)] | None = None
    """A candidate must be at least this much faster than the original (20 = 20% lower latency); a negative
    value lets it be up to that much slower (-10: at most 10% higher latency), for a smaller model where speed
    may give a little."""
    batch_size: Annotated[int, Field(ge=1, le=4096)] = 1
    """Rows per inference."""
    warmup_runs: Annotated[int, Field(ge=0, le=10000)] = 10
    """Inferences run before timing."""
    runs: Annotated[int, Field(ge=1, le=1000000)] = 200
    """Timed inferences."""


class GenerationEvaluator(KaliperModel):
    """GGUF models: each candidate served by llama-server under the target's CPU limit beside the original,
    both asked the same prompts in turn (greedy, so answers are comparable): prompt-processing and generation
    speed, paired, and how many of the original's greedy output tokens the candidate reproduces."""

    dataset: DatasetSource
    """Prompts, one JSON object per line: {"prompt": "..."}."""
    prompts: Annotated[int, Field(ge=1, le=10000)] = 16
    """Prompts used (the first ones of the dataset)."""
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = 32
    """Greedy output tokens per prompt."""
    rounds: Annotated[int, Field(ge=1, le=100)] = 3
    """Times every prompt is asked of the original and the candidate, alternating (the speed figures)."""
    min_agreement: Annotated[float, Field(ge=0, le=1)] = 0.5
    """Quality goal: the share of the original's greedy output tokens the candidate reproduces before the
    two first differ, averaged over the prompts (1: identical answers)."""
    min_improvement_percent: Annotated[float, Field(gt=-100, lt=100)] | None = None
    """A candidate must generate tokens at least this much faster than the original (time per token); a
    negative value lets it be up to that much slower (-10: at most 10% more time per token), for a smaller
    model where speed may give a little. Default: faster beyond the noise of two measurements of the
    original."""
    slots: Annotated[int, Field(ge=1, le=64)] = 1
    """llama-server slots while measuring (1: one request at a time)."""


class Evaluator(KaliperModel):
    """What makes a candidate better, and what it must not lose."""

    accuracy: AccuracyEvaluator | None = None
    latency: LatencyEvaluator = Field(default_factory=LatencyEvaluator)
    generation: GenerationEvaluator | None = None
    """GGUF models: speed and greedy agreement against the original under llama-server."""


class OptimizationSearch(KaliperModel):
    """How pass combinations and options are explored."""

    strategy: Literal["exhaustive", "random", "tpe"] = "exhaustive"
    """exhaustive: every combination; random or tpe (optuna) sample up to maxCandidates."""
    max_candidates: Annotated[int, Field(ge=1, le=1000)] = 32
    """Upper bound on candidates evaluated."""
    seed: Annotated[int, Field(ge=0)] | None = None
    """Random seed for random and tpe, for repeatable searches."""


class OptimizationTarget(KaliperModel):
    """The hardware the optimized model will run on."""

    device: Literal["cpu", "gpu"] = "cpu"
    execution_providers: Annotated[list[ExecutionProvider], Field(min_length=1, max_length=6)] | None = None
    """ONNX Runtime execution providers to optimize and measure with. Default: CPUExecutionProvider, or
    CUDAExecutionProvider for gpu."""
    cpu: CpuQuantity | None = None
    """Measure latency under this CPU limit (cgroups locally, the optimizer pod's limit on Kubernetes)."""
    gpu: GpuRequest | None = None
    """GPU for the optimizer pod when device is gpu."""

    cross_field_rules = (
        only_with("gpu", "device", "gpu", message="gpu is only used when device is gpu; set device: gpu or remove gpu"),
    )


class OptimizationOutput(KaliperModel):
    """Where optimized models are stored. Set at most one of pvc or directory."""

    pvc: PvcReference | None = None
    """A folder on a PersistentVolumeClaim (Kubernetes)."""
    directory: Annotated[str, Field(min_length=1, max_length=1024)] | None = None
    """A folder on this machine (`kaliper run`). Default: ./kaliper-models/<name>."""
    keep: Annotated[int, Field(ge=1, le=32)] = 3
    """How many of the best candidates to keep as files."""

    cross_field_rules = (at_most_one_of("pvc", "directory"),)


class FollowUpDeployment(KaliperModel):
    """A ModelDeployment to create for the chosen model."""

    name: Name
    """Name of the ModelDeployment."""
    template: ModelDeploymentTemplate = Field(default_factory=ModelDeploymentTemplate)
    """Its spec, without the model (the chosen model fills it in)."""


class FollowUpProfileRun(KaliperModel):
    """A ProfileRun to create against the follow-up deployment."""

    name: Name
    """Name of the ProfileRun."""
    template: ProfileRunTemplate
    """Its spec, without the target (the follow-up deployment is the target)."""


class FollowUp(KaliperModel):
    """What to create once a model is chosen."""

    deployment: FollowUpDeployment | None = None
    profile_run: FollowUpProfileRun | None = None

    cross_field_rules = (
        only_with(
            "profile_run",
            "deployment",
            message="followUp.profileRun loads the follow-up deployment; add followUp.deployment",
        ),
    )


class ModelOptimizationSpec(KaliperModel):
    """A model, the passes to try on it, and the goals a candidate must meet."""

    model: OptimizationInput
    passes: Passes
    evaluator: Evaluator = Field(default_factory=Evaluator)
    search: OptimizationSearch = Field(default_factory=OptimizationSearch)
    target: OptimizationTarget = Field(default_factory=OptimizationTarget)
    output: OptimizationOutput = Field(default_factory=OptimizationOutput)
    follow_up: FollowUp | None = None
    """ModelDeployment and ProfileRun to create for the chosen model."""
    ttl: TtlSpec | None = None
    """When the finished optimization is deleted, with the follow-ups it owns (artifacts on the PVC stay)."""

    # Enforced by the API server only: the candidates, the report and the follow-ups all come from the spec
    # the optimizer Job started with; an edit would leave a status describing another spec (and kstatus
    # waiting forever for an observedGeneration that never moves).
    server_only_validations = (
        {"rule": "self == oldSelf", "message": "a ModelOptimization's spec cannot change; create a new one"},
    )

    def evaluation_dataset(self) -> tuple[str, DatasetSource] | None:
        """(field, source) of the rows the candidates are evaluated on: labelled rows for ONNX models, prompts
        for GGUF ones; None without either."""
        if self.evaluator.generation is not None:
            return "evaluator.generation.dataset", self.evaluator.generation.dataset
        if self.evaluator.accuracy is not None:
            return "evaluator.accuracy.dataset", self.evaluator.accuracy.dataset
        return None

    cross_field_rules = (
        Rule(
            cel="!has(self.model.framework) || self.model.framework in ['onnx', 'gguf'] || has(self.passes.conversion)",
            message="a non-ONNX model must be converted first; add passes.conversion",
            check=lambda s: s.model.framework in ("onnx", "gguf") or s.passes.conversion is not None,
            field_path=".passes",
        ),
        Rule(
            cel="(has(self.model.framework) && self.model.framework == 'gguf') == has(self.passes.ggufQuantization)",
            message="a GGUF model (model.framework gguf) is optimized by passes.ggufQuantization alone, and that "
            "pass takes GGUF models only; set both or neither",
            check=lambda s: (s.model.framework == "gguf") == (s.passes.gguf_quantization is not None),
            field_path=".passes.ggufQuantization",
        ),
        Rule(
            cel="!has(self.passes.ggufQuantization) || [has(self.passes.conversion), "
            "has(self.passes.transformersOptimization), has(self.passes.graphOptimization), "
            "has(self.passes.quantization), has(self.passes.float16), has(self.passes.threadTuning)].all(x, !x)",
            message="passes.ggufQuantization is the only pass for GGUF models; remove the ONNX passes",
            check=lambda s: (
                s.passes.gguf_quantization is None or all(getattr(s.passes, n) is None for n in ONNX_PASSES)
            ),
            field_path=".passes",
        ),
        Rule(
            cel="!has(self.passes.ggufQuantization) || (has(self.evaluator) && has(self.evaluator.generation) "
            "&& !has(self.evaluator.accuracy))",
            message="GGUF candidates are measured by evaluator.generation (prompts, greedy agreement); add it, and "
            "remove evaluator.accuracy, which is for ONNX models",
            check=lambda s: (
                s.passes.gguf_quantization is None
                or (s.evaluator.generation is not None and s.evaluator.accuracy is None)
            ),
            field_path=".evaluator",
        ),
        only_with(
            "passes.transformers_optimization.float16",
            "target.device",
            "gpu",
            flag=True,
            message="transformersOptimization.float16 makes a model for GPUs (ONNX Runtime's CPU kernels for the "
            "fused operators are float32); set target.device: gpu, or float16: false",
        ),
        Rule(
            cel="!has(self.passes.transformersOptimization) || !has(self.passes.transformersOptimization.float16) || "
            "!self.passes.transformersOptimization.float16 || (!has(self.passes.quantization) && "
            "!has(self.passes.float16))",
            message="transformersOptimization.float16 already makes float16 candidates; remove passes.float16 and "
            "passes.quantization (8-bit and float16 do not combine), or set float16: false",
            check=lambda s: (
                s.passes.transformers_optimization is None
                or not s.passes.transformers_optimization.float16
                or (s.passes.quantization is None and s.passes.float16 is None)
            ),
            field_path=".passes.transformersOptimization.float16",
        ),
        Rule(
            cel="!has(self.evaluator) || !has(self.evaluator.accuracy) || !has(self.evaluator.accuracy.text) || "
            "has(self.model.source.pvc) || has(self.model.source.file)",
            message="evaluator.accuracy.text reads the tokenizer from the model's folder; give model.source as pvc or "
            "file",
            check=lambda s: (
                s.evaluator.accuracy is None
                or s.evaluator.accuracy.text is None
                or s.model.source.pvc is not None
                or s.model.source.file is not None
            ),
            field_path=".evaluator.accuracy.text",
        ),
        Rule(
            cel="!has(self.model.framework) || self.model.framework != 'huggingface' || has(self.model.source.pvc) "
            "|| has(self.model.source.file)",
            message="a Hugging Face model is a folder; give model.source as pvc or file (its path is the folder)",
            check=lambda s: (
                s.model.framework != "huggingface" or s.model.source.pvc is not None or s.model.source.file is not None
            ),
            field_path=".model.source",
        ),
        only_with(
            "passes.conversion",
            "model.inputs",
            message="conversion needs the input tensors; list them in model.inputs",
            at="model.inputs",
        ),
        Rule(
            cel="!has(self.passes.quantization) || !has(self.passes.quantization.mode) || "
            "self.passes.quantization.mode != 'static' || (has(self.evaluator) && has(self.evaluator.accuracy))",
            message="static quantization calibrates on evaluator.accuracy.dataset; add it or use mode dynamic",
            check=lambda s: (
                s.passes.quantization is None
                or s.passes.quantization.mode != "static"
                or s.evaluator.accuracy is not None
            ),
            field_path=".passes.quantization.mode",
        ),
    )


# --- status ------------------------------------------------------------------------------------------


class Footprint(KaliperModel):
    """One evaluated model: the passes that made it and what it measured."""

    id: Annotated[str, Field(max_length=64)]
    """Candidate id, unique within the optimization."""
    passes: list[Annotated[str, Field(max_length=64)]] = Field(default_factory=list)
    """Passes applied to make this candidate, in order."""
    parameters: dict[str, str] = Field(default_factory=dict)
    """Pass options and session settings of this candidate."""
    accuracy: float | None = None
    """Accuracy metric measured on the evaluation dataset."""
    accuracy_degradation: float | None = None
    """Loss of accuracy against the original model (negative is a gain)."""
    accuracy_ci_low: Annotated[float, Field(ge=0, le=1)] | None = None
    """Lower end of the Wilson 95% interval of accuracy (metric accuracy: a share of the evaluation rows; the
    same interval a ProfileRun's spec.quality gives its scores)."""
    accuracy_ci_high: Annotated[float, Field(ge=0, le=1)] | None = None
    """Upper end of that interval."""
    agreement: Annotated[float, Field(ge=0, le=1)] | None = None
    """Share of the evaluation rows on which this candidate predicts what the original predicts (classifiers
    with metric accuracy or f1)."""
    fused_operators: dict[str, int] | None = None
    """Operators ONNX Runtime's transformer optimizer fused into this candidate's model, with their counts
    (passes.transformersOptimization)."""
    latency_ms: Annotated[float, Field(ge=0)] | None = None
    """Latency figure chosen by evaluator.latency.metric, in milliseconds."""
    latency_ci_low_ms: Annotated[float, Field(ge=0)] | None = None
    """Lower end of the 95% confidence interval of latencyMs."""
    latency_ci_high_ms: Annotated[float, Field(ge=0)] | None = None
    """Upper end of that interval (absent when the runs are too few to bound a tail percentile)."""
    latency_improvement_percent: float | None = None
    """How much lower the latency is than the original's, in percent."""
    model_size_bytes: Annotated[int, Field(ge=0)] | None = None
    """Size of the model file."""
    meets_goals: bool | None = None
    """Whether the candidate meets every goal of the evaluator."""
    artifact: Annotated[str, Field(max_length=2048)] | None = None
    """Where the model file is (pvc://claim/path or a local path), when kept."""
    message: Annotated[str, Field(max_length=2048)] | None = None
    """What a person should know: what happened and what to do."""


class ChosenModel(KaliperModel):
    """The best candidate that met the goals: the fastest against the original measured alongside it, the
    smaller file on a tie."""

    candidate_id: Annotated[str, Field(max_length=64)]
    """Id of the chosen candidate."""
    artifact: Annotated[str, Field(max_length=2048)] | None = None
    """Where the model file is (pvc://claim/path or a local path)."""
    settings: dict[str, str] = Field(default_factory=dict)
    """ONNX Runtime session settings it was measured with (intraOp, interOp, executionMode, graphLevel); the
    follow-up deployment gets the thread counts."""
    latency_ms: Annotated[float, Field(ge=0)] | None = None
    """Its latency figure (evaluator.latency.metric), in milliseconds."""
    model_size_bytes: Annotated[int, Field(ge=0)] | None = None
    """Size of the model file."""
    latency_improvement_percent: float | None = None
    """How much lower the latency is than the original's, in percent."""
    accuracy_degradation: float | None = None
    """Loss of accuracy against the original model (negative is a gain)."""


class OperatorTypeShare(KaliperModel):
    """One operator type's part of a model's time."""

    op_type: Annotated[str, Field(max_length=128)]
    """ONNX operator type, as ONNX Runtime ran it (FusedGemm, Conv...)."""
    nodes: Annotated[int, Field(ge=0)]
    """Nodes of this type in the graph ONNX Runtime ran."""
    time_percent: float | None = None
    """Share of the model's summed kernel time (ONNX Runtime's profiler)."""
    flops: Annotated[int, Field(ge=0)] | None = None
    """Estimated FLOPs of these nodes per inference."""


class ProfileSummary(KaliperModel):
    """Where a model's time goes, in short (the full per-node profile is in the report)."""

    model: Annotated[str, Field(max_length=64)]
    """original, or the chosen candidate's id."""
    parameters: Annotated[int, Field(ge=0)]
    """Elements of the model's weights and biases."""
    flops: Annotated[int, Field(ge=0)]
    """Estimated floating-point operations per inference, from the graph (a lower bound when some operators
    have no estimate)."""
    kernel_time_us: Annotated[float, Field(ge=0)] | None = None
    """Summed operator time per inference, microseconds."""
    top_operator_types: Annotated[list[OperatorTypeShare], Field(max_length=10)] = Field(default_factory=list)
    """The operator types taking the most time, slowest first."""
    layout: GraphLayout | None = None
    """The layout of the graph ONNX Runtime ran on the machine that measured."""
    nchwc_block_size: Annotated[int, Field(ge=1)] | None = None
    """With NCHWc, the channels per block there (8 on x86-64, 16 with AVX-512F): operator FLOPs count
    channels padded to whole blocks."""


class FollowUpStatus(KaliperModel):
    deployment_name: Annotated[str, Field(max_length=253)] | None = None
    """The ModelDeployment created."""
    profile_run_name: Annotated[str, Field(max_length=253)] | None = None
    """The ProfileRun created."""


class ModelOptimizationStatus(WorkStatus):
    """Candidates, the Pareto frontier and the chosen model."""

    phase: Literal["Pending", "Running", "Succeeded", "Failed"] | None = None
    """One word for where the object is; see conditions for details."""
    evaluated: Annotated[int, Field(ge=0)] | None = None
    """Candidates evaluated so far."""
    original: Footprint | None = None
    """The original model, measured the same way as the candidates (ONNX Runtime's defaults)."""
    candidates: Annotated[list[Footprint], Field(max_length=1000)] | None = None
    """Every evaluated candidate."""
    pareto_frontier: Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=1000)] | None = None
    """Ids of the candidates no other candidate beats on both latency and accuracy."""
    size_frontier: Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=1000)] | None = None
    """Ids of the candidates no other candidate beats on both latency and model size."""
    chosen: ChosenModel | None = None
    profiles: Annotated[list[ProfileSummary], Field(max_length=3)] | None = None
    """Performance profiles of the original model and the chosen one (and, with transformersOptimization, of
    the fastest candidate with its fusions when it is not the chosen one)."""
    artifacts: Annotated[str, Field(max_length=2048)] | None = None
    """The folder with the kept models, report.json and report.html (pvc://claim/path or a local path)."""
    follow_up: FollowUpStatus | None = None
    """Objects created for the chosen model."""
    message: Annotated[str, Field(max_length=4096)] | None = None
    """What a person should know: what happened and what to do."""
