"""What the user sees of a profile report: the HTML page (its table and plotly charts) and the terminal table,
from reports built by hand."""

from __future__ import annotations

import html
from datetime import UTC, datetime

from rich.console import Console

from kaliper.api.profilerun import Capacity
from kaliper.report import profile_html, profile_plots, profile_terminal, profile_text
from kaliper.report.profile_text import summary_lines
from kaliper.report.schema import (
    BestChoice,
    GeneratorUsage,
    LatencyFigures,
    PercentileFigure,
    ProfileReport,
    ResourceSeriesPoint,
    SloCheck,
    TrialReport,
    TrialResources,
)
from tests.support.reports import make_stage

MIB = 2**20
LONG_MESSAGE = (
    "the server did not become ready within 60s: mlserver exited with status 1 after loading model 'truth' "
    "from /models/truth <v2>; last log line: RuntimeError: CUDA out of memory while allocating the KV cache "
    "for 4096 tokens, try a smaller maxBatchSize or a larger GPU & set gpu.count accordingly [errno 12] end"
)


def latency(p50: float, p99: float) -> LatencyFigures:
    return LatencyFigures(
        count=1000,
        percentiles=[
            PercentileFigure(percentile=50, value_ms=p50, ci_low_ms=p50 * 0.98, ci_high_ms=p50 * 1.02, count=1000),
            PercentileFigure(percentile=99, value_ms=p99, ci_low_ms=p99 * 0.9, ci_high_ms=p99 * 1.1, count=1000),
        ],
    )


def succeeded(index: int, cpu: str, p99: float, *, verdict: str = "Met", observed: str | None = None) -> TrialReport:
    stage = make_stage(latency(p99 / 2, p99), throughput_rps=100.0 + index)
    stage.generator_usage = GeneratorUsage(cpu_cores=0.45, capacity_cores=1.0)
    return TrialReport(
        index=index,
        name=f"t{index}",
        parameters={"cpu": cpu, "concurrency": "4"},
        status="Succeeded",
        stage=stage,
        resources=TrialResources(
            source="cgroup",
            cpu_avg_cores=0.2,
            cpu_peak_cores=0.3,
            cpu_throttled_ratio=0.25,
            memory_peak_bytes=100.4 * MIB,
            # Memory wobbles by 0.4 MiB around 100 MiB.
            series=[
                ResourceSeriesPoint(t_s=t, cpu_cores=0.2, memory_bytes=(100 + (0.2 if t % 2 else -0.2)) * MIB)
                for t in range(5)
            ],
        ),
        slo=[
            SloCheck(
                objective="p99 <= 25ms",
                verdict=verdict,  # type: ignore[arg-type]
                observed=observed or f"{p99:.2f}ms (95% CI {p99 * 0.9:.2f}-{p99 * 1.1:.2f}ms)",
            ),
            SloCheck(objective="error rate <= 1.00%", verdict="Met", observed="0.00%"),
        ],
        slo_verdict=verdict,  # type: ignore[arg-type]
        cost_per_million_requests=0.01 * (index + 1),
    )


def failed(index: int, message: str) -> TrialReport:
    return TrialReport(
        index=index, name=f"t{index}", parameters={"cpu": "100m", "concurrency": "4"}, status="Failed", message=message
    )


def report_with(trials: list[TrialReport], **fields: object) -> ProfileReport:
    return ProfileReport(
        name="demo",
        started_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        target="truth",
        strategy="grid",
        trials=trials,
        **fields,  # type: ignore[arg-type]
    )


def seven_trials() -> ProfileReport:
    cpus = ["250m", "500m", "750m", "1", "1500m", "2", "3"]
    trials = [succeeded(i, cpu, 20.0 + i) for i, cpu in enumerate(cpus)]
    trials[4] = succeeded(4, "1500m", 24.73, verdict="Inconclusive", observed="24.73ms (95% CI 19.36-26.61ms)")
    trials[6] = failed(6, LONG_MESSAGE)
    trials[2].limited_by = ["the load generator used 95% of its CPU: what it measured is its own limit"]
    return report_with(
        trials,
        best_trial=0,
        verdict="Met",
        choice=BestChoice(certainty="Tie", runner_up=1, explanation="t1 costs within the noise of t0"),
    )


def test_parse_latency_objective() -> None:
    assert profile_text.parse_latency_objective("p99 <= 25ms") == (99.0, 25.0)
    assert profile_text.parse_latency_objective("p99.9 <= 1.5s") == (99.9, 1500.0)
    assert profile_text.parse_latency_objective("error rate <= 1.00%") is None
    assert profile_text.parse_latency_objective("throughput >= 100/s") is None
    assert profile_text.parse_latency_objective("p99 <= soon") is None


