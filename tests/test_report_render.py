"""What the user sees of a profile report: the HTML page (its table and plotly charts) and the terminal table,
from reports built by hand."""

from __future__ import annotations

import html

import pytest
from rich.console import Console

from kaliper.api.profilerun import Capacity, SloSpec
from kaliper.report import profile_html, profile_plots, profile_terminal, profile_text
from kaliper.report.profile_answer import answer_rows
from kaliper.report.profile_text import others, summary_lines
from kaliper.report.schema import (
    FigureComparison,
    ProfileReport,
    RecommendationReport,
    ServerLoad,
)
from kaliper.report.token_text import server_load_line
from tests.support.sample_reports import LONG_MESSAGE, chosen, failed, report_with, seven_trials, succeeded


def test_slo_bounds_and_cpu_limits_come_from_the_report() -> None:
    report = seven_trials()
    assert profile_text.slo_bounds_ms(report) == {99.0: 25.0}
    assert profile_text.slo_bounds_ms(report_with([failed(0, "x")])) == {}
    # Read from the objectives the report carries: a time-to-first-token bound is not a latency bound.
    slo = SloSpec.model_validate(
        {"latency": [{"percentile": 99.9, "max": "1.5s"}, {"percentile": 90, "max": "200ms", "metric": "ttft"}]}
    )
    assert profile_text.slo_bounds_ms(report_with([failed(0, "x")], slo=slo)) == {99.9: 1500.0}
    assert profile_text.cpu_limit_cores(report.trials[0]) == 0.25
    assert profile_text.cpu_limit_cores(report.trials[0].model_copy(update={"replicas": 3})) == 0.75
    no_cpu = report.trials[0].model_copy(update={"parameters": {"concurrency": "4"}})
    assert profile_text.cpu_limit_cores(no_cpu) is None


def test_the_html_page_answers_first_and_keeps_every_field_whole() -> None:
    page = profile_html.html_report(seven_trials())
    # The answer before the table, the table before the charts, the details last.
    answer, table, charts, details = (
        page.index(s) for s in ('class="answer"', 'class="trials"', "<h2>Charts", "<h2>Details")
    )
    assert answer < table < charts < details
    assert '<th>verdict</th><td><span class="verdict v-Met">Met</span></td>' in page
    assert "<th>run</th><td>cpu=250m at concurrency=4 (trial 0)</td>" in page
    assert "<th>cost</th><td>0.0100 USD per million requests at concurrency=4</td>" in page
    assert "<th>how certain</th><td>Tie: t1 costs within the noise of t0</td>" in page
    # What held the others back, as the choice's rows say: each at its cheapest trial that met, against the choice
    # (the tie with why the choice won it); the failed one's reason.
    assert (
        "<li><b>cpu=500m</b>: 0.0200 USD per million requests, +100.0% against the choice; a tie within the noise, "
        "which the choice won on latency headroom</li>"
    ) in page
    assert (
        "<li><b>cpu=750m</b>: 0.0300 USD per million requests, +200.0% against the choice; limited by the load "
        "generator used 95% of its CPU: what it measured is its own limit</li>"
    ) in page
    # The whole message, escaped (it has <, >, & and quotes), never cut: on the verdict's hover and folded.
    assert page.count(html.escape(LONG_MESSAGE)) == 3  # the failed configuration, the hover, the details
    assert LONG_MESSAGE not in page  # ... and never raw
    # Verdicts as coloured words, their checks with intervals on hover.
    assert (
        '<span class="verdict v-Inconclusive" title="p99 &lt;= 25ms: 24.73ms (95% CI 19.36-26.61ms) (Inconclusive)\n'
        'error rate &lt;= 1.00%: 0.00% (Met)">Inconclusive</span>'
    ) in page
    assert '<span class="verdict v-Failed" title="the server did not become ready' in page
    # A percentile's interval on hover; the throttling and the generator's CPU on the CPU cell's.
    assert '<td class="number" title="95% interval 9.80-10.20 ms from 1000 requests">10.00</td>' in page
    assert '<td class="number" title="throttled 25%; load generator 0.45 of 1 cores (45%)">0.200</td>' in page
    assert '<td class="number">101Mi</td>' in page  # memory peak
    assert '<td class="number">0.0500</td>' in page  # cost per million of trial 4
    # Each trial's details folded.
    assert "<details><summary>trial 2 (cpu=750m, concurrency=4): Succeeded, Met</summary>" in page
    assert "<li>limited: the load generator used 95% of its CPU: what it measured is its own limit</li>" in page
    assert "FAILED" not in page and "INTERRUPTED" not in page


