"""An optimization report in words (pure): figures as text, the rows and their colours, the headline and
the summary. It looks like the ProfileRun report (kaliper.report.profile_text): the same palette, the frontier
in crimson, messages kept whole; the terminal, the plots and the HTML page read it from here.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Literal

from kaliper.api.modeloptimization import ChosenModel
from kaliper.report.optimization import CandidateResult, MachineInfo, ModelProfile, OptimizationReport
from kaliper.report.profile_text import SLO_COLOUR, colour

Kind = Literal["reference", "original", "candidate"]


NONE = "—"


FRONTIER_COLOUR = SLO_COLOUR


ACCURACY_MARK = "★"


SIZE_MARK = "◆"


# Escaped: ruff flags the literal characters as look-alikes of "-" and "x".
EN_DASH = "\u2013"


TIMES = "\u00d7"


# Metrics where a lower figure is better (evaluator.accuracy.metric); the others (accuracy, f1, r2) go up.
LOWER_IS_BETTER = frozenset({"mae", "mse", "rmse"})


SYMBOLS: dict[Kind, str] = {"reference": "diamond", "original": "square", "candidate": "circle"}


TRACE_NAMES: dict[Kind, str] = {"reference": "references", "original": "original", "candidate": "candidates"}


_FLOP_PREFIXES = ("", "k", "M", "G", "T", "P")


_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_flops(flops: int) -> str:
    """1200000 -> "1.2 MFLOPs" (decimal prefixes, as FLOPs are usually quoted)."""
    value, prefix = float(flops), 0
    # 999.95 and up would print as "1000.0": move to the next prefix instead.
    while abs(value) >= 999.95 and prefix < len(_FLOP_PREFIXES) - 1:
        value, prefix = value / 1000, prefix + 1
    return f"{value:.0f} FLOPs" if prefix == 0 else f"{value:.1f} {_FLOP_PREFIXES[prefix]}FLOPs"


def format_size(num_bytes: int | None) -> str:
    """10000 -> "9.8 KiB" (binary units, as file sizes are shown by ls -h)."""
    if num_bytes is None:
        return NONE
    value, unit = float(num_bytes), 0
    while value >= 1023.95 and unit < len(_SIZE_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{num_bytes} B" if unit == 0 else f"{value:.1f} {_SIZE_UNITS[unit]}"


def decimals_for(value_ms: float) -> int:
    # Two decimals from 1 ms up; below, three significant digits (a 0.0234 ms model is not "0.02 ms").
    if value_ms >= 1 or value_ms <= 0:
        return 2
    return 2 - math.floor(math.log10(value_ms))


def latency_value(result: CandidateResult) -> float | None:
    """The deciding latency figure, ms: the measurement's, else the footprint's."""
    return result.latency.value_ms if result.latency is not None else result.latency_ms


def format_latency(result: CandidateResult) -> str:
    """The deciding figure with its 95% interval, "1.23 ms (1.20-1.27)" with an en dash; "?" for a bound not
    known (too few runs to bound a tail percentile from above)."""
    value = latency_value(result)
    if value is None:
        return NONE
    digits = decimals_for(value)
    text = f"{value:.{digits}f} ms"
    m = result.latency
    if m is not None and (m.ci_low_ms is not None or m.ci_high_ms is not None):
        low = "?" if m.ci_low_ms is None else f"{m.ci_low_ms:.{digits}f}"
        high = "?" if m.ci_high_ms is None else f"{m.ci_high_ms:.{digits}f}"
        text += f" ({low}{EN_DASH}{high})"
    return text


def number_text(value: float | None, pattern: str = "{:.4g}") -> str:
    return NONE if value is None else pattern.format(value)


def percent_text(value: float | None) -> str:
    return number_text(value, "{:.1f}%")


def yes_no_text(value: bool | None) -> str:
    return NONE if value is None else ("yes" if value else "no")


def passes_text(result: CandidateResult) -> str:
    """The passes in order; the transformer pass with the operators it fused: "transformersOptimization
    (Attention x4, SkipLayerNormalization x8) + quantization"."""
    names = []
    for name in result.passes:
        if name == "transformersOptimization" and result.fused_operators:
            fused = ", ".join(f"{op} {TIMES}{n}" for op, n in result.fused_operators.items())
            name += f" ({fused})"
        names.append(name)
    return " + ".join(names) or NONE