def test_slo_bounds_and_cpu_limits_come_from_the_report() -> None:
    report = seven_trials()
    assert profile_text.slo_bounds_ms(report) == {99.0: 25.0}
    assert profile_text.slo_bounds_ms(report_with([failed(0, "x")])) == {}
    assert profile_text.cpu_limit_cores(report.trials[0]) == 0.25
    assert profile_text.cpu_limit_cores(report.trials[0].model_copy(update={"replicas": 3})) == 0.75
    no_cpu = report.trials[0].model_copy(update={"parameters": {"concurrency": "4"}})
    assert profile_text.cpu_limit_cores(no_cpu) is None


def test_html_table_shows_every_field_whole() -> None:
    page = profile_html.html_report(seven_trials())
    # The whole message, escaped (it has <, >, & and quotes), never cut.
    assert html.escape(LONG_MESSAGE) in page
    assert LONG_MESSAGE not in page  # ... and never raw
    # The verdict with its interval, and the objective it is about.
    assert "<b>Inconclusive</b><br>p99 &lt;= 25ms: 24.73ms (95% CI 19.36-26.61ms) (Inconclusive)" in page
    assert "error rate &lt;= 1.00%: 0.00% (Met)" in page
    assert "the load generator used 95% of its CPU: what it measured is its own limit" in page
    assert "0.45 of 1 cores (45%)" in page  # the generator's own CPU
    assert "<td>25%</td>" in page  # throttled
    assert "<td>101Mi</td>" in page  # memory peak
    assert "<td>0.0500</td>" in page  # cost per million of trial 4
    assert "choice tie: t1 costs within the noise of t0" in page
    assert "FAILED" not in page and "INTERRUPTED" not in page


def test_charts_draw_the_slo_bound_and_the_cpu_limits() -> None:
    latency, usage, cost = profile_plots.figures(seven_trials())
    assert latency.layout.title.text.startswith("Latency percentiles")
    for figure in (latency, cost):
        lines = [(s.y0, s.y1) for s in figure.layout.shapes]
        assert lines == [(25.0, 25.0)]
        assert [a.text for a in figure.layout.annotations] == ["SLO p99 &lt;= 25 ms"]
    limits = {trace.name: list(trace.y) for trace in usage.data if "limit" in trace.name}
    assert limits == {
        "t0 CPU limit (250m)": [0.25, 0.25],
        "t1 CPU limit (500m)": [0.5, 0.5],
        "t2 CPU limit (750m)": [0.75, 0.75],
        "t3 CPU limit (1)": [1.0, 1.0],
        "t4 CPU limit (1500m)": [1.5, 1.5],
        "t5 CPU limit (2)": [2.0, 2.0],
    }


def test_the_cost_chart_draws_the_frontier_the_report_holds() -> None:
    report = seven_trials()
    report.frontier = [0, 3]  # conclude's decision; the chart only draws it
    cost = profile_plots.figures(report)[2]
    (frontier,) = [trace for trace in cost.data if trace.name == "Pareto frontier"]
    assert (list(frontier.x), list(frontier.y)) == ([0.01, 0.04], [20.0, 23.0])


def test_every_trial_has_its_own_colour() -> None:
    report = seven_trials()
    report.trials[6] = succeeded(6, "3", 26.0)
    latency, usage, cost = profile_plots.figures(report)
    cpu = {trace.name: trace.line.color for trace in usage.data if trace.name.endswith("CPU (cores)")}
    # plotly's qualitative palette, in order of the report's trials.
    assert cpu == {
        "t0 CPU (cores)": "#636EFA",
        "t1 CPU (cores)": "#EF553B",
        "t2 CPU (cores)": "#00CC96",
        "t3 CPU (cores)": "#AB63FA",
        "t4 CPU (cores)": "#FFA15A",
        "t5 CPU (cores)": "#19D3F3",
        "t6 CPU (cores)": "#FF6692",
    }
    memory = {trace.name: trace.line.color for trace in usage.data if trace.name.endswith("memory (MiB)")}
    assert [memory[f"t{i} memory (MiB)"] for i in range(7)] == [cpu[f"t{i} CPU (cores)"] for i in range(7)]
    assert list(cost.data[0].marker.color) == list(cpu.values())
    # A configuration's latency lines take the colour of its (here only) trial.
    p99 = {trace.name: trace.line.color for trace in latency.data if trace.name.endswith("p99")}
    assert p99["cpu=250m p99"] == cpu["t0 CPU (cores)"] and p99["cpu=3 p99"] == cpu["t6 CPU (cores)"]
    # Past the 34 named colours, hues 137.5 degrees (the golden angle) apart; none reused however long.
    assert [profile_text.colour(i) for i in (33, 34, 35, 36)] == [
        "#AF0038",
        "hsl(0.0, 70%, 42%)",
        "hsl(137.5, 70%, 42%)",
        "hsl(275.0, 70%, 42%)",
    ]
    assert len({profile_text.colour(i) for i in range(200)}) == 200


