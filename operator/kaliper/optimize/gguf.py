"""GGUF models (llama.cpp): llama-quantize makes one candidate per quantization type; each candidate is served
by llama-server beside the original, both inside the optimizer's CPU limit, and the two are asked the same
prompts in turn, greedily. Speed is the time per generated token (and prompt tokens per second), measured in
alternation so that drift hits both alike; quality is how much of the original's greedy answer the candidate
reproduces before the two first differ (after that, each continues from a different text, and comparing
token by token would mean nothing).

The original is first measured against a twin of itself (a second server on the same file): how far the two
differ is this machine's noise, which a candidate must beat unless minImprovementPercent says otherwise."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from kaliper.api.modeldeployment import ModelDeploymentTemplate
from kaliper.api.modeloptimization import ChosenModel, GenerationEvaluator, ModelOptimizationSpec
from kaliper.measure.cpu import throttling
from kaliper.netutil import free_port
from kaliper.optimize import evaluate, frontier
from kaliper.optimize.context import Inputs, OptimizationFailed, Progress
from kaliper.optimize.followups import CHOSEN_GGUF
from kaliper.processes import wait_or_kill
from kaliper.report.optimization import CandidateResult, LatencyMeasurement, OptimizationReport
from kaliper.runtimes.llamacpp import LLAMA_QUANTIZE, LLAMA_SERVER, gguf_problem, llama_binary, llamacpp_args

AGREEMENT = "greedyAgreement"
READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Answer:
    """One greedy completion: its token ids and llama.cpp's own timings of it."""

    tokens: list[int]
    prompt_tokens: int
    prompt_ms: float
    predicted_tokens: int
    predicted_ms: float


def agreement(original: list[int], candidate: list[int]) -> float:
    """The share of the original's tokens the candidate reproduced before the first difference."""
    if not original:
        return 1.0
    same = 0
    for mine, theirs in zip(original, candidate, strict=False):
        if mine != theirs:
            break
        same += 1
    return same / len(original)


def per_token_figures(answers: list[Answer]) -> LatencyMeasurement:
    """Milliseconds per generated token, one sample per answer (llama.cpp's prediction time over its
    tokens), with a 95% interval of the mean."""
    samples = [a.predicted_ms / a.predicted_tokens for a in answers if a.predicted_tokens]
    if not samples:
        raise OptimizationFailed("NoTokens", "llama-server generated no tokens; check the prompts and the model")
    return evaluate.latency_figures(samples, "avg")


def prompt_tokens_per_second(answers: list[Answer]) -> float:
    milliseconds = sum(a.prompt_ms for a in answers)
    return round(sum(a.prompt_tokens for a in answers) / milliseconds * 1000, 1) if milliseconds else 0.0


def read_prompts(path: Path | None, count: int) -> list[str]:
    if path is None:
        raise OptimizationFailed("DatasetMissing", "evaluator.generation.dataset: no file to read")
    prompts = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise OptimizationFailed(
                "DatasetMismatch", f"evaluator.generation.dataset line {number}: not JSON ({error})"
            ) from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"]:
            raise OptimizationFailed(
                "DatasetMismatch",
                f'evaluator.generation.dataset line {number}: expected {{"prompt": "..."}}, got {line[:120]}',
            )
        prompts.append(row["prompt"])
        if len(prompts) == count:
            break
    if not prompts:
        raise OptimizationFailed("DatasetMismatch", 'evaluator.generation.dataset: no {"prompt": ...} rows')
    return prompts


def check_gguf(path: Path) -> None:
    if (problem := gguf_problem(str(path), "model.framework gguf")) is not None:
        raise OptimizationFailed("ModelDidNotLoad", f"model.source: {problem}")


def quantize(original: Path, kind: str, target: Path, threads: int) -> None:
    """llama-quantize ORIGINAL TARGET TYPE THREADS; CalledProcessError carries its output."""
    target.parent.mkdir(parents=True, exist_ok=True)
    command = [llama_binary(LLAMA_QUANTIZE), str(original), str(target), kind, str(threads)]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=3600)


class Server:
    """One llama-server on loopback serving one file, asked for greedy completions."""

    def __init__(self, model: Path, threads: int, slots: int, log: Path) -> None:
        self.model, self.port = model, free_port()
        # Started as the runtime starts it for a ModelDeployment (kaliper.runtimes.llamacpp), with these slots and
        # threads: what the optimizer measures is what serving the file would give.
        serving = ModelDeploymentTemplate.model_validate(
            {"runtime": {"type": "llamacpp"}, "llm": {"slots": slots}, "threads": {"intraOp": threads}}
        )
        command = [llama_binary(LLAMA_SERVER), *llamacpp_args(serving, str(model), model.stem, "127.0.0.1", self.port)]
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=300, trust_env=False)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
                raise OptimizationFailed(
                    "ModelDidNotLoad", f"llama-server could not serve {self.model.name}: {' / '.join(tail)}"
                )
            try:
                if self.client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise OptimizationFailed("ModelDidNotLoad", f"llama-server was not ready within {READY_TIMEOUT_S:g}s")

    def complete(self, prompt: str, max_tokens: int) -> Answer:
        body = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0,  # greedy: the same model answers the same way, so answers compare
            "cache_prompt": False,  # every prompt processed in full, for every model alike
            "return_tokens": True,
        }
        answer = self.client.post("/completion", json=body)
        answer.raise_for_status()
        data = answer.json()
        timings = data["timings"]
        return Answer(
            tokens=list(data.get("tokens") or []),
            prompt_tokens=int(timings["prompt_n"]),
            prompt_ms=float(timings["prompt_ms"]),
            predicted_tokens=int(timings["predicted_n"]),
            predicted_ms=float(timings["predicted_ms"]),
        )

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.terminate()
            wait_or_kill(self.process, 10)