def settings_text(parameters: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in parameters.items()) or NONE


def frontier_marks(report: OptimizationReport, candidate_id: str) -> str:
    """★ on the latency-accuracy frontier, ◆ on the latency-size one, both, or nothing."""
    marks = [
        mark
        for mark, ids in (
            (ACCURACY_MARK, report.frontiers.latency_accuracy),
            (SIZE_MARK, report.frontiers.latency_size),
        )
        if candidate_id in ids
    ]
    return " ".join(marks)


def status_text(result: CandidateResult) -> str:
    return f"{result.status}: {result.message}" if result.message else result.status


def rows(report: OptimizationReport) -> list[tuple[Kind, CandidateResult]]:
    """Every evaluated model in table order: the references, the original, the candidates."""
    found: list[tuple[Kind, CandidateResult]] = [("reference", r) for r in report.references]
    if report.original is not None:
        found.append(("original", report.original))
    found += [("candidate", c) for c in report.candidates]
    return found


def candidate_colours(report: OptimizationReport) -> dict[str, str]:
    """Id -> its colour, the same in every chart and in the table (the ProfileRun palette, in table order)."""
    return {result.id: colour(position) for position, (_, result) in enumerate(rows(report))}


def chosen_id(report: OptimizationReport) -> str | None:
    return report.chosen.candidate_id if report.chosen is not None else None


def _chosen_result(report: OptimizationReport) -> CandidateResult | None:
    wanted = chosen_id(report)
    return next((r for _, r in rows(report) if r.id == wanted), None)


def accuracy_metric(report: OptimizationReport) -> str | None:
    return next((r.accuracy_metric for _, r in rows(report) if r.accuracy_metric), None)


def any_candidate_succeeded(report: OptimizationReport) -> bool:
    return any(c.status == "Succeeded" for c in report.candidates)


def headline(report: OptimizationReport) -> list[str]:
    """What must be read first: the phase with its reason and message, and an interruption."""
    word = "FAILED" if report.phase == "Failed" else report.phase
    line = word + (f" ({report.reason})" if report.reason and report.reason != report.phase else "")
    if report.message:
        line += f": {report.message}"
    lines = [line]
    if report.interrupted:
        lines.append(
            f"INTERRUPTED: the optimization was stopped after {len(report.candidates)} of {report.planned} "
            "candidates; the choice covers only those"
        )
    return lines


def _measured(result: CandidateResult) -> str:
    parts = [format_latency(result)]
    if result.accuracy is not None:
        parts.append(f"{result.accuracy_metric or 'accuracy'} {number_text(result.accuracy)}")
    if result.model_size_bytes is not None:
        parts.append(format_size(result.model_size_bytes))
    return ", ".join(parts)


def _chosen_line(chosen: ChosenModel, result: CandidateResult | None) -> str:
    """The chosen model's figures: ChosenModel's, else its candidate row's."""
    line = f"chosen: {chosen.candidate_id}"
    if result is not None:
        line += f" ({passes_text(result)})"
    improvement = chosen.latency_improvement_percent
    if improvement is None and result is not None:
        improvement = result.latency_improvement_percent
    if improvement is not None:
        line += f", {abs(improvement):.1f}% {'faster' if improvement >= 0 else 'slower'} than the original"
    degradation = chosen.accuracy_degradation
    if degradation is None and result is not None:
        degradation = result.accuracy_degradation
    if degradation is not None:
        # Negative degradation is a gain: say so rather than print "degradation -0.002".
        line += f", accuracy {'degradation' if degradation >= 0 else 'gain'} {number_text(abs(degradation))}"
    if result is not None:
        line += f"; {_measured(result)}"
    return line