def test_charts_draw_the_slo_bound_and_the_cpu_limits() -> None:
    latency, cost, cpu, memory = profile_plots.figures(seven_trials())
    assert latency.layout.title.text.startswith("Latency percentiles")
    for figure in (latency, cost):
        lines = [(s.y0, s.y1) for s in figure.layout.shapes]
        assert lines == [(25.0, 25.0)]
        assert [a.text for a in figure.layout.annotations] == ["SLO p99 &lt;= 25 ms"]
    limits = {trace.name: list(trace.y) for trace in cpu.data if "limit" in trace.name}
    assert limits == {
        "t0 limit (250m)": [0.25, 0.25],
        "t1 limit (500m)": [0.5, 0.5],
        "t2 limit (750m)": [0.75, 0.75],
        "t3 limit (1)": [1.0, 1.0],
        "t4 limit (1500m)": [1.5, 1.5],
        "t5 limit (2)": [2.0, 2.0],
    }
    # The chosen trial drawn, the others a click away: six trials' lines at once hide each other.
    assert [(trace.name, trace.visible) for trace in memory.data] == [
        ("t0 memory", True),
        *((f"t{i} memory", "legendonly") for i in range(1, 6)),
    ]
    assert cpu.layout.title.text.startswith("CPU over the load of trial 0")


def test_the_cost_chart_draws_the_frontier_the_report_holds() -> None:
    report = seven_trials()
    report.frontier = [0, 3]  # conclude's decision; the chart only draws it
    cost = profile_plots.figures(report)[1]
    (frontier,) = [trace for trace in cost.data if trace.name == "Pareto frontier"]
    assert (list(frontier.x), list(frontier.y)) == ([0.01, 0.04], [20.0, 23.0])


def test_every_trial_has_its_own_colour() -> None:
    report = seven_trials()
    report.trials[6] = succeeded(6, "3", 26.0)
    latency, cost, usage, memory_chart = profile_plots.figures(report)
    cpu = {trace.name: trace.line.color for trace in usage.data if trace.name.endswith("CPU")}
    # plotly's qualitative palette, in order of the report's trials.
    assert cpu == {
        "t0 CPU": "#636EFA",
        "t1 CPU": "#EF553B",
        "t2 CPU": "#00CC96",
        "t3 CPU": "#AB63FA",
        "t4 CPU": "#FFA15A",
        "t5 CPU": "#19D3F3",
        "t6 CPU": "#FF6692",
    }
    memory = {trace.name: trace.line.color for trace in memory_chart.data}
    assert [memory[f"t{i} memory"] for i in range(7)] == [cpu[f"t{i} CPU"] for i in range(7)]
    assert list(cost.data[0].marker.color) == list(cpu.values())
    # A configuration's latency lines take the colour of its (here only) trial.
    p99 = {trace.name: trace.line.color for trace in latency.data if trace.name.endswith("p99")}
    assert p99["cpu=250m p99"] == cpu["t0 CPU"] and p99["cpu=3 p99"] == cpu["t6 CPU"]
    # Past the 34 named colours, hues 137.5 degrees (the golden angle) apart; none reused however long.
    assert [profile_text.colour(i) for i in (33, 34, 35, 36)] == [
        "#AF0038",
        "hsl(0.0, 70%, 42%)",
        "hsl(137.5, 70%, 42%)",
        "hsl(275.0, 70%, 42%)",
    ]
    assert len({profile_text.colour(i) for i in range(200)}) == 200


