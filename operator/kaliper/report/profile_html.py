"""A profile report as an HTML page that opens offline: the summary, the trials table and the charts."""

from __future__ import annotations

import html
from pathlib import Path

from kaliper.report.page import cell, header_row, page, write_page
from kaliper.report.profile_plots import figures
from kaliper.report.profile_text import (
    HEADLINE_TOKEN_FIGURE,
    all_failed,
    cost_unit,
    fmt,
    generates,
    generator_text,
    headline,
    headline_figures,
    memory_peak_text,
    parameters_text,
    settings_text,
    slo_detail,
    summary_lines,
    throttled_text,
    trial_colours,
)
from kaliper.report.schema import ProfileReport, TrialReport


def _trial_row(report: ProfileReport, trial: TrialReport, trial_colour: str) -> str:
    stage, resources = trial.stage, trial.resources
    marker = " (best)" if trial.index == report.best_trial else ""
    index = (
        f'<td><span class="swatch" style="background:{html.escape(trial_colour)}"></span>'
        f"{trial.index}{html.escape(marker)}</td>"
    )
    message = html.escape(trial.message or "")
    if trial.server_settings:
        message += ("<br>" if message else "") + html.escape("server: " + settings_text(trial))
    if trial.server_log_tail:
        message += f"<details><summary>server log</summary><pre>{html.escape(trial.server_log_tail)}</pre></details>"
    errors = fmt(stage.error_rate * 100 if stage else None, "{:.2f}%")
    if stage and stage.errors_by_kind:
        errors += html.escape(" (" + ", ".join(f"{k} x{n}" for k, n in stage.errors_by_kind.items()) + ")")
        said = [f"{kind}: {text}" for kind, texts in stage.error_messages.items() for text in texts]
        if said:
            errors += "<details><summary>in the server's words</summary>" + "<br>".join(map(html.escape, said))
            errors += "</details>"
    slo = html.escape(trial.slo_verdict or "-")
    if trial.slo:
        slo = f"<b>{slo}</b><br>" + "<br>".join(html.escape(detail) for detail in slo_detail(trial))
    limited = "<br>".join(html.escape(flag) for flag in trial.limited_by) or "-"
    rate, p50, p99 = headline_figures(trial, generates(report))
    return (
        "<tr>"
        + index
        + cell(parameters_text(trial))
        + cell(trial.status)
        + f'<td class="message">{message}</td>'
        + cell(fmt(rate, "{:.1f}"))
        + cell(fmt(p50))
        + cell(fmt(p99))
        + cell(errors)
        + cell(fmt(resources.cpu_avg_cores if resources else None, "{:.3f}"))
        + cell(throttled_text(trial))
        + cell(memory_peak_text(trial))
        + cell(generator_text(trial))
        + f"<td>{slo}</td>"
        + cell(fmt(trial.unit_cost(), "{:.4f}"))
        + f'<td class="message">{limited}</td>'
        + "</tr>"
    )


def html_report(report: ProfileReport) -> str:
    colours = trial_colours(report)
    charts = figures(report)
    alerts = "".join(f'<p class="alert">{html.escape(line)}</p>' for line in headline(report))
    rows = "".join(_trial_row(report, trial, colours[trial.index]) for trial in report.trials)
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report))
    if charts:
        plots = "".join(f.to_html(full_html=False, include_plotlyjs=False) for f in charts)
    elif all_failed(report):
        plots = '<p class="notice">No charts: no trial succeeded, so nothing was measured to plot.</p>'
    else:
        plots = '<p class="notice">No charts: no trial has measurements to plot.</p>'
    headers = (
        "trial",
        "parameters",
        "status",
        "message",
        *(
            ("output tok/s", *(f"{HEADLINE_TOKEN_FIGURE.label} p{p} ms" for p in (50, 99)))
            if generates(report)
            else ("ok/s", "p50 ms", "p99 ms")
        ),
        "errors",
        "CPU avg (cores)",
        "CPU throttled",
        "memory peak",
        "load generator CPU",
        "SLO",
        f"{report.currency} per 1M {cost_unit(report)}",
        "limited by",
    )
    body = f"""{alerts}<h1>ProfileRun {html.escape(report.name)}</h1>
<p>Target {html.escape(report.target)}, {html.escape(report.strategy)} search,
started {report.started_at:%Y-%m-%d %H:%M:%S} UTC.</p>
<ul>{summary}</ul>
<div class="scroll"><table>{header_row(headers)}{rows}</table></div>
{plots}
"""
    return page(f"Kaliper report: {report.name}", body)


def write_html(report: ProfileReport, path: Path) -> Path:
    return write_page(html_report(report), path)
