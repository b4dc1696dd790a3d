"""A profile report in words (pure): the figures each trial is shown with, its colour, the headline,
the summary lines and the messages; the terminal, the plots and the HTML page all read them from here.
"""

from __future__ import annotations

from collections import defaultdict

from kaliper.api.profilerun import LengthDistribution
from kaliper.api.profilerun.status import Capacity
from kaliper.api.units import UnitError, format_memory, parse_cpu, parse_duration
from kaliper.measure.figures import LATENCY, TPOT, TTFT, Figure
from kaliper.report.ramp_text import segment_text
from kaliper.report.recommend import resources_text
from kaliper.report.rehearsal_text import rehearsal_lines
from kaliper.report.replay_text import replay_lines
from kaliper.report.schema import ConfigurationRow, PercentileFigure, ProfileReport, Startup, TrialReport
from kaliper.report.token_text import token_summary

# One colour per trial, never reused within a report: plotly's ten, then its 24 darker ones, then hues spaced
# by the golden angle (distinct however many trials there are).
PALETTE = (
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF", "#FECB52",
    "#2E91E5", "#E15F99", "#1CA71C", "#FB0D0D", "#DA16FF", "#222A2A", "#B68100", "#750D86", "#EB663B", "#511CFB",
    "#00A08B", "#FB00D1", "#FC0080", "#B2828D", "#6C7C32", "#778AAE", "#862A16", "#A777F1", "#620042", "#1616A7",
    "#DA60CA", "#6C4516", "#0D2A63", "#AF0038",
)  # fmt: skip


SLO_COLOUR = "crimson"


# What a generation run's tables lead with (its headline latency figure), beside output tokens per second.
HEADLINE_TOKEN_FIGURE = TTFT


def percentile_at(trial: TrialReport, row: Figure, percentile: float) -> PercentileFigure | None:
    """A trial's percentile of a catalogue figure, with its interval (None: not measured)."""
    holder = (trial.stage.tokens if row.token else trial.stage) if trial.stage is not None else None
    return getattr(holder, row.report).at(percentile) if holder is not None else None


def figure_at(trial: TrialReport, row: Figure, percentile: float) -> float | None:
    """A trial's percentile of a catalogue figure, in ms (None: not measured)."""
    found = percentile_at(trial, row, percentile)
    return found.value_ms if found else None


def latency_at(trial: TrialReport, percentile: float) -> float | None:
    return figure_at(trial, LATENCY, percentile)


def settings_text(trial: TrialReport) -> str:
    """The settings the runtime derived from the trial's limits, in a line."""
    return ", ".join(f"{name} {value}" for name, value in trial.server_settings.items()) + " (from the limits)"


def headline_figures(trial: TrialReport, tokens: bool) -> tuple[float | None, float | None, float | None]:
    """(throughput, p50, p99) the tables show: output tokens per second and time to first token for a
    generation run, requests per second and latency otherwise."""
    if tokens:
        figures = trial.stage.tokens if trial.stage is not None else None
        rate = figures.output_tokens_per_s if figures is not None else None
        return rate, figure_at(trial, HEADLINE_TOKEN_FIGURE, 50), figure_at(trial, HEADLINE_TOKEN_FIGURE, 99)
    return trial.stage.throughput_rps if trial.stage else None, latency_at(trial, 50), latency_at(trial, 99)


def fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def parameters_text(trial: TrialReport) -> str:
    return ", ".join(f"{k}={v}" for k, v in trial.parameters.items())


def configuration_text(configuration: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in configuration.items()) or "as deployed"


def configuration_label(trial: TrialReport) -> str:
    return configuration_text(trial.configuration())


def colour(position: int) -> str:
    """The colour of the position-th trial of a report."""
    if position < len(PALETTE):
        return PALETTE[position]
    return f"hsl({(position - len(PALETTE)) * 137.508 % 360:.1f}, 70%, 42%)"


def trial_colours(report: ProfileReport) -> dict[int, str]:
    """Trial index -> its colour, the same in every chart and in the table."""
    return {trial.index: colour(position) for position, trial in enumerate(report.trials)}