def test_axes_start_at_zero() -> None:
    latency, cost, cpu, memory = profile_plots.figures(seven_trials())
    assert memory.layout.yaxis.rangemode == "tozero"  # 99.8-100.2 MiB is no mountain
    assert cpu.layout.yaxis.rangemode == "tozero"
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


def test_a_ramps_segments_are_listed_under_its_trial_and_on_the_page() -> None:
    from kaliper.report.schema import RampSegment

    trial = succeeded(0, "1", 10.0)
    assert trial.stage is not None
    trial.stage.segments = [
        RampSegment(
            index=0,
            start_s=0,
            duration_s=2.5,
            intended_rps=125,
            requests=312,
            errors=0,
            throughput_rps=124.8,
            p50_ms=3.1,
            p99_ms=4.25,
            late_sends=1,
        ),
        RampSegment(
            index=1,
            start_s=2.5,
            duration_s=2.5,
            intended_rps=175,
            requests=437,
            errors=2,
            throughput_rps=174,
            p50_ms=3.4,
            p99_ms=None,
            late_sends=0,
        ),
    ]
    lines = profile_text.summary_lines(report_with([trial]))
    assert "trial 0 ramp 0-2.5s: 125 req/s asked, 124.8 ok/s  errors 0  p50 3.10ms  p99 4.25ms  late sends 1" in lines
    assert "trial 0 ramp 2.5-5s: 175 req/s asked, 174.0 ok/s  errors 2  p50 3.40ms  late sends 0" in lines
    assert "ramp 2.5-5s: 175 req/s asked" in profile_html.html_report(report_with([trial]))


def test_a_replayed_trace_is_shown_over_time_beside_what_the_server_made_of_it() -> None:
    from kaliper.report.replay_text import replay_lines
    from kaliper.report.schema import WindowResult

    trial = succeeded(0, "1", 10.0)
    assert trial.stage is not None
    trial.stage.warmup_s, trial.stage.measured_s = 1.0, 3.0
    asked = [(7, 6, 0, 300.0, 0), (69, 60, 2, 410.5, 3), (7, 16, 0, None, 0), (0, 2, 0, 250.0, 0)]
    trial.stage.windows = [
        WindowResult(
            index=i,
            start_s=float(i),
            warmup=i == 0,
            requests=ended,
            errors=failed,
            throughput_rps=ended - failed,
            p99_ms=p99,
            late_sends=late,
            scheduled=sent,
        )
        for i, (sent, ended, failed, p99, late) in enumerate(asked)
    ]
    lines = profile_text.summary_lines(report_with([trial]))
    warmup = "trial 0 trace 0-1s (warm-up): 7 sent on its clock (7.0/s), 6 ended, 0 failed, p99 300.00ms, late sends 0"
    assert warmup in lines
    assert "trial 0 trace 1-2s: 69 sent on its clock (69.0/s), 60 ended, 2 failed, p99 410.50ms, late sends 3" in lines
    assert "trial 0 trace 2-3s: 7 sent on its clock (7.0/s), 16 ended, 0 failed, p99 -, late sends 0" in lines
    # A long replay's windows in groups: the sends summed, the worst window's p99.
    assert replay_lines(trial.stage, most=2) == [
        "trace 0-2s: 76 sent on its clock (38.0/s), 66 ended, 2 failed, p99 410.50ms, late sends 3",
        "trace 2-4s: 7 sent on its clock (3.5/s), 18 ended, 0 failed, p99 250.00ms, late sends 0",
    ]
    page = profile_html.html_report(report_with([trial]))
    assert "The trace over time, trial 0" in page and "t0 sends the trace asked" in page


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


