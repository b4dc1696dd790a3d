"""The optimization report (versioned): what `kaliper run` writes for a ModelOptimization, what the optimizer
Job writes to its volume, what the HTML page draws, and what the operator's status is built from."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from kaliper.api.base import KaliperModel
from kaliper.api.modeloptimization import ChosenModel, Footprint, GraphLayout
from kaliper.report.schema import RunReport

OPTIMIZATION_SCHEMA = "kaliper.dev/optimization/v2"
# v1 called the original model's measurement `baseline`, the word a ProfileRun uses for an earlier run to compare
# with; v2 calls it `original`. A v1 report (an optimizer Job of the previous release) still reads.
_V1 = "kaliper.dev/optimization/v1"


class LatencyMeasurement(KaliperModel):
    """Latency of in-process inferences on one model and one session configuration."""

    runs: int
    """Timed inferences (after warmupRuns untimed ones)."""
    warmup_runs: int = 0
    batch_size: int = 1
    metric: Literal["avg", "p50", "p90", "p95", "p99"] = "avg"
    """The figure that decides (evaluator.latency.metric)."""
    value_ms: float
    """The deciding figure."""
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    """Its 95% confidence interval (normal for the mean, order statistics for percentiles); high is absent
    when the runs are too few to bound a tail percentile from above."""
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float


class OperatorTime(KaliperModel):
    """One node of the graph: its time per inference from ONNX Runtime's profiler and its FLOPs estimate."""

    node: str
    op_type: str
    time_us: float | None = None
    """Mean kernel time per inference, microseconds (absent when the profiler did not time this node, as
    when ONNX Runtime fused it away)."""
    time_percent: float | None = None
    """Share of the summed kernel time of the model."""
    flops: int | None = None
    """Estimated floating-point operations for one inference at the profiled batch size (absent when the
    operator has no estimate)."""


class OperatorTypeTime(KaliperModel):
    """All nodes of one operator type, summed."""

    op_type: str
    nodes: int
    time_us: float | None = None
    time_percent: float | None = None
    flops: int | None = None


class ModelProfile(KaliperModel):
    """Where a model's time goes (the Sparsify-style view): per-node and per-operator-type kernel times
    from ONNX Runtime's profiler, the parameter count, and a FLOPs estimate computed from the graph."""

    model: str
    """What was profiled: original, or a candidate id."""
    batch_size: int = 1
    runs: int = 0
    """Profiled inferences the times are averaged over."""
    parameters: int
    """Elements of the model's initializers (weights and biases)."""
    flops: int
    """Estimated floating-point operations per inference (sum over the nodes that have an estimate)."""
    nodes_without_estimate: list[str] = Field(default_factory=list)
    """Op types of nodes the FLOPs estimate leaves out (counted as zero), so the total is a lower bound."""
    kernel_time_us: float | None = None
    """Summed kernel time per inference, microseconds."""
    operators: list[OperatorTime] = Field(default_factory=list)
    """Per node of the graph ONNX Runtime ran (after its own optimizations), slowest first."""
    operator_types: list[OperatorTypeTime] = Field(default_factory=list)
    """Per operator type, slowest first."""
    graph_nodes: list[OperatorTime] = Field(default_factory=list)
    """Per node of the model file as stored (before ONNX Runtime's optimizations), with FLOPs estimates."""
    layout: GraphLayout | None = None
    """The layout of the graph ONNX Runtime ran (see GraphLayout)."""
    nchwc_block_size: int | None = None
    """With NCHWc, the channels per block on the machine that ran it (8 on x86-64, 16 with AVX-512F): the
    per-node and per-type FLOPs count the channels padded to whole blocks, so they differ between machines."""


