"""One optimization, start to end: load (or convert) the model, measure the original, let the search pick
candidates and measure each, decide, profile the original and the chosen model, keep the artifacts.

The same function runs under `kaliper run` (in a cgroup with the target's CPU limit) and in the optimizer
Job on Kubernetes (in a pod with that limit); only where files live differs, and the caller says that."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnxruntime as ort

from kaliper.api.modeloptimization import ChosenModel, ModelOptimizationSpec
from kaliper.log import get_logger
from kaliper.measure.cpu import throttling
from kaliper.optimize import dataset as data
from kaliper.optimize import evaluate, frontier, gguf, layout, passes, text
from kaliper.optimize.context import Inputs, OptimizationFailed, Progress
from kaliper.optimize.followups import CHOSEN_FILE
from kaliper.optimize.profile import profile_model
from kaliper.optimize.space import CandidatePlan, all_plans, run_search
from kaliper.report.optimization import CandidateResult, LatencyMeasurement, OptimizationReport

log = get_logger("kaliper.optimize")


@dataclass
class _Models:
    """Model files made so far, one per combination of passes (thread settings share a file)."""

    root: Path
    files: dict[tuple[bool, ...], Path | passes.PassError] = field(default_factory=dict)
    fused: dict[tuple[bool, ...], dict[str, int]] = field(default_factory=dict)
    """Operators the transformer optimizer fused into each file made with it."""


# Without evaluator.latency.minImprovementPercent a candidate must be at least this much faster: two sessions
# of the very same model, measured together, commonly differ by a few percent on this project's machine.
MIN_IMPROVEMENT_PERCENT = 5.0

DEFAULT_PROVIDERS = {"cpu": ("CPUExecutionProvider",), "gpu": ("CUDAExecutionProvider", "CPUExecutionProvider")}


class Optimization:
    def __init__(self, spec: ModelOptimizationSpec, inputs: Inputs, progress: Progress):
        self.spec = spec
        self.inputs = inputs
        self.progress = progress
        self.providers = tuple(spec.target.execution_providers or DEFAULT_PROVIDERS[spec.target.device])
        self.work = inputs.output / ".work"
        self.models = _Models(self.work / "models")
        self.original: Path = inputs.model
        self.converted = spec.model.framework != "onnx"
        self.rows: list[data.Row] = []
        self.labels: np.ndarray | None = None
        self.original_score: float | None = None
        self.original_predictions: np.ndarray | None = None
        self.latency_feeds: dict[str, np.ndarray] = {}
        self.original_session: ort.InferenceSession | None = None
        self.plans: dict[str, CandidatePlan] = {}  # candidate id -> what made it

    # --- the steps ---------------------------------------------------------------------------------

    def prepare(self) -> None:
        """The original as ONNX, opened once to learn its inputs; the dataset checked against them."""
        import onnxruntime as ort

        missing = [p for p in self.providers if p not in ort.get_available_providers()]
        if missing:
            raise OptimizationFailed(
                "ProviderUnavailable",
                f"target.executionProviders: {', '.join(missing)} is not in this ONNX Runtime build (it has "
                f"{', '.join(ort.get_available_providers())}); use an image with onnxruntime-gpu for CUDA, or "
                "remove it",
            )
        self.work.mkdir(parents=True, exist_ok=True)
        framework = self.spec.model.framework
        conversion = self.spec.passes.conversion
        if framework == "onnx" and conversion is not None:
            raise OptimizationFailed(
                "InvalidSpec", "passes.conversion converts scikit-learn or PyTorch models; this one is ONNX already"
            )
        try:
            if framework == "sklearn":
                assert conversion is not None and self.spec.model.inputs is not None  # the CRD's rules
                self.progress("converting the scikit-learn model to ONNX")
                self.original = passes.convert_sklearn(
                    self.inputs.model, self.spec.model.inputs, conversion.target_opset, self.work / "original.onnx"
                )
            elif framework in ("pytorch", "huggingface"):
                assert conversion is not None and self.spec.model.inputs is not None
                self.progress(f"exporting the {'PyTorch' if framework == 'pytorch' else 'Hugging Face'} model to ONNX")
                convert = passes.convert_pytorch if framework == "pytorch" else passes.convert_huggingface
                self.original = convert(
                    self.inputs.model, self.spec.model.inputs, conversion.target_opset, self.work / "original.onnx"
                )
            passes.load_onnx(self.original)
            session = passes.open_session(self.original, self.settings(CandidatePlan()))
        except passes.ModelLoadError as error:
            raise OptimizationFailed("ModelDidNotLoad", f"model.source: {error}") from error
        except passes.PassError as error:
            raise OptimizationFailed("ConversionFailed", str(error)) from error
        inputs = session.get_inputs()
        batch = self.spec.evaluator.latency.batch_size
        accuracy = self.spec.evaluator.accuracy
        if accuracy is not None:
            if self.inputs.dataset is None:
                raise OptimizationFailed("DatasetMissing", "evaluator.accuracy.dataset: no file to read")
            try:
                self.rows = evaluation_rows(self.spec, self.inputs, inputs, self.progress)
                if not self.rows:
                    raise data.DatasetError("evaluator.accuracy.dataset: no rows; add labelled rows")
                data.check_fields(self.rows, inputs)
            except data.DatasetError as error:
                raise OptimizationFailed("DatasetMismatch", str(error)) from error
            self.labels = data.labels(self.rows)
        try:
            if accuracy is not None and accuracy.text is not None:
                # Text models are timed on real rows: generated token ids would miss the padding and the
                # attention mask a real request has.
                self.latency_feeds = next(data.feeds(self.rows[:batch], inputs, batch))
            else:
                self.latency_feeds = data.generated_feeds(inputs, batch, seed=0, specs=self.spec.model.inputs)
        except data.DatasetError as error:
            raise OptimizationFailed("InvalidSpec", str(error)) from error

    def measure(
        self, candidate_id: str, plan: CandidatePlan, model: Path, graph_level: str | None = None
    ) -> CandidateResult:
        """Latency and accuracy (when a dataset is given) of one model file with one session setting. Its
        latency is measured in alternating blocks with the original's (see evaluate.paired_samples), and
        its improvement is read against the original's figure from those same seconds."""
        started = time.monotonic()
        session = passes.open_session(model, self.settings(plan, graph_level))
        assert self.original_session is not None, "measure_original first"
        (reference, figures), throttled = self._paired(self.original_session, session)
        parameters = {**plan.parameters(self.spec), **({"graphLevel": graph_level} if graph_level else {})}
        result = measured(candidate_id, plan.passes(self.converted), parameters, figures, reference, model)
        result.fused_operators = self.models.fused.get(plan.model_key)
        result.throttled_percent = throttled
        self._score(session, result)
        result.seconds = round(time.monotonic() - started, 2)
        return result

    def _paired(self, *sessions: ort.InferenceSession) -> tuple[list[LatencyMeasurement], float | None]:
        """The latency figures of the sessions measured together, and the share of the CPU limit's periods
        that ran out of quota meanwhile (None without a limit)."""
        latency = self.spec.evaluator.latency
        before = throttling() if self.inputs.limited else None
        samples = evaluate.paired_samples(sessions, self.latency_feeds, latency.warmup_runs, latency.runs)
        after = throttling() if before is not None else None
        throttled = None
        if before is not None and after is not None and after[0] > before[0]:
            throttled = round(100 * (after[1] - before[1]) / (after[0] - before[0]), 1)
        figures = [
            evaluate.latency_figures(taken, latency.metric, latency.warmup_runs, latency.batch_size)
            for taken in samples
        ]
        return figures, throttled

    def _score(self, session: ort.InferenceSession, result: CandidateResult) -> None:
        accuracy = self.spec.evaluator.accuracy
        if accuracy is None or self.labels is None:
            return
        predictions = evaluate.predict(session, data.feeds(self.rows, session.get_inputs(), 64))
        scored = evaluate.accuracy_figures(accuracy.metric, self.labels, predictions)
        result.accuracy_metric, result.accuracy, result.accuracy_ci_low, result.accuracy_ci_high = scored
        if accuracy.metric in ("accuracy", "f1"):
            if self.original_predictions is None:
                self.original_predictions = predictions
            result.agreement = round(float(np.mean(predictions == self.original_predictions)), 6)
        if self.original_score is not None:
            result.accuracy_degradation = round(
                evaluate.degradation(accuracy.metric, self.original_score, result.accuracy), 6
            )

    def measure_original(self) -> tuple[CandidateResult, CandidateResult, float]:
        """The original with ONNX Runtime's defaults (what every candidate is measured against) and with its
        graph optimizations off, measured together; first the original with a twin (the same model and settings
        in a session of its own): the last value is how far the twin's figure was from the original's, in
        percent, what two measurements of one model differ by on this machine under this limit."""
        plan = CandidatePlan()
        self.original_session = passes.open_session(self.original, self.settings(plan))
        twin = passes.open_session(self.original, self.settings(plan))
        (first, second), _ = self._paired(self.original_session, twin)
        gap = abs(1 - second.value_ms / first.value_ms) * 100
        del twin
        unoptimized_session = passes.open_session(self.original, self.settings(plan, "disabled"))
        (original_figures, unoptimized_figures), throttled = self._paired(self.original_session, unoptimized_session)
        results = []
        for candidate_id, session, figures, level in (
            ("original", self.original_session, original_figures, None),
            ("unoptimized", unoptimized_session, unoptimized_figures, "disabled"),
        ):
            parameters = {"graphLevel": level} if level else {}
            result = measured(
                candidate_id, plan.passes(self.converted), parameters, figures, original_figures, self.original
            )
            result.throttled_percent = throttled
            self._score(session, result)
            if self.original_score is None and result.accuracy is not None:
                self.original_score = result.accuracy
                result.accuracy_degradation = 0.0
            results.append(result)
        original, unoptimized = results
        original.latency_improvement_percent = None  # it is the reference
        return original, unoptimized, gap

    def settings(self, plan: CandidatePlan, graph_level: str | None = None) -> passes.SessionSettings:
        level = graph_level or (
            self.spec.passes.graph_optimization.level
            if plan.graph and self.spec.passes.graph_optimization is not None
            else "all"
        )
        return passes.SessionSettings(
            intra_op=plan.intra_op,
            inter_op=plan.inter_op,
            execution_mode=plan.execution_mode,  # type: ignore[arg-type]
            graph_level=level,  # type: ignore[arg-type]
            providers=self.providers,
        )

    def model_for(self, plan: CandidatePlan) -> Path:
        """The model file of a plan's passes, made once: graph optimization, then quantization, then
        float16, each on the previous one's output."""
        key = plan.model_key
        if key not in self.models.files:
            self.models.files[key] = self._make(plan)
        made = self.models.files[key]
        if isinstance(made, passes.PassError):
            raise made
        return made

    def _make(self, plan: CandidatePlan) -> Path | passes.PassError:
        """The transformer fusions first (its patterns are those of the exported graph; ONNX Runtime's quantizer
        knows the fused Attention and EmbedLayerNormalization), quantization and float16 next, graph optimization
        last: ONNX Runtime's quantizer cannot read the contrib operators (FusedGemm, FusedConv) that its extended
        and all levels write, while a quantized model optimized afterwards gets those fusions over its integer
        operators too."""
        names = ("transformers", "int8", "fp16", "graph")
        steps = (plan.transformers, plan.quantization, plan.float16, plan.graph)
        folder = self.models.root / "-".join(n for n, on in zip(names, steps, strict=True) if on)
        folder.mkdir(parents=True, exist_ok=True)
        current = self.original
        spec = self.spec.passes
        try:
            if plan.transformers and spec.transformers_optimization is not None:
                fused = passes.optimize_transformer(
                    current,
                    spec.transformers_optimization,
                    folder / "transformers.onnx",
                    use_gpu=self.spec.target.device == "gpu",
                )
                current = fused.path
                self.models.fused[plan.model_key] = fused.fused_operators
            if plan.quantization and spec.quantization is not None:
                calibration = None
                if spec.quantization.mode == "static":
                    rows = self.rows[: spec.quantization.calibration_samples]
                    session = passes.open_session(current, self.settings(CandidatePlan()))
                    calibration = list(data.feeds(rows, session.get_inputs(), 1))
                current = passes.quantize(current, spec.quantization, folder / "quantized.onnx", calibration).path
            if plan.float16 and spec.float16 is not None:
                current = passes.to_float16(current, spec.float16.keep_io_types, folder / "float16.onnx")
            if plan.graph and spec.graph_optimization is not None:
                level = spec.graph_optimization.level
                current = passes.optimize_graph(current, level, folder / "graph.onnx", list(self.providers))
        except passes.PassError as error:
            return error
        return current

    def candidate(self, index: int, plan: CandidatePlan) -> CandidateResult:
        candidate_id = f"c{index}"
        self.plans[candidate_id] = plan
        try:
            result = self.measure(candidate_id, plan, self.model_for(plan))
        except Exception as error:  # a pass that failed, an operator ONNX Runtime cannot run: the candidate fails
            known = isinstance(error, passes.PassError | passes.ModelLoadError)
            if not known:
                log.warning("candidate failed", candidate=candidate_id, error=str(error))
            return CandidateResult(
                id=candidate_id,
                passes=plan.passes(self.converted),
                parameters=plan.parameters(self.spec),
                status="Failed",
                meets_goals=False,
                message=(str(error) if known else f"{type(error).__name__}: {error}")[:2048],
            )
        problems = frontier.goal_problems(result, self.spec.evaluator, MIN_IMPROVEMENT_PERCENT)
        result.meets_goals = not problems
        if problems:
            result.message = "; ".join(problems)
        return result