def test_the_answer_prices_the_choice_at_its_capacity_with_intervals_and_charts_them() -> None:
    report = seven_trials()
    report.capacities = [
        Capacity(
            parameters={"cpu": "250m"},
            level_name="concurrency",
            met=4,
            not_met=5,
            trial=0,
            probes=2,
            probe_seconds=12.4,
            unit_cost=0.01,
            unit_cost_low=0.009,
            unit_cost_high=0.0115,
        ),
        Capacity(
            parameters={"cpu": "500m"},
            level_name="concurrency",
            met=4,
            trial=1,
            unit_cost=0.02,
            unit_cost_low=0.018,
            unit_cost_high=0.022,
        ),
    ]
    report.load_generation_s = 95.0
    report.recommendation = RecommendationReport(replicas=3, replicas_low=3, replicas_high=4, rationale="r")
    rows = dict(answer_rows(report))
    assert rows["cost at its capacity"] == "0.0100 USD per million requests (95%: 0.0090-0.0115)"
    assert rows["capacity under the SLO"] == "concurrency met at 4, not met at 5"
    assert rows["replicas"] == "3 (95%: 3-4)"
    assert rows["measured"] == "7 trials, 95 s of load, of them 2 capacity probes (12 s)"
    assert dict(others(report))["cpu=500m"] == (
        "concurrency met at 4 (the highest measured); 0.0200 USD per million requests, +100.0% against the choice; "
        "a tie within the noise, which the choice won on latency headroom"
    )
    (chart,) = [f for f in profile_plots.figures(report) if f.layout.title.text.startswith("Cost per million")]
    # The cheapest on top (plotly draws the first category at the bottom), the choice a star, each interval.
    assert [(list(t.y), list(t.x), t.marker.symbol) for t in chart.data] == [
        (["cpu=500m at concurrency 4"], [0.02], "circle"),
        (["cpu=250m at concurrency 4"], [0.01], "star"),
    ]
    assert [(t.error_x.arrayminus[0], t.error_x.array[0]) for t in chart.data] == [
        pytest.approx((0.002, 0.002)),
        pytest.approx((0.001, 0.0015)),
    ]


def test_a_configuration_that_never_met_says_which_objective_it_missed() -> None:
    report = seven_trials()
    report.trials[3] = succeeded(3, "1", 30.0, verdict="NotMet", observed="30.00ms (95% CI 29.00-31.00ms)")
    chosen(report, 0, {1: "headroom"})
    assert dict(others(report))["cpu=1"] == (
        "never met the SLO (p99 <= 25ms: 30.00ms (95% CI 29.00-31.00ms) at cpu=1, concurrency=4)"
    )
    assert dict(others(report))["cpu=100m"] == f"failed: {LONG_MESSAGE}"
    # The terminal and `kaliper report` say the same, one line per configuration not chosen.
    assert [line for line in summary_lines(report) if line.startswith("not chosen: cpu=1:")] == [
        "not chosen: cpu=1: never met the SLO (p99 <= 25ms: 30.00ms (95% CI 29.00-31.00ms) at cpu=1, concurrency=4)"
    ]