class MachineInfo(KaliperModel):
    """The machine that measured: what makes ONNX Runtime run one model differently from another machine."""

    cpu: str
    """The CPU's model name, as the kernel gives it."""
    architecture: str
    instruction_sets: list[str] = Field(default_factory=list)
    """Those that change ONNX Runtime's CPU kernels (AVX2, AVX512F, AVX512VNNI, ...; ASIMD, SVE on ARM)."""
    onnxruntime: str
    """ONNX Runtime's version."""
    nchwc_block_size: int | None = None
    """ONNX Runtime's NCHWc block on this CPU (None: it has no NCHWc kernels here)."""


class CandidateResult(Footprint):
    """A footprint with the measurements behind it."""

    latency: LatencyMeasurement | None = None
    original_latency_ms: float | None = None
    """The original's figure (ONNX Runtime's defaults) measured in alternating blocks with this candidate:
    latencyImprovementPercent is read against it, so a change in the machine's load falls on both."""
    throttled_percent: float | None = None
    """Share of the CPU limit's 100 ms periods that ran out of quota during the measurement (absent without a
    limit): high values mean the quota, not the model, sets the tail, which a p50 does not show."""
    accuracy_metric: str | None = None
    """Name of the accuracy metric (evaluator.accuracy.metric)."""
    status: Literal["Succeeded", "Failed"] = "Succeeded"
    seconds: float | None = None
    """Time spent making and measuring this candidate."""


class ParetoFrontiers(KaliperModel):
    """Ids of the candidates (and `original`) no other beats on both axes."""

    latency_accuracy: list[str] = Field(default_factory=list)
    latency_size: list[str] = Field(default_factory=list)


class OptimizationReport(RunReport):
    """A whole optimization run."""

    schema_version: Literal["kaliper.dev/optimization/v2"] = OPTIMIZATION_SCHEMA
    phase: Literal["Running", "Succeeded", "Failed"] = "Running"
    reason: str | None = None
    """One CamelCase word: Succeeded, NoCandidateMeetsGoals, ModelDidNotLoad, DatasetMismatch, Interrupted..."""
    message: str | None = None
    target: dict[str, str] = Field(default_factory=dict)
    """Device, execution providers, CPU limit the latencies were measured under, CPUs seen."""
    machine: MachineInfo | None = None
    """The machine that measured (its CPU decides ONNX Runtime's layouts: see profiles[].layout)."""
    strategy: str = "exhaustive"
    planned: int = 0
    """Candidates the search may evaluate (after maxCandidates)."""
    references: list[CandidateResult] = Field(default_factory=list)
    """The original model with ONNX Runtime's graph optimizations off (`unoptimized`), measured with the
    original: how much ONNX Runtime's own defaults already give."""
    noise_percent: float | None = None
    """How far two sessions of the original, measured together, were apart (percent): the noise of this
    machine under this limit, against which improvements can be read (a warning says when it exceeds the 5%
    a candidate must at least gain without minImprovementPercent)."""
    original: CandidateResult | None = None
    """The original model as it would be served unchanged (ONNX Runtime's defaults); improvements and
    degradations are against it."""
    candidates: list[CandidateResult] = Field(default_factory=list)
    frontiers: ParetoFrontiers = Field(default_factory=ParetoFrontiers)
    chosen: ChosenModel | None = None
    chosen_settings: dict[str, str] = Field(default_factory=dict)
    """Runtime settings of the chosen model (threads, execution mode, graph level) as the server takes them."""
    profiles: list[ModelProfile] = Field(default_factory=list)
    """The original model's profile and the chosen candidate's (and, with transformersOptimization, the fastest
    fused candidate's when it is not the chosen one)."""
    artifacts: str | None = None
    """The folder the kept models, report.json and report.html are in (pvc://claim/path or a local path)."""
    warnings: list[str] = Field(default_factory=list)
    interrupted: bool = False

    @model_validator(mode="before")
    @classmethod
    def _read_v1(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schemaVersion") == _V1:
            data = {**data, "schemaVersion": OPTIMIZATION_SCHEMA}
            if "baseline" in data:
                data["original"] = data.pop("baseline")
        return data