def evaluation_rows(
    spec: ModelOptimizationSpec, inputs: Inputs, session_inputs: list[ort.NodeArg], progress: Progress
) -> list[data.Row]:
    """The labelled rows of evaluator.accuracy.dataset: tensors as they are, or text tokenized for the model."""
    accuracy = spec.evaluator.accuracy
    assert accuracy is not None and inputs.dataset is not None
    if accuracy.text is None:
        return data.read_rows(inputs.dataset, accuracy.samples)
    tokenizer = text.load_tokenizer(text.tokenizer_path(inputs.model, accuracy.text))
    length = text.sequence_length(session_inputs, accuracy.text, spec.model.inputs)
    progress(f"tokenizing the text rows to {length} tokens each")
    return text.read_text_rows(inputs.dataset, accuracy.text, tokenizer, session_inputs, length, accuracy.samples)


def measured(
    candidate_id: str,
    passes_applied: list[str],
    parameters: dict[str, str],
    figures: LatencyMeasurement,
    original: LatencyMeasurement,
    model: Path,
) -> CandidateResult:
    """A candidate's result from its latency and the original's, measured together."""
    return CandidateResult(
        id=candidate_id,
        passes=passes_applied,
        parameters=parameters,
        latency=figures,
        latency_ms=significant(figures.value_ms),
        latency_ci_low_ms=figures.ci_low_ms,
        latency_ci_high_ms=figures.ci_high_ms,
        original_latency_ms=significant(original.value_ms),
        latency_improvement_percent=round(100 * (1 - figures.value_ms / original.value_ms), 2),
        model_size_bytes=model.stat().st_size,
    )