def test_each_figure_against_the_baseline_is_a_chart_of_both_runs_with_their_intervals() -> None:
    report = seven_trials()
    report.comparison = [
        FigureComparison(
            parameters={"cpu": cpu, "concurrency": "4"},
            figure="latency p99",
            unit="ms",
            baseline=20.0,
            baseline_low=19.0,
            baseline_high=21.0,
            value=value,
            low=value - 1,
            high=value + 2,
            verdict=verdict,  # type: ignore[arg-type]
        )
        for cpu, value, verdict in (("250m", 30.0, "worse"), ("500m", 20.5, "within the noise"))
    ] + [
        FigureComparison(
            parameters={"cpu": "250m", "concurrency": "4"},
            figure="throughput",
            unit="req/s",
            baseline=100.0,
            value=None,
            verdict="worse",
        )
    ]
    latency_chart, throughput_chart = profile_plots.comparison_figures(report)
    assert latency_chart.layout.title.text == "latency p99 against the baseline (within the noise, worse)"
    baseline, this_run = latency_chart.data
    assert (baseline.name, list(baseline.x), list(baseline.y)) == (
        "baseline",
        ["cpu=250m, concurrency=4", "cpu=500m, concurrency=4"],
        [20.0, 20.0],
    )
    assert (list(this_run.y), list(this_run.error_y.array), list(this_run.error_y.arrayminus)) == (
        [30.0, 20.5],
        [2.0, 2.0],
        [1.0, 1.0],
    )
    assert list(throughput_chart.data[1].y) == [None]  # beyond every answer: no point
    assert len(profile_plots.figures(report)) == 6  # latency, cost, CPU, memory, and the two comparisons


def test_without_an_slo_the_others_are_priced_at_their_cheapest_trial() -> None:
    trials = [succeeded(0, "250m", 20.0), succeeded(1, "500m", 21.0)]
    for trial in trials:
        trial.slo, trial.slo_verdict = [], None
    report = chosen(report_with(trials, verdict="Unknown"), 0, slo=None)
    assert others(report) == [("cpu=500m", "0.0200 USD per million requests, +100.0% against the choice")]


def test_a_choice_cheaper_below_its_capacity_is_priced_where_chosen_and_its_capacity_for_sizing() -> None:
    report = seven_trials()
    report.capacities = [
        Capacity(
            parameters={"cpu": "250m"},
            level_name="concurrency",
            met=8,
            trial=9,
            unit_cost=0.012,
            unit_cost_low=0.011,
            unit_cost_high=0.013,
        )
    ]
    rows = dict(answer_rows(report))
    assert rows["cost"] == "0.0100 USD per million requests at concurrency=4"
    assert rows["capacity under the SLO"] == (
        "concurrency met at 8 (the highest measured); 0.0120 USD per million requests (95%: 0.0110-0.0130) there"
    )
    assert "cost at its capacity" not in rows


def test_a_cheaper_configuration_not_chosen_is_marked_as_the_tie_it_lost_and_why() -> None:
    """t0 is half t1's cost but was measured while the machine was busy; the choice took t1 from their tie."""
    report = seven_trials()
    report.trials[0].limited_by = ["the machine was busy: 1.4 cores of other work"]
    chosen(report, 1, {0: "undisturbed"})
    assert dict(others(report))["cpu=250m"] == (
        "0.0100 USD per million requests, -50.0% against the choice; a tie within the noise, which the choice won "
        "as the one measured undisturbed; limited by the machine was busy: 1.4 cores of other work"
    )