def test_axes_start_at_zero() -> None:
    latency, usage, cost = profile_plots.figures(seven_trials())
    assert usage.layout.yaxis2.rangemode == "tozero"  # memory: 99.8-100.2 MiB is no mountain
    assert usage.layout.yaxis.rangemode == "tozero"  # CPU
    assert latency.layout.yaxis.rangemode == "tozero"
    assert cost.layout.yaxis.rangemode == "tozero"


def test_a_run_where_every_trial_failed_has_no_charts() -> None:
    report = report_with(
        [failed(0, "OOMKilled"), failed(1, "timed out")],
        error="no trial succeeded; the first failure: OOMKilled",
    )
    assert profile_plots.figures(report) == []
    page = profile_html.html_report(report)
    assert '<body><p class="alert">FAILED: no trial succeeded; the first failure: OOMKilled</p>' in page
    assert "No charts: no trial succeeded, so nothing was measured to plot." in page
    assert "plotly-graph-div" not in page
    # Without report.error (an older report), the headline says so all the same.
    assert profile_text.headline(report_with([failed(0, "OOMKilled")])) == [
        "FAILED: no trial succeeded; the first failure: OOMKilled"
    ]


def test_an_interrupted_run_says_so() -> None:
    report = seven_trials()
    report.interrupted = True
    report.trials[5] = report.trials[5].model_copy(
        update={"status": "Skipped", "message": "not run: the run was interrupted", "stage": None}
    )
    assert profile_text.headline(report) == [
        "INTERRUPTED: the run was stopped after 6 of 7 trials; the verdict and the best configuration cover only those"
    ]
    assert '<p class="alert">INTERRUPTED: the run was stopped after 6 of 7 trials;' in profile_html.html_report(report)


def recorded(report: ProfileReport) -> str:
    console = Console(record=True, width=120)
    profile_terminal.print_report(report, console)
    return console.export_text()


def test_terminal_shows_a_long_error_message_whole() -> None:
    message = " ".join(f"word{i:03d}" for i in range(40))[:299] + "."
    assert len(message) == 300
    report = seven_trials()
    report.trials[6] = failed(6, message)
    text = recorded(report)
    assert f"trial 6 Failed: {message}" in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 120
    table = text[: text.index("trial 6 Failed")]
    assert "Inconclusive" in table and "Met" in table  # the SLO column shows each verdict
    assert not text.startswith("FAILED")


def test_terminal_keeps_brackets_in_messages() -> None:
    report = seven_trials()
    report.trials[6] = failed(6, "connection refused [errno 111] [bold]")
    assert "trial 6 Failed: connection refused [errno 111] [bold]" in recorded(report)


def test_terminal_says_first_when_every_trial_failed() -> None:
    report = report_with(
        [failed(0, "OOMKilled"), failed(1, "timed out")],
        error="no trial succeeded; the first failure: OOMKilled",
    )
    text = recorded(report)
    assert text.splitlines()[0] == "FAILED: no trial succeeded; the first failure: OOMKilled"
    assert "trial 1 Failed: timed out" in text


def test_repetitions_are_listed_with_their_spread() -> None:
    from kaliper.report.schema import Repetition

    trial = succeeded(0, "1", 10.0)
    trial.repetitions = [
        Repetition(stage=i, throughput_rps=rps, error_rate=0.0, slo_verdict=v)
        for i, (rps, v) in enumerate([(400.0, "Met"), (500.0, "Met"), (450.0, "NotMet")])
    ]
    trial.spread = 0.2222
    lines = profile_text.summary_lines(report_with([trial]))
    assert "trial 0 repetitions: 400.0, 500.0, 450.0 ok/s (spread 22.2%); SLO Met, Met, NotMet" in lines


def test_each_configurations_capacity_is_starred_on_the_latency_chart_and_listed_in_the_summary() -> None:
    report = seven_trials()
    report.capacities = [
        Capacity(parameters={"cpu": "500m"}, level_name="concurrency", met=4, not_met=5, trial=1, probes=2),
        Capacity(parameters={"cpu": "3"}, level_name="concurrency", not_met=2),  # nothing met: no star
    ]
    latency = profile_plots.figures(report)[0]
    (star,) = [trace for trace in latency.data if trace.name.startswith("capacity")]
    assert star.name == "capacity cpu=500m: met at 4, not met at 5"
    assert (list(star.x), list(star.y), star.marker.symbol) == ([report.trials[1].stage.throughput_rps], [21.0], "star")
    assert [line for line in summary_lines(report) if line.startswith("capacity")] == [
        "capacity cpu=500m: concurrency met at 4, not met at 5; 2 probes",
        "capacity cpu=3: concurrency not met at 2 (the lowest measured)",
    ]