def significant(value: float, digits: int = 4) -> float:
    """Rounded to `digits` significant digits: a 15 µs model keeps its resolution as a 15 ms one does."""
    return float(f"{value:.{digits}g}")


def _describe(result: CandidateResult) -> str:
    if result.status == "Failed":
        return f"failed: {result.message}"
    parts = [f"{result.latency_ms:.3f} ms"]
    if result.latency_improvement_percent is not None:
        parts.append(f"{result.latency_improvement_percent:+.1f}% faster")
    if result.accuracy is not None:
        parts.append(f"{result.accuracy_metric} {result.accuracy:.4g}")
    if result.meets_goals is not None:
        parts.append("meets the goals" if result.meets_goals else f"misses: {result.message}")
    return ", ".join(parts)


def run(
    spec: ModelOptimizationSpec,
    name: str,
    namespace: str | None,
    inputs: Inputs,
    progress: Progress = lambda line: None,
) -> OptimizationReport:
    """The whole optimization; every outcome, failures and interrupts included, is a report (never a
    traceback) with the candidates measured so far. The report and its HTML page are written to
    `inputs.output` at the end."""
    report = OptimizationReport(
        name=name,
        namespace=namespace,
        started_at=datetime.now(UTC),
        strategy=spec.search.strategy,
        target={
            "device": spec.target.device,
            "cpuLimit": f"{inputs.cpus:g}",
            "executionProviders": ", ".join(spec.target.execution_providers or DEFAULT_PROVIDERS[spec.target.device]),
        },
        machine=layout.machine(),
    )
    job = Optimization(spec, inputs, progress)
    try:
        if spec.model.framework == "gguf":
            gguf.optimize(spec, report, inputs, job.work, progress)
        else:
            _optimize(job, report, inputs)
    except OptimizationFailed as failure:
        report.phase, report.reason, report.message = "Failed", failure.reason, str(failure)
    except KeyboardInterrupt:
        report.phase, report.reason, report.interrupted = "Failed", "Interrupted", True
        report.message = f"interrupted after {len(report.candidates)} candidates; the rest were not evaluated"
    except Exception as error:  # a bug or an environment problem: still a report, with what was measured
        log.error("optimization failed", error=str(error), exc_info=True)
        report.phase, report.reason = "Failed", "InternalError"
        report.message = (
            f"the optimizer failed unexpectedly ({type(error).__name__}: {error}); the candidates so far are kept"
        )
    finally:
        report.finished_at = datetime.now(UTC)
        report.artifacts = inputs.artifact_uri(inputs.output)
        _write(report, inputs.output)
        shutil.rmtree(job.work, ignore_errors=True)
    return report