def slo_bounds_ms(report: ProfileReport) -> dict[float, float]:
    """The latency bounds of the run's SLO (on whole requests' latency), percentile -> ms, as the report
    carries the objectives."""
    objectives = report.slo.latency if report.slo is not None else []
    return dict(sorted((o.percentile, parse_duration(o.max) * 1000) for o in objectives if o.metric == "latency"))


def cpu_limit_cores(trial: TrialReport) -> float | None:
    """The trial's CPU limit summed over its replicas, when CPU is one of the swept parameters; None when it
    is not known from the report."""
    value = trial.parameters.get("cpu")
    if value is None:
        return None
    try:
        return float(parse_cpu(value)) * max(trial.replicas, 1)
    except UnitError:
        return None


def all_failed(report: ProfileReport) -> bool:
    return bool(report.trials) and not any(t.status == "Succeeded" for t in report.trials)


def headline(report: ProfileReport) -> list[str]:
    """What must be read first: a run that failed, a run that was interrupted (one line each)."""
    lines = []
    if report.error:
        lines.append(f"FAILED: {report.error}")
    elif all_failed(report):
        first = next((t.message for t in report.trials if t.status == "Failed" and t.message), None)
        lines.append("FAILED: no trial succeeded" + (f"; the first failure: {first}" if first else ""))
    if report.interrupted:
        finished = sum(t.status != "Skipped" for t in report.trials)
        lines.append(
            f"INTERRUPTED: the run was stopped after {finished} of {len(report.trials)} trials; the verdict "
            "and the best configuration cover only those"
        )
    return lines


def slo_detail(trial: TrialReport) -> list[str]:
    return [f"{c.objective}: {c.observed} ({c.verdict})" for c in trial.slo]


def generator_text(trial: TrialReport) -> str:
    usage = trial.stage.generator_usage if trial.stage else None
    if usage is None:
        return "-"
    return f"{usage.cpu_cores:.2f} of {usage.capacity_cores:g} cores ({usage.saturation:.0%})"


def throttled_text(trial: TrialReport) -> str:
    r = trial.resources
    return fmt(r.cpu_throttled_ratio * 100 if r and r.cpu_throttled_ratio is not None else None, "{:.0f}%")


def memory_peak_text(trial: TrialReport) -> str:
    r = trial.resources
    return format_memory(r.memory_peak_bytes) if r and r.memory_peak_bytes else "-"


def generates(report: ProfileReport) -> bool:
    """A generation run: its costs are per million output tokens."""
    return any(t.generates for t in report.trials)


def cost_unit(report: ProfileReport) -> str:
    return "output tokens" if generates(report) else "requests"


def trial_messages(report: ProfileReport) -> list[str]:
    """The whole message of every trial that did not succeed (trials skipped for the same reason together)."""
    lines = []
    skipped: dict[str, list[int]] = defaultdict(list)
    for trial in report.trials:
        if trial.status == "Succeeded" or not trial.message:
            continue
        if trial.status == "Skipped":
            skipped[trial.message].append(trial.index)
        else:
            lines.append(f"trial {trial.index} {trial.status}: {trial.message}")
    for message, indices in skipped.items():
        which = f"trial {indices[0]}" if len(indices) == 1 else "trials " + ", ".join(map(str, indices))
        lines.append(f"{which} Skipped: {message}")
    return lines + error_lines(report)


def error_lines(report: ProfileReport) -> list[str]:
    """Each measured trial's errors by kind, with the server's own words for each kind."""
    lines = []
    for trial in report.trials:
        stage = trial.stage
        if stage is None or not stage.errors_by_kind:
            continue
        kinds = ", ".join(f"{kind} x{count}" for kind, count in stage.errors_by_kind.items())
        lines.append(f"trial {trial.index} errors: {kinds}")
        lines += [f"  {kind}: {text}" for kind, texts in stage.error_messages.items() for text in texts]
    return lines


def replicas_interval(low: int | None, high: int | None) -> str:
    """ " (95%: 3-4)", or nothing without an interval."""
    if low is None:
        return ""
    return f" (95%: {low}-{high if high is not None else 'unbounded'})"


