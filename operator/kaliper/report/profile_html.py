"""A profile report as an HTML page that opens offline, answer first: which configuration to run and why,
then one compact row per trial (verdicts as coloured words, intervals on hover), one chart per question,
and every trial's details folded away."""

from __future__ import annotations

import html
from pathlib import Path

from kaliper.measure.figures import LATENCY
from kaliper.report.page import cell, header_row, page, write_page
from kaliper.report.profile_answer import answer_rows
from kaliper.report.profile_plots import figures
from kaliper.report.profile_text import (
    HEADLINE_TOKEN_FIGURE,
    all_failed,
    baseline_lines,
    capacity_lines,
    cost_unit,
    fmt,
    generates,
    generator_text,
    headline,
    headline_figures,
    memory_peak_text,
    others,
    parameters_text,
    percentile_at,
    run_notes,
    slo_detail,
    throttled_text,
    trial_colours,
    trial_detail_lines,
    workload_lines,
)
from kaliper.report.schema import ProfileReport, TrialReport


def _span(text: str, css: str, title: str = "") -> str:
    hover = f' title="{html.escape(title)}"' if title else ""
    return f'<span class="{css}"{hover}>{html.escape(text)}</span>'


def _interval(trial: TrialReport, tokens: bool, percentile: float) -> str:
    """The 95% interval of the percentile the table shows, for the hover."""
    found = percentile_at(trial, HEADLINE_TOKEN_FIGURE if tokens else LATENCY, percentile)
    if found is None or found.ci_low_ms is None:
        return ""
    return f"95% interval {found.ci_low_ms:.2f}-{fmt(found.ci_high_ms)} ms from {found.count} requests"


def _result(trial: TrialReport) -> str:
    """The trial's verdict as a coloured word (its checks on hover), or why it has none."""
    if trial.status != "Succeeded":
        return _span(trial.status, f"verdict v-{trial.status}", trial.message or "")
    verdict = trial.slo_verdict or "no SLO"
    return _span(verdict, f"verdict v-{verdict.replace(' ', '')}", "\n".join(slo_detail(trial)))


def _trial_row(report: ProfileReport, trial: TrialReport, trial_colour: str) -> str:
    stage, resources = trial.stage, trial.resources
    tokens = generates(report)
    chosen = trial.index == report.best_trial
    swatch = f'<span class="swatch" style="background:{html.escape(trial_colour)}"></span>'
    errors = ""
    if stage and stage.errors_by_kind:
        errors = ", ".join(f"{kind} x{count}" for kind, count in stage.errors_by_kind.items())
    rate, p50, p99 = headline_figures(trial, tokens)
    cpu_title = f"throttled {throttled_text(trial)}; load generator {generator_text(trial)}"
    return (
        f'<tr class="{"chosen" if chosen else ""}">'
        + f"<td>{swatch}{trial.index}{' ★' if chosen else ''}</td>"
        + cell(parameters_text(trial), "parameters")
        + f"<td>{_result(trial)}</td>"
        + cell(fmt(rate, "{:.1f}"), "number")
        + cell(fmt(p50), "number", _interval(trial, tokens, 50))
        + cell(fmt(p99), "number", _interval(trial, tokens, 99))
        + cell(fmt(stage.error_rate * 100 if stage else None, "{:.2f}%"), "number", errors)
        + cell(fmt(resources.cpu_avg_cores if resources else None, "{:.3f}"), "number", cpu_title)
        + cell(memory_peak_text(trial), "number")
        + cell(fmt(trial.unit_cost(), "{:.4f}"), "number")
        + "</tr>"
    )


def _answer(report: ProfileReport) -> str:
    rows = ""
    for what, said in answer_rows(report):
        if what == "verdict":  # the word in its colour, the reason after it
            shown = _span(report.verdict, f"verdict v-{report.verdict}") + html.escape(said[len(report.verdict) :])
        else:
            shown = html.escape(said)
        rows += f"<tr><th>{html.escape(what)}</th><td>{shown}</td></tr>"
    held = others(report)
    held_back = (
        "<h3>The other configurations</h3><ul>"
        + "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(why)}</li>" for label, why in held)
        + "</ul>"
        if held
        else ""
    )
    return f'<section class="answer"><table>{rows}</table>{held_back}</section>'


def _trial_details(report: ProfileReport, trial: TrialReport) -> str:
    lines = [trial.message] if trial.message else []
    lines += [f"SLO {detail}" for detail in slo_detail(trial)] + trial_detail_lines(trial)
    stage = trial.stage
    if stage is not None:
        said = stage.error_messages.items()
        lines += [f"{kind} in the server's words: {text}" for kind, texts in said for text in texts]
    lines.append(f"CPU throttled {throttled_text(trial)}; load generator {generator_text(trial)}")
    log = f"<pre>{html.escape(trial.server_log_tail)}</pre>" if trial.server_log_tail else ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    summary = f"trial {trial.index} ({parameters_text(trial)}): {trial.status}"
    if trial.slo_verdict:
        summary += f", {trial.slo_verdict}"
    return f"<details><summary>{html.escape(summary)}</summary><ul>{items}</ul>{log}</details>"


def html_report(report: ProfileReport) -> str:
    colours = trial_colours(report)
    charts = figures(report)
    alerts = "".join(f'<p class="alert">{html.escape(line)}</p>' for line in headline(report))
    rows = "".join(_trial_row(report, trial, colours[trial.index]) for trial in report.trials)
    if charts:
        plots = "".join(f.to_html(full_html=False, include_plotlyjs=False) for f in charts)
    elif all_failed(report):
        plots = '<p class="notice">No charts: no trial succeeded, so nothing was measured to plot.</p>'
    else:
        plots = '<p class="notice">No charts: no trial has measurements to plot.</p>'
    tokens = generates(report)
    figure = HEADLINE_TOKEN_FIGURE.label if tokens else "latency"
    headers = (
        "trial",
        "parameters",
        "SLO",
        "output tok/s" if tokens else "ok/s",
        f"{figure} p50 ms",
        f"{figure} p99 ms",
        "errors",
        "CPU avg (cores)",
        "memory peak",
        f"{report.currency} per 1M {cost_unit(report)}",
    )
    run_lines = capacity_lines(report) + baseline_lines(report) + run_notes(report)
    run_items = "".join(f"<li>{html.escape(line)}</li>" for line in run_lines)
    fitted = workload_lines(report)  # its bucket tables keep their columns
    workload = f"<h2>Workload</h2><pre>{html.escape(chr(10).join(fitted))}</pre>" if fitted else ""
    details = "".join(_trial_details(report, trial) for trial in report.trials)
    body = f"""{alerts}<h1>ProfileRun {html.escape(report.name)}</h1>
<p class="notice">Target {html.escape(report.target)}, {html.escape(report.strategy)} search,
{len(report.trials)} trials, started {report.started_at:%Y-%m-%d %H:%M:%S} UTC.
Hover a verdict for its checks, a percentile for its interval.</p>
{_answer(report)}
<h2>Trials</h2>
<table class="trials">{header_row(headers)}{rows}</table>
<h2>Charts</h2>
{plots}
{workload}
<h2>Details</h2>
<ul>{run_items}</ul>
{details}
"""
    return page(f"Kaliper report: {report.name}", body)


def write_html(report: ProfileReport, path: Path) -> Path:
    return write_page(html_report(report), path)