def _optimize(job: Optimization, report: OptimizationReport, inputs: Inputs) -> None:
    spec = job.spec
    job.prepare()
    if spec.target.device == "cpu" and spec.passes.float16 is not None:
        report.warnings.append(
            "passes.float16 on a CPU target: ONNX Runtime's CPU kernels are mostly float32, so float16 models "
            "usually run slower there (Cast nodes around each operator); it pays off on GPUs"
        )
    job.progress("measuring the original model (ONNX Runtime's defaults, and with its graph optimizations off)")
    try:
        original, unoptimized, gap = job.measure_original()
    except evaluate.EvaluationError as error:
        raise OptimizationFailed("DatasetMismatch", f"evaluator.accuracy: {error}") from error
    except passes.ModelLoadError as error:
        raise OptimizationFailed("ModelDidNotLoad", f"model.source: {error}") from error
    report.references, report.original = [unoptimized], original
    report.noise_percent = round(gap, 1)
    if gap > MIN_IMPROVEMENT_PERCENT:
        report.warnings.append(
            f"two sessions of the original measured together differed by {gap:.1f}%: this machine is noisy, and "
            f"improvements of that order may be chance (measure again, or on a quieter machine)"
        )
    job.progress(f"original: {_describe(original)}; with graph optimizations off: {unoptimized.latency_ms:.3f} ms")

    def evaluate_plan(plan: CandidatePlan) -> float | None:
        index = len(report.candidates) + 1
        result = job.candidate(index, plan)
        report.candidates.append(result)
        job.progress(
            f"[{index}/{report.planned}] {result.id} {' + '.join(result.passes) or '-'} "
            f"{_settings_text(result)}: {_describe(result)}"
        )
        if result.status == "Failed" or not result.latency_ms or not result.original_latency_ms:
            return None
        # TPE minimises the latency relative to the original measured alongside (drift cancelled); a
        # candidate that loses too much accuracy counts as ten times slower.
        accuracy = spec.evaluator.accuracy
        lost = result.accuracy_degradation
        too_lossy = accuracy is not None and lost is not None and lost > accuracy.max_degradation
        return result.latency_ms / result.original_latency_ms * (10 if too_lossy else 1)

    distinct = len(all_plans(spec, inputs.cpus))
    report.planned = min(spec.search.max_candidates, distinct)
    _, note = run_search(spec, inputs.cpus, evaluate_plan)
    if report.planned < distinct:
        report.warnings.append(note)
    _decide(job, report, inputs)


