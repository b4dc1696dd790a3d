"""A ProfileRun's status: progress, per-trial figures, the best configuration, the recommendation, cost."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from kaliper.api.base import KaliperModel
from kaliper.api.common import (
    ConfigMapKeyReference,
    GpuRequest,
    ResourceList,
    WorkStatus,
)
from kaliper.api.model_shape import ModelHeader
from kaliper.api.profilerun.vocabulary import OpenLoop, SyntheticPrompts

ProfileRunPhase = Literal["Pending", "Running", "Succeeded", "Failed"]


TrialPhase = Literal["Pending", "Deploying", "Running", "Collecting", "Succeeded", "Failed", "Skipped"]


SloVerdict = Literal["Met", "NotMet", "Inconclusive"]


RunVerdict = Literal["Met", "NotMet", "Inconclusive", "Unknown"]


Ms = Annotated[float, Field(ge=0)]


class LatencySummary(KaliperModel):
    """Latency percentiles in milliseconds, with the number of samples behind them."""

    count: Annotated[int, Field(ge=0)] = 0
    """Requests measured."""
    p50_ms: Ms | None = None
    """Median latency."""
    p90_ms: Ms | None = None
    """90th percentile latency."""
    p95_ms: Ms | None = None
    """95th percentile latency."""
    p99_ms: Ms | None = None
    """99th percentile latency."""
    p999_ms: Ms | None = None
    """99.9th percentile latency."""
    mean_ms: Ms | None = None
    """Mean latency."""
    max_ms: Ms | None = None
    """Largest latency seen."""


class ResourceUsage(KaliperModel):
    """Resource figures of one trial, summed over its replicas. Absent means not available (see conditions);
    the full report (and its HTML) uses the same fields, plus time series."""

    cpu_avg_cores: Annotated[float, Field(ge=0)] | None = None
    """Average CPU use, in cores."""
    cpu_p90_cores: Annotated[float, Field(ge=0)] | None = None
    """90th percentile of CPU use over the samples, in cores (what the CPU recommendation starts from)."""
    cpu_peak_cores: Annotated[float, Field(ge=0)] | None = None
    """Peak CPU use, in cores."""
    cpu_throttled_ratio: Annotated[float, Field(ge=0, le=1)] | None = None
    """Share of CFS periods in which the CPU limit throttled the server."""
    memory_avg_bytes: Annotated[float, Field(ge=0)] | None = None
    """Average memory working set."""
    memory_peak_bytes: Annotated[float, Field(ge=0)] | None = None
    """Peak memory working set."""
    oom_kills: Annotated[int, Field(ge=0)] = 0
    """Containers killed for exceeding their memory limit."""
    restarts: Annotated[int, Field(ge=0)] | None = None
    """Container restarts during the trial."""
    io_read_bytes: Annotated[int, Field(ge=0)] | None = None
    """Bytes read from block devices."""
    io_write_bytes: Annotated[int, Field(ge=0)] | None = None
    """Bytes written to block devices."""
    network_receive_bytes: Annotated[int, Field(ge=0)] | None = None
    """Bytes the server received (the load generator's requests, counted by it)."""
    network_transmit_bytes: Annotated[int, Field(ge=0)] | None = None
    """Bytes the server sent (the responses, counted by the load generator)."""
    gpu_utilization_percent: Annotated[float, Field(ge=0, le=100)] | None = None
    """Average GPU utilisation (DCGM_FI_DEV_GPU_UTIL or NVML)."""
    gpu_memory_peak_mib: Annotated[float, Field(ge=0)] | None = None
    """Peak GPU framebuffer memory used."""
    gpu_power_avg_watts: Annotated[float, Field(ge=0)] | None = None
    """Average GPU power draw."""


class TokenSummary(KaliperModel):
    """Generation requests: the token stream's headline figures (the full report has every percentile with
    its interval, the definitions and the server self-check)."""

    ttft_p50_ms: Ms | None = None
    """Time to first token, median (from the intended send under open loop)."""
    ttft_p99_ms: Ms | None = None
    """Time to first token, 99th percentile."""
    ttfot_p50_ms: Ms | None = None
    """Time to first output token (the first answer token, after a reasoning model's thinking), median."""
    ttfot_p99_ms: Ms | None = None
    """Time to first output token, 99th percentile."""
    itl_p50_ms: Ms | None = None
    """Gap between successive content chunks, median."""
    itl_p99_ms: Ms | None = None
    """Gap between successive content chunks, 99th percentile."""
    tpot_p50_ms: Ms | None = None
    """Time per output token after the first, median over requests."""
    tpot_p99_ms: Ms | None = None
    """Time per output token after the first, 99th percentile over requests."""
    input_tokens: Annotated[int, Field(ge=0)] = 0
    """Prompt tokens of the measured requests."""
    output_tokens: Annotated[int, Field(ge=0)] = 0
    """Generated tokens of the measured requests (thinking included)."""
    reasoning_tokens: Annotated[int, Field(ge=0)] = 0
    """Of those, the tokens a reasoning model spent thinking."""
    output_tokens_per_s: Annotated[float, Field(ge=0)] = 0
    """Generated tokens per second of complete answers."""
    goodput_share: Annotated[float, Field(ge=0, le=1)] | None = None
    """Share of requests that met every latency objective."""


class TrialSummary(KaliperModel):
    """One configuration at one load level: the headline figures (the full report has the rest)."""

    index: Annotated[int, Field(ge=0)]
    """Position in the run, from 0."""
    name: Annotated[str, Field(max_length=253)]
    """Name of the trial (and of its ModelDeployment on Kubernetes)."""
    parameters: dict[str, str] = Field(default_factory=dict)
    """The swept values of this trial, such as cpu=500m, concurrency=8."""
    phase: TrialPhase = "Pending"
    """Where the trial is."""
    requests: Annotated[int, Field(ge=0)] | None = None
    """Requests measured (warm-up excluded)."""
    throughput_rps: Annotated[float, Field(ge=0)] | None = None
    """Successful requests per second."""
    error_rate: Annotated[float, Field(ge=0, le=1)] | None = None
    """Share of failed requests."""
    latency: LatencySummary | None = None
    """Latency percentiles (corrected for coordinated omission under open-loop load)."""
    tokens: TokenSummary | None = None
    """Generation requests (openai-chat, openai-completions): time to first token, gaps, tokens per second."""
    resources: ResourceUsage | None = None
    """CPU, memory and GPU use."""
    slo_verdict: SloVerdict | None = None
    """Met: every objective held, latency percentiles with their whole 95% confidence interval; NotMet: one
    failed (a percentile's whole interval above its bound); Inconclusive: an interval straddles a bound even
    after measuring up to maxDuration. Absent without an SLO."""
    slo_violations: Annotated[list[Annotated[str, Field(max_length=512)]], Field(max_length=16)] | None = None
    """Objectives that failed or could not be decided, with the observed figure."""
    limited_by: Annotated[list[Annotated[str, Field(max_length=512)]], Field(max_length=8)] | None = None
    """Something other than the configuration under test limited this trial (the load generator's own CPU,
    late sends, a server below its CPU limit while latency rose): its figures say less about the
    configuration than they seem to."""
    core_hours_per_million_requests: Annotated[float, Field(ge=0)] | None = None
    """CPU core-hours spent per million requests (as the Azure ML profiler reports)."""
    cost_per_million_requests: Annotated[float, Field(ge=0)] | None = None
    """Money per million requests, from the spec's price table."""
    cost_per_million_output_tokens: Annotated[float, Field(ge=0)] | None = None
    """Generation: money per million generated tokens, from the spec's price table."""
    stop_reason: Annotated[str, Field(max_length=512)] | None = None
    """Why measuring stopped (stable, max duration, error)."""
    message: Annotated[str, Field(max_length=2048)] | None = None
    """What went wrong, for a failed trial (or why it was skipped)."""
    failed_in: TrialPhase | None = None
    """The phase a failed trial failed in; Deploying means its deployment never became ready."""
    scores_quality: bool = False
    """Asks the quality dataset after its load (spec.quality): its configuration's first trial to start (another
    of the configuration asks it if this one fails)."""
    start_time: datetime | None = None
    """When work started."""
    completion_time: datetime | None = None
    """When work finished (succeeded or failed)."""


class Progress(KaliperModel):
    """How far the run is."""

    completed_trials: Annotated[int, Field(ge=0)] = 0
    """Trials finished (succeeded, failed or skipped)."""
    total_trials: Annotated[int, Field(ge=0)] = 0
    """Trials planned."""
    current_trial: Annotated[str, Field(max_length=253)] | None = None
    """Name of the trial in progress."""
    summary: Annotated[str, Field(max_length=32)] | None = None
    """"completed/total", for `kubectl get`."""

    @classmethod
    def of(cls, trials: Sequence[object], total: int, current: str | None = None) -> Progress:
        """Trials finished (succeeded, failed or skipped) of those planned: one rule, during the run and at its
        end. `trials` holds reports or status summaries (anything with a status or phase)."""
        done = sum(_trial_state(t) in ("Succeeded", "Failed", "Skipped") for t in trials)
        return cls(completed_trials=done, total_trials=total, current_trial=current, summary=f"{done}/{total}")


def _trial_state(trial: object) -> str:
    return getattr(trial, "status", None) or getattr(trial, "phase", "")


class BestConfiguration(KaliperModel):
    """The cheapest trial that met the SLO (or the fastest, without an SLO); trials whose costs differ by less
    than the measurement noise tie, and the one with more latency headroom wins (a trial limited by something
    other than its configuration only against others that were)."""

    trial: Annotated[int, Field(ge=0)]
    """Index of the trial."""
    parameters: dict[str, str] = Field(default_factory=dict)
    """The swept values of that trial."""
    p99_ms: Ms | None = None
    """99th percentile latency."""
    throughput_rps: Annotated[float, Field(ge=0)] | None = None
    """Successful requests per second."""
    cost_per_million_requests: Annotated[float, Field(ge=0)] | None = None
    """Money per million requests, from the spec's price table."""
    output_tokens_per_s: Annotated[float, Field(ge=0)] | None = None
    """Generation: generated tokens per second."""
    cost_per_million_output_tokens: Annotated[float, Field(ge=0)] | None = None
    """Generation: money per million generated tokens (what generation runs are ranked on)."""
    certainty: Literal["Clear", "Tie", "Disturbed"] | None = None
    """Clear: cheaper than every other trial that met the SLO by more than the noise; Tie: another trial's
    cost is within the noise, and this one has more headroom or was measured undisturbed; Disturbed: this trial
    was limited by something other than its configuration (see its limitedBy)."""
    explanation: Annotated[str, Field(max_length=1024)] | None = None
    """Why this trial was chosen, against the runner-up."""


class Capacity(KaliperModel):
    """One configuration's capacity under the SLO: the highest load at which it meets every objective,
    bracketed by measured trials (each judged Met or NotMet with 95% confidence by the stopping rule), and
    what it costs there."""

    parameters: dict[str, str]
    """The configuration's swept values, without the load level."""
    level_name: str
    """concurrency or rate."""
    met: float | None = None
    """The highest load measured to meet the SLO; None: not even the lowest did."""
    not_met: float | None = None
    """The lowest load above `met` measured not to (NotMet, or a trial that failed); None: every load up to
    the highest measured met it, so the capacity is at least `met`."""
    inconclusive: list[float] = Field(default_factory=list)
    """Loads between the two where the measurement could not tell (the stopping rule's budget ran out)."""
    trial: int | None = None
    """The trial at `met`: the throughput, cost and replicas below are measured there."""
    probes: int = 0
    """Trials the capacity search added between the listed levels."""
    probe_seconds: float = 0.0
    """Seconds of load those probes took."""
    throughput: float | None = None
    """At `met`: requests per second, or output tokens per second for generation (what the cost is per)."""
    noise: float | None = None
    """The 95% relative uncertainty of that throughput (and so of the cost and replicas)."""
    unit_cost: float | None = None
    """At `met`: money per million requests, or per million output tokens for generation."""
    unit_cost_low: float | None = None
    """The low end of that cost's 95% interval."""
    unit_cost_high: float | None = None
    """The high end of that cost's 95% interval (unset when the uncertainty leaves it unbounded)."""
    replicas: int | None = None
    """Replicas for the run's target (slo.targetThroughput / targetOutputTokensPerSecond) at this capacity."""
    replicas_low: int | None = None
    """The low end of the replica count's 95% interval."""
    replicas_high: int | None = None
    """The high end of that interval (unset when unbounded)."""

    def interval_text(self) -> str:
        """Such as "met at 5, not met at 6", "met at 8 (the highest measured)", "not met at 1 (the lowest
        measured)", "met at 2, inconclusive at 4, not met at 8"."""
        parts = []
        alone = not self.inconclusive
        if self.met is not None:
            parts.append(f"met at {self.met:g}" + (" (the highest measured)" if self.not_met is None and alone else ""))
        if self.inconclusive:
            parts.append(f"inconclusive at {', '.join(f'{v:g}' for v in self.inconclusive)}")
        if self.not_met is not None:
            parts.append(
                f"not met at {self.not_met:g}" + (" (the lowest measured)" if self.met is None and alone else "")
            )
        return ", ".join(parts) or "unmeasured"


class BaselineComparison(KaliperModel):
    """This run against its baseline (spec.baseline): how many figures were compared, and which regressed."""

    source: Annotated[str, Field(max_length=512)]
    """What the baseline was, such as "ProfileRun serve-v1"."""
    figures: Annotated[int, Field(ge=0)] = 0
    """Figures compared: every figure of every configuration both runs measured at the same load."""
    worse: Annotated[int, Field(ge=0)] = 0
    """Figures worse beyond the noise (their intervals apart)."""
    better: Annotated[int, Field(ge=0)] = 0
    """Figures better beyond the noise."""
    regressions: Annotated[list[Annotated[str, Field(max_length=512)]], Field(max_length=20)] = Field(
        default_factory=list
    )
    """Figures worse beyond the noise and the tolerance (slo.failIfRegressed, else 5%), one line each: the
    configuration, the figure, both values, the change and both intervals (at most 20)."""
    not_compared: Annotated[list[Annotated[str, Field(max_length=512)]], Field(max_length=20)] = Field(
        default_factory=list
    )
    """Configurations one run measured and the other did not (at most 20)."""


class Recommendation(KaliperModel):
    """Requests, limits and replicas to deploy with."""

    requests: ResourceList | None = None
    """Recommended requests."""
    limits: ResourceList | None = None
    """Recommended limits."""
    gpu: GpuRequest | None = None
    """Recommended accelerators per replica."""
    replicas: Annotated[int, Field(ge=0)] | None = None
    """Recommended replica count for the target throughput."""
    replicas_low: Annotated[int, Field(ge=0)] | None = None
    """The low end of the replica count's 95% interval (from the throughput's uncertainty)."""
    replicas_high: Annotated[int, Field(ge=0)] | None = None
    """The high end of that interval; unset when the uncertainty leaves it unbounded."""
    target_throughput_rps: Annotated[float, Field(ge=0)] | None = None
    """The throughput the recommendation is sized for."""
    rationale: Annotated[str, Field(max_length=4096)] | None = None
    """How the figures were derived, in words."""
    merge_patch: Annotated[str, Field(max_length=1024)] | None = None
    """The recommendation as a JSON merge patch of the target ModelDeployment, ready to paste:
    `kubectl patch modeldeployment NAME --type merge -p '<this>'` (or `kaliper recommend RUN` for a kustomize
    patch or the whole manifest)."""
    strategic_merge_patch: Annotated[str, Field(max_length=1024)] | None = None
    """A workloadRef target's: the recommendation as a strategic merge patch of the Deployment (its serving
    container by name, and its replicas): `kubectl patch deployment NAME -p '<this>'`."""


class CostSummary(KaliperModel):
    """Cost of the best configuration."""

    currency: Annotated[str, Field(max_length=3)] = "USD"
    """ISO 4217 currency of the money figures."""
    core_hours_per_million_requests: Annotated[float, Field(ge=0)] | None = None
    """CPU core-hours spent per million requests (as the Azure ML profiler reports)."""
    currency_per_million_requests: Annotated[float, Field(ge=0)] | None = None
    """Money per million requests, from the spec's price table."""
    core_hours_per_million_output_tokens: Annotated[float, Field(ge=0)] | None = None
    """Generation: CPU core-hours per million generated tokens."""
    currency_per_million_output_tokens: Annotated[float, Field(ge=0)] | None = None
    """Generation: money per million generated tokens."""
    currency_per_million_tokens: Annotated[float, Field(ge=0)] | None = None
    """Generation: money per million tokens, prompt and output together."""


class ReportReference(KaliperModel):
    """Where the full report is."""

    config_map: ConfigMapKeyReference | None = None
    """A ConfigMap owned by the run (Kubernetes)."""
    path: Annotated[str, Field(max_length=1024)] | None = None
    """A file path (`kaliper run`)."""


class BucketShares(KaliperModel):
    """One bucket of a token histogram the workload was fitted to: its share of the requests and the fit's."""

    upper: float | None = None
    """The bucket's upper edge in tokens (le); none for +Inf."""
    observed: Annotated[float, Field(ge=0, le=1)]
    """The share of the window's requests in the bucket."""
    fitted: Annotated[float, Field(ge=0, le=1)]
    """The fitted lognormal's share of the bucket."""


class FittedWorkload(KaliperModel):
    """What payload.prompts.fromPrometheus fitted when the run was planned; every trial used it."""

    source: Annotated[str, Field(max_length=2048)]
    """The Prometheus, the selector and the window read."""
    fitted_at: datetime
    """The end of the window read."""
    prompts: SyntheticPrompts
    """The synthetic prompts the fit made (lengths, shared prefix)."""
    open_loop: OpenLoop | None = None
    """The arrivals the fit made (load.fitted, its scale applied)."""
    fit: Annotated[list[Annotated[str, Field(max_length=512)]], Field(max_length=64)] = Field(default_factory=list)
    """How each figure was fitted and how well it matches the histogram it came from."""
    input_buckets: Annotated[list[BucketShares], Field(max_length=40)] = Field(default_factory=list)
    """The prompt-token histogram's occupied buckets beside the fitted lognormal's shares."""
    output_buckets: Annotated[list[BucketShares], Field(max_length=40)] = Field(default_factory=list)
    """The same for output tokens."""


class ProfileRunStatus(WorkStatus):
    """Progress, per-trial figures, the best configuration and the recommendation."""

    phase: ProfileRunPhase | None = None
    """One word for where the object is; see conditions for details."""
    progress: Progress | None = None
    trials: Annotated[list[TrialSummary], Field(max_length=1000)] | None = None
    """One summary per trial, in order."""
    best: BestConfiguration | None = None
    recommendation: Recommendation | None = None
    cost: CostSummary | None = None
    baseline: BaselineComparison | None = None
    """This run against spec.baseline, figure by figure."""
    capacity: Annotated[list[Capacity], Field(max_length=1000)] | None = None
    """Each configuration's capacity under the SLO: the loads measured to meet and not to meet it, and its
    cost and replicas at the highest load met."""
    verdict: RunVerdict | None = None
    """Met when at least one trial met the SLO; Inconclusive when none did but at least one could not be
    decided; NotMet when every measured trial missed it."""
    workload: FittedWorkload | None = None
    """The workload fitted from Prometheus (payload.prompts.fromPrometheus), kept so that every trial and a
    restarted operator use the same."""
    model_headers: Annotated[list[ModelHeader], Field(max_length=100)] | None = None
    """The headers of the models the configurations serve, read once before any trial for the fit check (each
    configuration's memory estimated against its limit); kept so that a restarted operator plans the same."""
    report_ref: ReportReference | None = None
    message: Annotated[str, Field(max_length=4096)] | None = None
    """What a person should know: what happened and what to do."""
