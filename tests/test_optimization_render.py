"""What the user sees of an optimization report: the terminal tables and summary, the HTML page and its charts,
from a report built by hand."""

# The expected texts are written as the user reads them, with en dashes and multiplication signs.
# ruff: noqa: RUF001

from __future__ import annotations

import html
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from kaliper.api.modeloptimization import ChosenModel
from kaliper.report import optimization_html, optimization_plots, optimization_terminal, optimization_text
from kaliper.report.optimization import (
    CandidateResult,
    OptimizationReport,
)
from tests.support.sample_reports import (
    FAILED_MESSAGE,
    SLOW_MESSAGE,
    candidates,
    demo_report,
    failed_report,
    measured_latency,
)


def cells(table: Table, header: str) -> list[str]:
    column = next(c for c in table.columns if c.header == header)
    return [str(cell) for cell in column.cells]


# --- text figures --------------------------------------------------------------------------------------


def test_figures_as_text() -> None:
    assert optimization_text.format_flops(950) == "950 FLOPs"
    assert optimization_text.format_flops(1_200_000) == "1.2 MFLOPs"
    assert optimization_text.format_flops(999_950) == "1.0 MFLOPs"
    assert optimization_text.format_flops(3_400_000_000) == "3.4 GFLOPs"
    assert optimization_text.format_size(512) == "512 B"
    assert optimization_text.format_size(10000) == "9.8 KiB"
    assert optimization_text.format_size(3 * 2**20 // 2) == "1.5 MiB"
    assert optimization_text.format_size(None) == "—"
    tiny = CandidateResult(id="t", latency=measured_latency(0.0234, 0.0229, None))
    assert optimization_text.format_latency(tiny) == "0.0234 ms (0.0229–?)"
    assert optimization_text.format_latency(CandidateResult(id="f", latency_ms=3.0)) == "3.00 ms"


# --- the terminal --------------------------------------------------------------------------------------


def test_candidates_table_has_a_row_per_model() -> None:
    table = optimization_terminal.candidates_table(demo_report())
    assert table.title == "ModelOptimization demo: 3 candidates (exhaustive search)"
    assert cells(table, "id") == ["unoptimized", "ortDefaults", "original", "c1", "c2 *", "c3"]
    assert cells(table, "passes") == [
        "—",
        "—",
        "—",
        "graph_optimization",
        "graph_optimization + quantization",
        "float16",
    ]
    assert cells(table, "settings") == [
        "—",
        "—",
        "—",
        "level=all",
        "level=all, mode=dynamic, weight_type=int8",
        "keep_io_types=true",
    ]
    assert cells(table, "latency") == [
        "2.50 ms (2.40–2.62)",
        "2.00 ms (1.95–2.05)",
        "2.00 ms (1.95–2.05)",
        "1.90 ms (1.85–1.96)",
        "1.20 ms (1.18–1.23)",
        "—",
    ]
    assert cells(table, "faster") == ["-25.0%", "—", "0.0%", "5.0%", "40.0%", "—"]
    assert cells(table, "accuracy") == ["0.96", "0.96", "0.96", "0.96", "0.953", "—"]
    assert cells(table, "degra-\ndation") == ["—", "—", "0", "0", "0.007", "—"]
    assert cells(table, "size") == ["9.8 KiB", "9.8 KiB", "9.8 KiB", "9.6 KiB", "3.9 KiB", "—"]
    assert cells(table, "meets\ngoals") == ["—", "—", "—", "no", "yes", "—"]
    assert cells(table, "Pareto") == ["", "", "", "★", "★ ◆", ""]
    # Messages whole, brackets and all.
    assert cells(table, "status") == [
        "Succeeded",
        "Succeeded",
        "Succeeded",
        f"Succeeded: {SLOW_MESSAGE}",
        "Succeeded",
        f"Failed: {FAILED_MESSAGE}",
    ]
    assert [row.style for row in table.rows] == ["dim", "dim", None, None, "bold green", "red"]


def test_profile_table_lists_the_slowest_operator_types() -> None:
    original = demo_report().profiles[0]
    table = optimization_terminal.profile_table(original)
    assert table.title == "Profile of original: time per operator type"
    assert cells(table, "op type") == ["Conv", "Gemm", "Relu"]
    assert cells(table, "nodes") == ["2", "1", "2"]
    assert cells(table, "time µs") == ["800.0", "500.0", "100.0"]
    assert cells(table, "% of time") == ["57.1%", "35.7%", "7.1%"]
    assert cells(table, "FLOPs") == ["1.0 MFLOPs", "200.0 kFLOPs", "—"]
    assert table.caption == (
        "2,500 parameters; 1.2 MFLOPs per inference (batch 1), a lower bound: no estimate for Shape ×2, Gather; "
        "kernel time 1,400.0 µs per inference over 100 runs; ran in NCHWc, 16-channel blocks (operator FLOPs "
        "include the padding to whole blocks)"
    )
    top = optimization_terminal.profile_table(original, top=2)
    assert top.title == "Profile of original: time per operator type (top 2 of 3)"
    assert cells(top, "op type") == ["Conv", "Gemm"]


def test_summary_lines() -> None:
    assert optimization_text.summary_lines(demo_report()) == [
        "Succeeded: chose c2, 40.0% faster than the original",
        "exhaustive search, 3 of 3 candidates evaluated (1 failed)",
        "target: device=cpu, cpus=4",
        "machine: AMD EPYC (x86_64: AVX2, FMA3, AVX512F), ONNX Runtime 1.32.0, NCHWc blocks of 16 channels",
        "original: 2.00 ms (1.95–2.05), accuracy 0.96, 9.8 KiB",
        "chosen: c2 (graph_optimization + quantization), 40.0% faster than the original, accuracy degradation "
        "0.007; 1.20 ms (1.18–1.23), accuracy 0.953, 3.9 KiB",
        "  settings: intra_op_num_threads=4, execution_mode=sequential",
        "  model: /tmp/models/c2.onnx",
        "latency-accuracy frontier: c2, c1",
        "latency-size frontier: c2",
        "artifacts: /tmp/models",
        "warning: float16 pays off on GPUs; the target is cpu",
    ]


def test_summary_of_failed_runs_says_failed_first() -> None:
    no_goal = failed_report(
        "NoCandidateMeetsGoals",
        "no candidate met the goals: c2 lost 0.02 of accuracy (at most 0.01)",
        candidates=candidates(),
        planned=4,
    )
    assert optimization_text.summary_lines(no_goal) == [
        "FAILED (NoCandidateMeetsGoals): no candidate met the goals: c2 lost 0.02 of accuracy (at most 0.01)",
        "exhaustive search, 3 of 4 candidates evaluated (1 failed)",
        "chosen: none",
    ]
    no_model = failed_report("ModelDidNotLoad", "could not load /models/m.onnx: [Errno 2] No such file")
    assert optimization_text.summary_lines(no_model) == [
        "FAILED (ModelDidNotLoad): could not load /models/m.onnx: [Errno 2] No such file",
        "exhaustive search, 0 of 0 candidates evaluated",
        "chosen: none",
    ]
    interrupted = failed_report("Interrupted", "stopped", candidates=candidates(), planned=8, interrupted=True)
    assert optimization_text.headline(interrupted) == [
        "FAILED (Interrupted): stopped",
        "INTERRUPTED: the optimization was stopped after 3 of 8 candidates; the choice covers only those",
    ]


def recorded(report: OptimizationReport) -> str:
    console = Console(record=True, width=200)
    optimization_terminal.print_optimization(report, console)
    return console.export_text()


def test_terminal_prints_summary_candidates_and_profiles() -> None:
    text = recorded(demo_report())
    assert text.splitlines()[0] == "Succeeded: chose c2, 40.0% faster than the original"
    assert "ModelOptimization demo: 3 candidates (exhaustive search)" in text
    assert "1.20 ms (1.18–1.23)" in text
    assert "graph_optimization + quantization" in text
    assert text.index("Profile of original: time per operator type") < text.index(
        "Profile of c2: time per operator type"
    )
    assert "MatMulInteger" in text
    failed = recorded(failed_report("ModelDidNotLoad", "could not load [model]"))
    assert failed.splitlines()[0] == "FAILED (ModelDidNotLoad): could not load [model]"


# --- the charts ----------------------------------------------------------------------------------------


def test_every_model_keeps_its_colour() -> None:
    report = demo_report()
    assert optimization_text.candidate_colours(report) == {
        "unoptimized": "#636EFA",
        "ortDefaults": "#EF553B",
        "original": "#00CC96",
        "c1": "#AB63FA",
        "c2": "#FFA15A",
        "c3": "#19D3F3",
    }
    for figure in (optimization_plots.latency_accuracy_figure(report), optimization_plots.latency_size_figure(report)):
        assert figure is not None
        by_name = {trace.name: trace for trace in figure.data}
        assert list(by_name["references"].marker.color) == ["#636EFA", "#EF553B"]
        assert list(by_name["original"].marker.color) == ["#00CC96"]
        assert list(by_name["candidates"].marker.color) == ["#AB63FA", "#FFA15A"]
    operators = optimization_plots.operator_time_figure(report)
    assert operators is not None
    assert [trace.marker.color for trace in operators.data] == ["#00CC96", "#FFA15A"]


def test_latency_accuracy_chart() -> None:
    figure = optimization_plots.latency_accuracy_figure(demo_report())
    assert figure is not None
    assert figure.layout.title.text == "Latency vs accuracy (frontier in crimson; the chosen candidate is a star)"
    assert figure.layout.xaxis.title.text == "latency, avg (ms)"
    assert figure.layout.xaxis.rangemode == "tozero"
    assert figure.layout.yaxis.title.text == "accuracy (higher is better)"
    assert [trace.name for trace in figure.data] == [
        "references",
        "original",
        "candidates",
        "latency-accuracy frontier",
    ]
    references, original, found, frontier = figure.data
    assert list(references.text) == ["unoptimized", "ortDefaults"]
    assert list(references.marker.symbol) == ["diamond", "diamond"]
    assert list(original.marker.symbol) == ["square"]
    # The failed c3 is not plotted; the chosen c2 is a star.
    assert list(found.text) == ["c1", "c2"]
    assert list(found.x) == [1.90, 1.20]
    assert list(found.y) == [0.96, 0.953]
    assert list(found.marker.symbol) == ["circle", "star"]
    assert list(found.error_x.array) == pytest.approx([0.06, 0.03])
    assert list(found.error_x.arrayminus) == pytest.approx([0.05, 0.02])
    assert list(frontier.text) == ["c2", "c1"]
    assert list(frontier.x) == [1.20, 1.90]
    assert list(frontier.y) == [0.953, 0.96]
    assert frontier.line.shape == "hv"


def test_latency_size_chart() -> None:
    figure = optimization_plots.latency_size_figure(demo_report())
    assert figure is not None
    assert figure.layout.title.text == "Latency vs model size (frontier in crimson; the chosen candidate is a star)"
    assert figure.layout.yaxis.title.text == "model size (KiB)"
    assert figure.layout.yaxis.rangemode == "tozero"
    assert [trace.name for trace in figure.data] == ["references", "original", "candidates", "latency-size frontier"]
    found, frontier = figure.data[2], figure.data[3]
    assert list(found.y) == [9.5703125, 3.90625]
    assert list(frontier.text) == ["c2"]
    assert list(frontier.x) == [1.20]
    assert list(frontier.y) == [3.90625]


def test_latency_bars_when_no_accuracy_was_measured() -> None:
    report = demo_report()
    for _, result in optimization_text.rows(report):
        result.accuracy = None
    figure = optimization_plots.latency_accuracy_figure(report)
    assert figure is not None
    assert figure.layout.title.text.startswith("Latency per candidate (no accuracy was measured;")
    (bars,) = figure.data
    assert bars.type == "bar" and bars.orientation == "h"
    assert list(bars.y) == ["unoptimized", "ortDefaults", "original", "c1", "c2"]
    assert list(bars.x) == [2.50, 2.00, 2.00, 1.90, 1.20]
    assert list(bars.marker.pattern.shape) == ["/", "/", "x", "", ""]
    assert list(bars.marker.line.color) == ["white", "white", "white", "white", "crimson"]


def test_operator_time_chart_groups_the_profiles() -> None:
    figure = optimization_plots.operator_time_figure(demo_report())
    assert figure is not None
    assert figure.layout.title.text == "Kernel time per operator type (µs per inference)"
    assert figure.layout.barmode == "group"
    original, chosen = figure.data
    assert (original.name, chosen.name) == ("original", "c2 (chosen)")
    assert list(original.x) == ["Conv", "Gemm", "ConvInteger", "MatMulInteger", "Relu"]
    assert list(original.y) == [800.0, 500.0, None, None, 100.0]
    assert list(chosen.y) == [None, None, 400.0, 200.0, 90.0]


# --- the HTML page -------------------------------------------------------------------------------------


def test_page_has_charts_tables_and_whole_escaped_messages() -> None:
    page = optimization_html.optimization_html(demo_report())
    assert page.count("plotly-graph-div") >= 3
    for title in (
        "Latency vs accuracy (frontier in crimson; the chosen candidate is a star)",
        "Latency vs model size (frontier in crimson; the chosen candidate is a star)",
        "Kernel time per operator type (µs per inference)",
        "latency-accuracy frontier",
        "latency-size frontier",
    ):
        assert title in page
    # The message whole and escaped: on the failed result's hover and in its folded details.
    assert f'<span class="verdict v-Failed" title="{html.escape(FAILED_MESSAGE)}">Failed</span>' in page
    assert f"<details><summary>c3: Failed</summary><ul><li>{html.escape(FAILED_MESSAGE)}</li>" in page
    assert FAILED_MESSAGE not in page
    # The summary first, in the answer's box, then the table, then the charts.
    assert page.index('<section class="answer"><ul><li>Succeeded: chose c2') < page.index("<h2>Candidates")
    assert page.index("<h2>Candidates") < page.index("<h2>Charts") < page.index("plotly-graph-div")
    assert "<li>chosen: c2 (graph_optimization + quantization), 40.0% faster than the original" in page
    # A compact row (it fits 1,280 px): the latency's spread, the metric and the bytes on hover.
    assert (
        '<tr class="chosen"><td><span class="swatch" style="background:#FFA15A"></span>c2 (chosen)</td>'
        '<td>graph_optimization + quantization</td><td class="parameters">level=all, mode=dynamic, weight_type=int8'
        '</td><td><span class="verdict v-Met">Succeeded</span>, meets goals</td><td title="mean / p50 / p90 / p95 / '
        "p99: 1.20 / 1.20 / 1.30 / 1.40 / 1.70 ms (avg shown); min–max 0.90–2.20 ms; 200 runs after 10 warm-up, "
        'batch 1">1.20 ms (1.18–1.23)</td><td>40.0%</td><td title="accuracy">0.953</td><td>0.007</td><td>—</td>'
        '<td title="4,000 B">3.9 KiB</td><td>★ ◆</td></tr>'
    ) in page
    assert (
        "<details><summary>c2: Succeeded</summary><ul><li>mean / p50 / p90 / p95 / p99: 1.20 / 1.20 / 1.30 / 1.40 / "
        "1.70 ms (avg shown); min–max 0.90–2.20 ms; 200 runs after 10 warm-up, batch 1</li><li>accuracy metric: "
        "accuracy</li><li>accuracy 95% interval (Wilson): 0.9068-0.9772</li><li>7.3 s to build and measure</li>"
        "<li>model: /tmp/models/c2.onnx</li></ul></details>"
    ) in page
    assert "<h3>Profile of c2 (chosen)</h3>" in page
    assert "<tr><td>conv1</td><td>Conv</td><td>500.0</td><td>35.7%</td><td>800.0 kFLOPs</td></tr>" in page
    assert "<tr><td>shape0</td><td>Shape</td><td>—</td><td>—</td><td>—</td></tr>" in page
    assert "<h4>The 4 slowest of 4 nodes</h4>" in page
    assert "FAILED" not in page and "No charts" not in page


def test_page_says_so_when_no_candidate_succeeded() -> None:
    report = failed_report(
        "NoCandidateMeetsGoals",
        "every candidate failed; the first: float16 conversion failed",
        candidates=[candidates()[2]],
        planned=1,
    )
    assert optimization_plots.optimization_figures(report) == []
    page = optimization_html.optimization_html(report)
    assert (
        '<body><p class="alert">FAILED (NoCandidateMeetsGoals): every candidate failed; the first: float16 '
        "conversion failed</p>"
    ) in page
    assert page.count("No charts: no candidate succeeded, so nothing was measured to plot.") == 1
    assert "plotly-graph-div" not in page
    assert html.escape(FAILED_MESSAGE) in page  # listed in the table all the same


def test_write_page(tmp_path: Path) -> None:
    written = optimization_html.write_optimization_html(demo_report(), tmp_path / "out" / "report.html")
    assert written == tmp_path / "out" / "report.html"
    assert "<h1>ModelOptimization demo</h1>" in written.read_text(encoding="utf-8")


def test_chosen_line_falls_back_on_the_candidate_and_says_gain() -> None:
    report = demo_report()
    report.chosen = ChosenModel(candidate_id="c2")
    report.chosen_settings = {}
    report.candidates[1].accuracy_degradation = -0.002
    lines = optimization_text.summary_lines(report)
    assert lines[5:7] == [
        "chosen: c2 (graph_optimization + quantization), 40.0% faster than the original, accuracy gain 0.002; "
        "1.20 ms (1.18–1.23), accuracy 0.953, 3.9 KiB",
        "  settings: level=all, mode=dynamic, weight_type=int8",
    ]
    assert lines[7] == "latency-accuracy frontier: c2, c1"  # no artifact, no model line


def test_a_report_of_the_previous_schema_reads_its_baseline_as_the_original() -> None:
    """v1 reports (an optimizer Job of the previous release) called the original model's measurement
    `baseline`; the word is now a ProfileRun's earlier run only."""
    v1 = {
        "schemaVersion": "kaliper.dev/optimization/v1",
        "name": "old",
        "startedAt": "2026-11-01T00:00:00Z",
        "baseline": {"id": "original", "accuracy": 0.96, "modelSizeBytes": 10000},
    }
    report = OptimizationReport.model_validate(v1)
    assert report.schema_version == "kaliper.dev/optimization/v2"
    assert report.original is not None
    assert (report.original.id, report.original.accuracy, report.original.model_size_bytes) == ("original", 0.96, 10000)
    assert "baseline" not in report.model_dump(by_alias=True)