@contextmanager
def serving(model: Path, threads: int, slots: int, log: Path) -> Iterator[Server]:
    server = Server(model, threads, slots, log)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@dataclass
class Paired:
    """Two models asked the same prompts in alternation."""

    reference: list[Answer]
    other: list[Answer]
    throttled_percent: float | None


def ask_in_turn(reference: Server, other: Server, prompts: list[str], evaluator: GenerationEvaluator) -> Paired:
    """Every prompt to both, `rounds` times; who goes first alternates by round, so drift hits both alike."""
    before = throttling()
    mine: list[Answer] = []
    theirs: list[Answer] = []
    for round_number in range(evaluator.rounds):
        for prompt in prompts:
            pair = (reference, other) if round_number % 2 == 0 else (other, reference)
            answers = {id(s): s.complete(prompt, evaluator.max_tokens) for s in pair}
            mine.append(answers[id(reference)])
            theirs.append(answers[id(other)])
    after = throttling()
    throttled = None
    if before is not None and after is not None and after[0] > before[0]:
        throttled = round(100 * (after[1] - before[1]) / (after[0] - before[0]), 1)
    return Paired(mine, theirs, throttled)


def result_of(candidate_id: str, kind: str | None, pair: Paired, prompts: int, model: Path) -> CandidateResult:
    """A candidate's figures from its answers beside the original's (the first round's answers for
    agreement: greedy answers repeat)."""
    figures, original = per_token_figures(pair.other), per_token_figures(pair.reference)
    agreed = statistics.fmean(
        agreement(o.tokens, c.tokens) for o, c in zip(pair.reference[:prompts], pair.other[:prompts], strict=True)
    )
    improvement = (original.value_ms - figures.value_ms) / original.value_ms * 100
    parameters = {
        "generationTokensPerSecond": f"{1000 / figures.value_ms:.1f}",
        "promptTokensPerSecond": f"{prompt_tokens_per_second(pair.other):.1f}",
    }
    return CandidateResult(
        id=candidate_id,
        passes=["ggufQuantization"] if kind else [],
        parameters={**({"type": kind} if kind else {}), **parameters},
        latency=figures,
        latency_ms=figures.value_ms,
        latency_ci_low_ms=figures.ci_low_ms,
        latency_ci_high_ms=figures.ci_high_ms,
        original_latency_ms=original.value_ms,
        latency_improvement_percent=round(improvement, 2),
        accuracy=round(agreed, 4),
        accuracy_metric=AGREEMENT,
        accuracy_degradation=round(1 - agreed, 4),
        model_size_bytes=model.stat().st_size,
        throttled_percent=pair.throttled_percent,
    )


def goal_problems(result: CandidateResult, evaluator: GenerationEvaluator, noise_percent: float) -> list[str]:
    problems = []
    if result.accuracy is not None and result.accuracy < evaluator.min_agreement:
        problems.append(
            f"reproduces {result.accuracy:.0%} of the original's greedy tokens, less than "
            f"evaluator.generation.minAgreement={evaluator.min_agreement:g}"
        )
    improvement = result.latency_improvement_percent or 0.0
    wanted = evaluator.min_improvement_percent
    if wanted is not None and improvement < wanted:
        setting = f"evaluator.generation.minImprovementPercent={wanted:g}"
        problems.append(frontier.short_of(improvement, wanted, setting, "less", "more", " time per token"))
    elif wanted is None and (improvement <= noise_percent or frontier.within_noise(result)):
        problems.append(f"not faster than the original beyond the noise ({improvement:.1f}%, noise {noise_percent:g}%)")
    return problems