def summary_lines(report: OptimizationReport) -> list[str]:
    """The headline, what was searched, the original, the chosen model, the frontiers, artifacts, warnings."""
    lines = headline(report)
    failed = sum(c.status == "Failed" for c in report.candidates)
    searched = f"{report.strategy} search, {len(report.candidates)} of {report.planned} candidates evaluated"
    lines.append(searched + (f" ({failed} failed)" if failed else ""))
    if report.target:
        lines.append("target: " + settings_text(report.target))
    if report.machine is not None:
        lines.append(machine_line(report.machine))
    if report.original is not None:
        lines.append(f"original: {_measured(report.original)}")
    if report.chosen is not None:
        result = _chosen_result(report)
        lines.append(_chosen_line(report.chosen, result))
        settings = report.chosen_settings or (result.parameters if result else {})
        lines.append(f"  settings: {settings_text(settings)}")
        if report.chosen.artifact:
            lines.append(f"  model: {report.chosen.artifact}")
    else:
        lines.append("chosen: none")
    for name, ids in (
        ("latency-accuracy", report.frontiers.latency_accuracy),
        ("latency-size", report.frontiers.latency_size),
    ):
        if ids:
            lines.append(f"{name} frontier: {', '.join(ids)}")
    if report.artifacts:
        lines.append(f"artifacts: {report.artifacts}")
    lines += [f"warning: {w}" for w in report.warnings]
    return lines


def without_estimate(profile: ModelProfile) -> str:
    """The op types the FLOPs estimate leaves out, counted: "Shape x2, Gather" (with a multiplication sign)."""
    counts = Counter(profile.nodes_without_estimate)
    return ", ".join(op if n == 1 else f"{op} {TIMES}{n}" for op, n in counts.items())


def profile_caption(profile: ModelProfile) -> str:
    caption = (
        f"{profile.parameters:,} parameters; {format_flops(profile.flops)} per inference (batch {profile.batch_size})"
    )
    if profile.nodes_without_estimate:
        caption += f", a lower bound: no estimate for {without_estimate(profile)}"
    if profile.kernel_time_us is not None:
        caption += f"; kernel time {profile.kernel_time_us:,.1f} µs per inference over {profile.runs} runs"
    if profile.layout is not None:
        caption += f"; ran in {layout_text(profile.layout, profile.nchwc_block_size)}"
    return caption


def layout_text(layout: str, block_size: int | None) -> str:
    """ "NCHWc, 16-channel blocks (operator FLOPs include the padding to whole blocks)", or the layout alone."""
    if layout == "NCHWc" and block_size:
        return f"NCHWc, {block_size}-channel blocks (operator FLOPs include the padding to whole blocks)"
    return layout


def machine_line(machine: MachineInfo) -> str:
    """ "machine: AMD EPYC (x86_64: AVX2, AVX512F), ONNX Runtime 1.32.0, NCHWc blocks of 16 channels"."""
    sets = f": {', '.join(machine.instruction_sets)}" if machine.instruction_sets else ""
    block = f"NCHWc blocks of {machine.nchwc_block_size} channels" if machine.nchwc_block_size else "no NCHWc layout"
    return f"machine: {machine.cpu} ({machine.architecture}{sets}), ONNX Runtime {machine.onnxruntime}, {block}"


def time_us_text(value: float | None) -> str:
    return number_text(value, "{:,.1f}")


def flops_text(value: int | None) -> str:
    return NONE if value is None else format_flops(value)


def profile_label(report: OptimizationReport, profile: ModelProfile) -> str:
    return profile.model + (" (chosen)" if profile.model == chosen_id(report) else "")