def capacity_lines(report: ProfileReport) -> list[str]:
    """One line per configuration: where its capacity lies, and its cost and replicas there."""
    lines = []
    for capacity in report.capacities:
        where = "".join(f" {k}={v}" for k, v in capacity.parameters.items())
        line = f"capacity{where}: {capacity.level_name} {capacity.interval_text()}"
        if capacity.unit_cost is not None:
            high = fmt(capacity.unit_cost_high, "{:.4f}")
            line += (
                f"; {capacity.unit_cost:.4f} {report.currency} per million {cost_unit(report)} there "
                f"(95%: {fmt(capacity.unit_cost_low, '{:.4f}')}-{high})"
            )
        if capacity.replicas is not None:
            line += f"; {capacity.replicas} replicas{replicas_interval(capacity.replicas_low, capacity.replicas_high)}"
        if capacity.probes:
            line += f"; {capacity.probes} probes"
        lines.append(line)
    return lines


def workload_lines(report: ProfileReport) -> list[str]:
    """The workload fitted from Prometheus that every trial sent: what it became, then how well it fits."""
    fitted = report.workload
    if fitted is None:
        return []

    def lengths(name: str, spec: LengthDistribution | None) -> str:
        if spec is None:
            return f"{name} request.generation.maxTokens"
        bounds = f", {spec.min}-{spec.max}" if spec.max is not None else f", from {spec.min}"
        return f"{name} {spec.distribution} mean {spec.mean} stddev {spec.stddev:g}{bounds}"

    prompts = fitted.prompts
    made = [lengths("input tokens", prompts.input_tokens), lengths("output tokens", prompts.output_tokens)]
    if prompts.shared_prefix_ratio:
        made.append(f"shared prefix {prompts.shared_prefix_ratio:g}")
    arrivals = fitted.open_loop
    if arrivals is not None:
        shape = f" (burstiness {arrivals.burstiness:g})" if arrivals.burstiness is not None else ""
        made.append(f"{arrivals.arrival} arrivals at {arrivals.rate:g}/s{shape}")
    return [f"workload fitted from {fitted.source}: " + "; ".join(made), *(f"  {line}" for line in fitted.fit)]


def baseline_lines(report: ProfileReport) -> list[str]:
    """This run against its baseline: the counts, then each regression and each configuration not compared."""
    found = report.baseline
    if found is None:
        return []
    lines = [
        f"baseline {found.source}: {found.figures} figures compared, {found.worse} worse and {found.better} better "
        f"beyond the noise, {len(found.regressions)} regressed beyond the tolerance"
    ]
    lines += [f"  regressed: {line}" for line in found.regressions]
    lines += [f"  not compared: {line}" for line in found.not_compared]
    return lines


def summary_lines(report: ProfileReport) -> list[str]:
    lines = [f"verdict: {report.verdict}" + (f" ({report.verdict_reason})" if report.verdict_reason else "")]
    if report.best_trial is not None:
        best = next(t for t in report.trials if t.index == report.best_trial)
        throughput = f"{best.stage.throughput_rps:.1f}" if best.stage else "-"
        tokens = best.stage.tokens if best.stage else None
        if tokens is not None:
            tails = ", ".join(f"{row.label} p99 {fmt(figure_at(best, row, 99))} ms" for row in (TTFT, TPOT))
            figures = f"{tokens.output_tokens_per_s:.0f} output tok/s ({throughput} ok/s), {tails}"
            cost = (
                f"{fmt(best.cost_per_million_output_tokens, '{:.4f}')} {report.currency} per million output tokens "
                f"({fmt(best.cost_per_million_tokens, '{:.4f}')} per million tokens in and out)"
            )
        else:
            figures = f"{throughput} ok/s, p99 {fmt(latency_at(best, 99))} ms"
            cost = f"{fmt(best.cost_per_million_requests, '{:.4f}')} {report.currency} per million requests"
        lines.append(f"best: trial {best.index} ({parameters_text(best)}), {figures}, {cost}")
        for detail in slo_detail(best):
            lines.append(f"  SLO {detail}")
        if report.choice is not None:
            lines.append(f"  choice {report.choice.certainty.lower()}: {report.choice.explanation}")
    lines += [f"not chosen: {label}: {why}" for label, why in others(report)]
    r = report.recommendation
    if r is not None:
        resources = resources_text(r)
        replicas = f"replicas={r.replicas}{replicas_interval(r.replicas_low, r.replicas_high)}"
        lines.append(f"recommendation: {resources}; {replicas}" if resources else f"recommendation: {replicas}")
        lines.append(f"  ({r.rationale})")
    lines += capacity_lines(report)
    lines += workload_lines(report)
    lines += baseline_lines(report)
    for trial in report.trials:
        lines += [f"trial {trial.index} {line}" for line in trial_detail_lines(trial)]
    lines += run_notes(report)
    return lines