def test_a_fitted_workload_is_said_and_drawn_against_its_histograms() -> None:
    from datetime import UTC, datetime

    from kaliper.api.profilerun import BucketShares, FittedWorkload, OpenLoop, SyntheticPrompts

    report = report_with([succeeded(0, "1", 10.0)])
    report.workload = FittedWorkload(
        source='http://prom:9090 {model_name="m"} over the 1h to 2026-11-27T01:00:00+00:00',
        fitted_at=datetime(2026, 11, 27, 1, tzinfo=UTC),
        prompts=SyntheticPrompts.model_validate(
            {
                "inputTokens": {"distribution": "lognormal", "mean": 312, "stddev": 201.3, "min": 21, "max": 2000},
                "outputTokens": {"distribution": "lognormal", "mean": 40, "stddev": 19.5, "min": 6},
                "sharedPrefixRatio": 0.47,
            }
        ),
        open_loop=OpenLoop(rate=1.667, arrival="gamma", burstiness=0.31),
        fit=["input tokens: lognormal, mean 312.4, ..."],
        input_buckets=[
            BucketShares(upper=200, observed=0.3, fitted=0.31),
            BucketShares(upper=500, observed=0.5, fitted=0.49),
        ],
        output_buckets=[
            BucketShares(upper=50, observed=0.8, fitted=0.78),
            BucketShares(upper=None, observed=0.0, fitted=0.01),
        ],
    )
    lines = profile_text.summary_lines(report)
    assert (
        'workload fitted from http://prom:9090 {model_name="m"} over the 1h to 2026-11-27T01:00:00+00:00: input '
        "tokens lognormal mean 312 stddev 201.3, 21-2000; output tokens lognormal mean 40 stddev 19.5, from 6; "
        "shared prefix 0.47; gamma arrivals at 1.667/s (burstiness 0.31)"
    ) in lines
    assert "  input tokens: lognormal, mean 312.4, ..." in lines
    (chart,) = [f for f in profile_plots.figures(report) if f.layout.title.text.startswith("The workload fitted")]
    observed_in, fitted_in, observed_out, fitted_out = chart.data
    assert (list(observed_in.x), list(observed_in.y), list(fitted_in.y)) == (["≤200", "≤500"], [0.3, 0.5], [0.31, 0.49])
    assert (list(observed_out.x), list(fitted_out.y)) == (["≤50", "more"], [0.78, 0.01])
    page = profile_html.html_report(report)
    assert "<h2>Workload</h2><pre>workload fitted from" in page


def test_the_server_load_line_says_where_it_was_read_and_from_how_many_pods() -> None:
    scraped = ServerLoad(
        source="llama.cpp", read_from="prometheus", samples=2, pods=2, running_mean=1.5, running_max=2.0
    )
    assert server_load_line(scraped) == (
        "server load (llama.cpp, at least 2 scrapes of each of 2 pods in Prometheus): running 1.5 on average, up to 2"
    )
    read = ServerLoad(source="vLLM", samples=6, waiting_mean=0.5, waiting_max=1.0)
    assert server_load_line(read) == "server load (vLLM, 6 readings): queued 0.5 on average, up to 1"


def test_quality_against_cost_draws_each_score_its_interval_and_the_floor() -> None:
    from kaliper.report.schema import ConfigurationRow, QualityScore

    def row(
        variant: str, cost: float, correct: int, interval: tuple[float, float], verdict: str, chosen: bool = False
    ) -> ConfigurationRow:
        quality = QualityScore(
            rows=20,
            correct=correct,
            score=correct / 20,
            ci_low=interval[0],
            ci_high=interval[1],
            floor=0.9,
            verdict=verdict,
            observed=f"{correct} of 20 rows",
        )
        reason = "the choice" if chosen else "held back by quality"
        return ConfigurationRow(
            parameters={"variant": variant},
            trials=[0],
            qualified=True,
            chosen=chosen,
            cost=cost,
            quality=quality,
            reason=reason,
        )

    report = seven_trials()
    report.configurations = [
        row("f16", 0.03, 20, (0.8389, 1.0), "Held", chosen=True),
        row("q4", 0.01, 9, (0.2582, 0.6579), "Below"),
    ]
    (chart,) = [f for f in profile_plots.figures(report) if f.layout.title.text.startswith("Quality against cost")]
    assert [(list(t.x), list(t.y), t.marker.symbol) for t in chart.data] == [
        ([0.03], [100.0], "star"),
        ([0.01], [45.0], "x"),
    ]
    assert [(t.error_y.arrayminus[0], t.error_y.array[0]) for t in chart.data] == [
        pytest.approx((16.11, 0.0)),
        pytest.approx((19.18, 20.79)),
    ]
    assert chart.layout.shapes[0].y0 == 90.0  # the floor
    # Without quality scored, no chart.
    assert not [f for f in profile_plots.figures(seven_trials()) if f.layout.title.text.startswith("Quality")]