def _settings_text(result: CandidateResult) -> str:
    keys = ("intraOp", "interOp", "executionMode")
    text = ", ".join(f"{k}={result.parameters[k]}" for k in keys if k in result.parameters)
    return f"({text})" if text else ""


def _decide(job: Optimization, report: OptimizationReport, inputs: Inputs) -> None:
    spec = job.spec
    higher = evaluate.higher_is_better(spec.evaluator.accuracy.metric) if spec.evaluator.accuracy else True
    measured = [*([report.original] if report.original else []), *report.candidates]
    report.frontiers.latency_accuracy, report.frontiers.latency_size = frontier.frontiers(measured, higher)
    chosen = frontier.choose(report.candidates)
    throttled = frontier.throttling_note(measured, spec.evaluator.latency.metric)
    if throttled:
        report.warnings.append(throttled)
    _keep(job, report, inputs, chosen)
    job.progress("profiling the original model" + (f" and {chosen.id}" if chosen else ""))
    report.profiles.append(_profile(job, "original", CandidatePlan(), job.original))
    if chosen is None:
        _profile_fused(job, report, None)
        failed = [c for c in report.candidates if c.status == "Failed"]
        best = frontier.closest(report.candidates)
        report.phase, report.reason = "Failed", "NoCandidateMeetsGoals"
        report.message = f"none of the {len(report.candidates)} candidates meets the goals"
        if best is not None:
            report.message += f"; the fastest, {best.id}, {best.message}"
        if failed:
            report.message += f"; {len(failed)} failed (see their messages)"
        return
    plan = job.plans[chosen.id]
    report.profiles.append(_profile(job, chosen.id, plan, job.model_for(plan)))
    _profile_fused(job, report, chosen)
    report.phase, report.reason = "Succeeded", "Succeeded"
    report.message = (
        f"chose {chosen.id} ({' + '.join(chosen.passes) or 'original'}): {chosen.latency_improvement_percent:.1f}% "
        f"lower {spec.evaluator.latency.metric} latency than the original"
    )
    if chosen.accuracy_degradation is not None:
        change = -chosen.accuracy_degradation + 0.0  # + 0.0: no "-0" for no change
        report.message += f", {spec.evaluator.accuracy.metric} change {change:+.4g}"  # type: ignore[union-attr]