def startup_text(startup: Startup) -> str:
    """How long the servers took to become ready: after their processes started, or (pods) after their
    creation, with the slowest pod's stages."""
    if startup.source == "processes":
        return f"ready {startup.ready_s:.1f} s after the servers started"
    slowest = max(startup.replicas, key=lambda r: r.ready_s)
    stages = (("scheduled", slowest.scheduled_s), ("running", slowest.started_s), ("ready", slowest.ready_s))
    steps = ", ".join(f"{word} at {at:.0f} s" for word, at in stages if at is not None)
    pods = f"the slowest of {len(startup.replicas)} pods" if len(startup.replicas) > 1 else "its pod"
    return f"ready {startup.ready_s:.0f} s after the pods were created ({pods}: {steps})"


def trial_detail_lines(trial: TrialReport) -> list[str]:
    """What the table has no room for: the server's settings, the token figures with the server's own
    check, what limited the trial, its repetitions."""
    lines = []
    if trial.server_settings:
        lines.append(f"server: {settings_text(trial)}")
    if trial.startup is not None:
        lines.append(f"startup: {startup_text(trial.startup)}")
    if trial.rehearsal is not None:
        lines += rehearsal_lines(trial.rehearsal)
    if trial.stage is not None and trial.stage.tokens is not None:
        lines.append(f"tokens: {token_summary(trial.stage.tokens)}")
    lines += [f"limited: {flag}" for flag in trial.limited_by]
    if trial.stage is not None:
        lines += [segment_text(segment) for segment in trial.stage.segments]
        lines += replay_lines(trial.stage)
    if trial.repetitions:
        verdicts = ", ".join(r.slo_verdict or "-" for r in trial.repetitions)
        rates = ", ".join(f"{r.throughput_rps:.1f}" for r in trial.repetitions)
        lines.append(f"repetitions: {rates} ok/s (spread {fmt(trial.spread, '{:.1%}')}); SLO {verdicts}")
    return lines


def run_notes(report: ProfileReport) -> list[str]:
    """The run's warnings and what its load generation took."""
    lines = [f"warning: {warning}" for warning in report.warnings]
    lines.append(f"load generation: {report.load_generation_s:.0f} s over {len(report.trials)} trials")
    return lines


def capacity_for(report: ProfileReport, configuration: dict[str, str]) -> Capacity | None:
    """A configuration's capacity, where the report has one."""
    return next((c for c in report.capacities if c.parameters == configuration), None)


def _held_back(report: ProfileReport, row: ConfigurationRow) -> str:
    """Why one configuration was not chosen, in a line, from the choice's row."""
    capacity = capacity_for(report, row.parameters)
    parts = [f"{capacity.level_name} {capacity.interval_text()}"] if capacity is not None else []
    if not row.qualified:
        parts.append(row.reason)
    else:
        if row.cost is not None:
            change = f", {row.cost_change:+.1%} against the choice" if row.cost_change is not None else ""
            parts.append(f"{row.cost:.4f} {report.currency} per million {cost_unit(report)}{change}")
        if row.tied or row.cost is None:  # a plain "costs more" is what the figures already say
            parts.append(row.reason)
    trials = [t for t in report.trials if t.index in row.trials]
    where = capacity.trial if capacity is not None and capacity.trial is not None else None
    limiting = next((t for t in trials if t.index == where), None) or trials[-1]
    if limiting.limited_by:
        parts.append(f"limited by {limiting.limited_by[0]}")
    return "; ".join(parts)


def others(report: ProfileReport) -> list[tuple[str, str]]:
    """(configuration, what held it back) for every configuration but the chosen one, as the choice's rows say."""
    return [
        (configuration_text(row.parameters), _held_back(report, row)) for row in report.configurations if not row.chosen
    ]