def optimize(
    spec: ModelOptimizationSpec, report: OptimizationReport, inputs: Inputs, work: Path, progress: Progress
) -> None:
    """Quantize, measure each candidate beside the original, decide and keep the files (the report says what
    happened; an OptimizationFailed ends it early with the reason)."""
    model = inputs.model
    evaluator = spec.evaluator.generation
    kinds = spec.passes.gguf_quantization.types if spec.passes.gguf_quantization else []
    assert evaluator is not None, "the CRD's rules: GGUF models have evaluator.generation"
    check_gguf(model)
    prompts = read_prompts(inputs.dataset, evaluator.prompts)
    threads = max(1, math.ceil(inputs.cpus - 1e-9))
    work.mkdir(parents=True, exist_ok=True)
    report.planned = len(kinds)
    try:
        llama_binary(LLAMA_SERVER), llama_binary(LLAMA_QUANTIZE)
    except FileNotFoundError as missing:
        raise OptimizationFailed("ToolMissing", f"GGUF optimization needs {missing}") from None
    progress(f"measuring the original against a twin of itself ({len(prompts)} prompts x {evaluator.rounds} rounds)")
    with serving(model, threads, evaluator.slots, work / "original.log") as original:
        with serving(model, threads, evaluator.slots, work / "twin.log") as twin:
            original_result = result_of(
                "original", None, ask_in_turn(original, twin, prompts, evaluator), len(prompts), model
            )
        noise = abs(original_result.latency_improvement_percent or 0.0)
        report.noise_percent = round(noise, 1)
        if original_result.accuracy is not None and original_result.accuracy < 1:
            report.warnings.append(
                f"the original and a twin of it (the same file) agreed on only {original_result.accuracy:.0%} of their "
                "greedy tokens: decoding is not deterministic on this machine, and every agreement figure carries "
                "that noise"
            )
        report.original = original_result.model_copy(
            update={"latency_improvement_percent": 0.0, "accuracy": 1.0, "accuracy_degradation": 0.0}
        )
        progress(
            f"original: {original_result.original_latency_ms:.3f} ms per token; its twin differed by {noise:.1f}%, "
            f"agreeing on {original_result.accuracy:.0%} of greedy tokens"
        )
        files: dict[str, Path] = {}
        for index, kind in enumerate(kinds, 1):
            candidate_id = kind.lower()
            target = work / "candidates" / candidate_id / "model.gguf"
            try:
                quantize(model, kind, target, threads)
            except subprocess.CalledProcessError as error:
                tail = " / ".join((error.stdout + error.stderr).strip().splitlines()[-2:])
                failed = CandidateResult(id=candidate_id, passes=["ggufQuantization"], parameters={"type": kind})
                failed.status, failed.meets_goals, failed.message = "Failed", False, f"llama-quantize failed: {tail}"
                report.candidates.append(failed)
                continue
            with serving(target, threads, evaluator.slots, work / f"{candidate_id}.log") as server:
                paired = ask_in_turn(original, server, prompts, evaluator)
            result = result_of(candidate_id, kind, paired, len(prompts), target)
            problems = goal_problems(result, evaluator, noise)
            result.meets_goals, result.message = not problems, "; ".join(problems) or None
            files[candidate_id] = target
            report.candidates.append(result)
            progress(
                f"[{index}/{len(kinds)}] {kind}: {result.latency_ms:.3f} ms per token "
                f"({result.latency_improvement_percent:+.1f}% against the original), "
                f"{result.model_size_bytes / 1e6:.1f} MB, agreement {result.accuracy:.0%}: "
                + ("meets the goals" if result.meets_goals else f"misses: {result.message}")
            )
    decide(report, files, inputs.output, inputs.artifact_uri)


def decide(
    report: OptimizationReport, files: dict[str, Path], output: Path, artifact_uri: Callable[[Path], str]
) -> None:
    measured = [*([report.original] if report.original else []), *report.candidates]
    report.frontiers.latency_accuracy, report.frontiers.latency_size = frontier.frontiers(measured, True)
    note = frontier.throttling_note(measured, "avg")
    if note:
        report.warnings.append(note)
    chosen = frontier.choose(report.candidates)
    for candidate in report.candidates:
        if candidate.id in files:
            kept = output / "candidates" / candidate.id / "model.gguf"
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(files[candidate.id], kept)
            candidate.artifact = artifact_uri(kept)
    if chosen is None:
        best = frontier.closest(report.candidates)
        report.phase, report.reason = "Failed", "NoCandidateMeetsGoals"
        report.message = f"none of the {len(report.candidates)} quantizations meets the goals"
        if best is not None:
            report.message += f"; the fastest, {best.id}, {best.message}"
        return
    best_file = output / CHOSEN_GGUF
    best_file.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(files[chosen.id], best_file)
    settings = {"type": chosen.parameters["type"]}
    report.chosen_settings = settings
    report.chosen = ChosenModel(
        candidate_id=chosen.id,
        artifact=artifact_uri(best_file),
        settings=settings,
        latency_ms=chosen.latency_ms,
        model_size_bytes=chosen.model_size_bytes,
        latency_improvement_percent=chosen.latency_improvement_percent,
        accuracy_degradation=chosen.accuracy_degradation,
    )
    report.phase, report.reason = "Succeeded", "Succeeded"
    report.message = (
        f"chose {chosen.parameters['type']}: {chosen.latency_improvement_percent:.1f}% less time per generated "
        f"token than the original, {chosen.model_size_bytes / 1e6:.1f} MB, reproducing {chosen.accuracy:.0%} of "
        "its greedy tokens"
    )