def _profile_fused(job: Optimization, report: OptimizationReport, chosen: CandidateResult | None) -> None:
    """With transformer fusions that did not make the chosen model, a profile of the fastest candidate that has
    them too: the operator types it ran show what the fusions changed, and why they did not win."""
    if chosen is not None and chosen.fused_operators:
        return
    fused = [c for c in report.candidates if c.status == "Succeeded" and c.fused_operators and c.latency_ms]
    if not fused:
        return
    fastest = min(fused, key=lambda c: c.latency_ms or 0.0)
    job.progress(f"profiling {fastest.id}, the fastest candidate with the transformer fusions")
    plan = job.plans[fastest.id]
    report.profiles.append(_profile(job, fastest.id, plan, job.model_for(plan)))


def _profile(job: Optimization, model_id: str, plan: CandidatePlan, model: Path):  # type: ignore[no-untyped-def]
    settings = job.settings(plan)
    return profile_model(
        model,
        model_id,
        job.latency_feeds,
        runs=20,
        session_options=settings.options(),
        providers=list(job.providers),
        batch_size=job.spec.evaluator.latency.batch_size,
    )


def _keep(job: Optimization, report: OptimizationReport, inputs: Inputs, chosen: CandidateResult | None) -> None:
    """Copy the best `output.keep` candidates' models to candidates/<id>/model.onnx and the chosen one to
    best/model.onnx (with its settings in best/settings.json), where follow-ups and users find them."""
    succeeded = [c for c in report.candidates if c.status == "Succeeded" and c.latency_ms is not None]
    ranked = sorted(succeeded, key=lambda c: (not c.meets_goals, c.latency_ms))[: job.spec.output.keep]
    for candidate in ranked:
        target = inputs.output / "candidates" / candidate.id / "model.onnx"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(job.model_for(job.plans[candidate.id]), target)
        candidate.artifact = inputs.artifact_uri(target)
    if chosen is None:
        return
    best = inputs.output / CHOSEN_FILE
    best.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(job.model_for(job.plans[chosen.id]), best)
    settings = runtime_settings(chosen)
    (best.parent / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    report.chosen_settings = settings
    report.chosen = ChosenModel(
        candidate_id=chosen.id,
        artifact=inputs.artifact_uri(best),
        settings=settings,
        latency_ms=chosen.latency_ms,
        model_size_bytes=chosen.model_size_bytes,
        latency_improvement_percent=chosen.latency_improvement_percent,
        accuracy_degradation=chosen.accuracy_degradation,
    )


def runtime_settings(candidate: CandidateResult) -> dict[str, str]:
    """The session settings a server needs to run the candidate as it was measured."""
    keys = ("intraOp", "interOp", "executionMode", "graphOptimization.level")
    found = {k: candidate.parameters[k] for k in keys if k in candidate.parameters}
    if "graphOptimization.level" in found:
        found["graphLevel"] = found.pop("graphOptimization.level")
    return found


def _write(report: OptimizationReport, output: Path) -> None:
    from kaliper.report.optimization_html import write_optimization_html

    output.mkdir(parents=True, exist_ok=True)
    text = report.model_dump_json(by_alias=True, exclude_none=True, indent=2)
    (output / "report.json").write_text(text + "\n")
    write_optimization_html(report, output / "report.html")
