"""What both paths do alike with measured trials: flags for what limited them, and the run's verdict."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.profiling import trials
from kaliper.profiling.plan import configurations
from kaliper.report.schema import (
    GeneratorUsage,
    LatencyFigures,
    PercentileFigure,
    ServerLoad,
    StageResult,
    TokenFigures,
    TrialReport,
    TrialResources,
)
from tests.support.reports import make_stage
from tests.support.specs import BASE, spec

SWEEP = {"cpu": ["1"], "concurrency": [2, 8]}


def measured(index: int, concurrency: int, p50_ms: float, cpu: float, throttled: float) -> TrialReport:
    figures = LatencyFigures(count=1000, percentiles=[PercentileFigure(percentile=50, value_ms=p50_ms, count=1000)])
    return TrialReport(
        index=index,
        name=f"t{index}",
        parameters={"cpu": "1", "concurrency": str(concurrency)},
        status="Succeeded",
        stage=make_stage(figures, 500, level=concurrency),
        resources=TrialResources(source="cgroup", cpu_avg_cores=cpu, cpu_throttled_ratio=throttled),
    )


def test_latency_that_rose_below_the_cpu_limit_is_flagged() -> None:
    # Issue 12: at cpu=1 the server used 0.72 cores, unthrottled, while latency rose fourfold.
    s = spec(sweep=SWEEP)
    run = [measured(0, 2, 2.0, 0.70, 0.0), measured(1, 8, 8.0, 0.72, 0.0)]
    trials.server_limits(run, configurations(s, BASE), "concurrency")
    assert run[0].limited_by == []
    assert run[1].limited_by == [
        "p50 rose from 2.00ms at concurrency 2 to 8.00ms while the server used 0.72 of its 1-core limit, "
        "throttled in 0.0% of periods: something other than the limit capped it"
    ]
    trials.server_limits(run, configurations(s, BASE), "concurrency")
    assert len(run[1].limited_by) == 1  # concluded twice, flagged once


def test_a_server_at_its_limit_is_not_flagged() -> None:
    s = spec(sweep=SWEEP)
    throttled = [measured(0, 2, 2.0, 0.70, 0.0), measured(1, 8, 8.0, 0.72, 0.30)]
    busy = [measured(0, 2, 2.0, 0.70, 0.0), measured(1, 8, 8.0, 0.97, 0.0)]
    for run in (throttled, busy):
        trials.server_limits(run, configurations(s, BASE), "concurrency")
        assert run[1].limited_by == []


def test_a_saturated_generator_is_flagged() -> None:
    s = spec(sweep=SWEEP)
    config = configurations(s, BASE)[0]
    trial = measured(0, 2, 2.0, 0.5, 0.0)
    assert trial.stage is not None
    trial.stage.generator_usage = GeneratorUsage(cpu_cores=0.95, capacity_cores=1.0)
    assert trials.judge_trial(trial, s, config).limited_by == [
        "the load generator used 0.95 of the 1 cores it can use: it may have set the pace "
        "(add load.processes, or give it more CPU)"
    ]
    trial.stage.generator_usage = GeneratorUsage(cpu_cores=0.5, capacity_cores=1.0)
    assert trials.judge_trial(trial, s, config).limited_by == []


def run_spec(**slo: object) -> ProfileRunSpec:
    return spec(sweep=SWEEP, slo={"latency": [{"percentile": 50, "max": "5ms"}], **slo})


def test_the_run_is_inconclusive_when_no_trial_met_the_slo_and_one_could_not_be_decided() -> None:
    s = run_spec()
    planned = configurations(s, BASE)
    report = trials.new_report(s, "r", None, datetime.now(UTC))
    # t0: p50 4 ms with no upper bound (too few samples): undecidable. t1: p50 9 ms, its whole interval
    # (8.5 ms and up) above the 5 ms bound: missed.
    missed = measured(1, 8, 9.0, 0.9, 0.5)
    assert missed.stage is not None
    missed.stage.latency.percentiles[0].ci_low_ms = 8.5
    report.trials = [
        trials.judge_trial(measured(0, 2, 4.0, 0.5, 0.0), s, planned[0]),
        trials.judge_trial(missed, s, planned[0]),
    ]
    assert [t.slo_verdict for t in report.trials] == ["Inconclusive", "NotMet"]
    trials.conclude(s, report, planned)
    assert report.verdict == "Inconclusive" and report.best_trial is None and report.error is None


def test_repetitions_take_the_median_and_disagreement_is_inconclusive() -> None:
    from kaliper.report.schema import LoadTestResult

    s = spec(sweep=SWEEP, slo={"latency": [{"percentile": 50, "max": "5ms"}]})
    stages = []
    for index, (rps, p50, low, high) in enumerate([(100, 4.0, 3.8, 4.2), (300, 6.0, 5.8, 6.2), (200, 4.5, 4.3, 4.7)]):
        figures = LatencyFigures(
            count=1000,
            percentiles=[PercentileFigure(percentile=50, value_ms=p50, ci_low_ms=low, ci_high_ms=high, count=1000)],
        )
        stage = make_stage(figures, rps, level=2)
        stage.index = index
        stages.append(stage)
    result = LoadTestResult(
        target="http://x/",
        started_at=datetime.now(UTC),
        finished_at=datetime.now(UTC),
        generator={"processes": 1, "workers": 0, "locust_version": "2"},
        stages=stages,
    )
    trial = trials.from_load_test(0, "t0", {"cpu": "1", "concurrency": "2"}, result, s.slo)
    assert trial.stage is not None and trial.stage.index == 2  # throughputs 100, 300, 200: the median is 200
    assert trial.spread == 1.0  # (300 - 100) / 200
    assert [(r.stage, r.slo_verdict) for r in trial.repetitions] == [(0, "Met"), (1, "NotMet"), (2, "Met")]
    judged = trials.judge_trial(trial, s, configurations(s, BASE)[0])
    assert judged.slo_verdict == "Inconclusive"
    assert judged.slo[-1].objective == "repetitions agree" and judged.slo[-1].observed == "Met, NotMet, Met"


def test_other_work_on_the_machine_is_flagged() -> None:
    s = spec(sweep=SWEEP)
    config = configurations(s, BASE)[0]
    trial = measured(0, 2, 2.0, 0.5, 0.0)
    assert trial.stage is not None and trial.resources is not None
    trial.stage.generator_usage = GeneratorUsage(cpu_cores=0.3, capacity_cores=1.0)
    trial.resources.host_cpu_cores = 1.9  # 0.5 server + 0.3 generator + 1.1 of something else
    assert trials.judge_trial(trial, s, config).limited_by == [
        "the machine was busy with other work: 1.10 cores besides the server (0.50) and the load generator (0.30)"
    ]
    trial.resources.host_cpu_cores = 0.85  # 0.05 besides: the runtime's own sampling
    assert trials.judge_trial(trial, s, config).limited_by == []
    # With the check off (kaliper run --ignore-other-work) the same busy trial is not flagged
    trial.resources.host_cpu_cores = 1.9
    assert trials.judge_trial(trial, s, config, other_work_cores=None).limited_by == []
    # and a stricter threshold flags less other work
    trial.resources.host_cpu_cores = 0.95  # 0.15 besides
    assert trials.judge_trial(trial, s, config, other_work_cores=0.1).limited_by == [
        "the machine was busy with other work: 0.15 cores besides the server (0.50) and the load generator (0.30)"
    ]


def test_host_busy_time_reads_proc_stat(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    from kaliper.local.sampler import host_busy_seconds

    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice: busy = 100+5+50+3+2+1 ticks
    stat.write_text("cpu  100 5 50 900 40 3 2 1 0 0\ncpu0 50 2 25 450 20 1 1 0 0 0\n")
    assert host_busy_seconds(stat) == 161 / os.sysconf("SC_CLK_TCK")


def generating(index: int, cpu: str, rps: float, output_tokens_per_s: float) -> TrialReport:
    """A generation trial: its stage carries token figures (100 input tokens per request)."""
    stage = make_stage(LatencyFigures(count=1000), rps, level=4)
    empty = LatencyFigures()
    stage.tokens = TokenFigures(
        ttft=LatencyFigures(count=1000, percentiles=[PercentileFigure(percentile=99, value_ms=80.0, count=1000)]),
        ttft_service=empty,
        itl_chunk=empty,
        itl_token=empty,
        tpot=empty,
        streams=1000,
        chunks=50000,
        input_tokens=100_000,
        output_tokens=50_000,
        output_tokens_per_s=output_tokens_per_s,
        total_tokens_per_s=output_tokens_per_s + 100 * rps,
    )
    return TrialReport(index=index, name=f"t{index}", parameters={"cpu": cpu}, status="Succeeded", stage=stage)


def test_generation_is_priced_and_chosen_per_million_output_tokens() -> None:
    # t0: 2 cores, 10 requests/s of 40 tokens; t1: 1 core, 4 requests/s of 62.5 tokens. Per request t0 is
    # cheaper (2.00 against 2.50 per million requests); per generated token t1 is (0.04 against 0.05).
    slo = {"maxErrorRate": 0.01, "targetOutputTokensPerSecond": 1000}
    s = spec(sweep={"cpu": ["2", "1"]}, cost={"perCoreHour": 0.036}, slo=slo)
    configs = configurations(s, BASE)
    judged = [
        trials.judge_trial(generating(0, "2", 10, 400), s, configs[0]),
        trials.judge_trial(generating(1, "1", 4, 250), s, configs[1]),
    ]
    t0, t1 = judged
    assert (t0.cost_per_million_requests, t1.cost_per_million_requests) == (pytest.approx(2.0), pytest.approx(2.5))
    assert (t0.cost_per_million_output_tokens, t1.cost_per_million_output_tokens) == (
        pytest.approx(0.05),
        pytest.approx(0.04),
    )
    # Prompt and output together: t1 serves 250 + 400 tokens/s for 0.036 per hour.
    assert t1.cost_per_million_tokens == pytest.approx(0.036 * 1e6 / 650 / 3600)
    assert t1.core_hours_per_million_output_tokens == pytest.approx(1e6 / 250 / 3600)
    report = trials.new_report(s, "llm", "default", datetime.now(UTC))
    report.trials = judged
    trials.conclude(s, report, configs)
    assert report.best_trial == 1
    assert report.choice is not None
    assert report.choice.explanation == "the runner-up t0 costs 25.0% more per output token, beyond the 5.0% noise"
    assert report.recommendation is not None and report.recommendation.replicas == 4  # 1000 / 250 tokens/s
    assert report.recommendation.rationale.endswith(
        "replicas: 1000 output tokens/s target / 250.0 tokens/s per replica; "
        "4 replicas, 95% interval 4-4 (throughput uncertain by 0.0%)"  # the stages have no windows
    )
    assert (report.recommendation.replicas_low, report.recommendation.replicas_high) == (4, 4)
    assert report.frontier == [1]  # the same p99 time to first token (80 ms), t1 cheaper


def test_a_goodput_objective_is_judged_by_the_interval_of_the_measured_share() -> None:
    from kaliper.profiling.decisions import goodput_check

    def stage_with(share: float, requests: int) -> StageResult:
        stage = generating(0, "1", 10, 100).stage
        assert stage is not None and stage.tokens is not None
        stage.requests, stage.tokens.goodput_share = requests, share
        return stage

    # Wilson 95% intervals, by hand: 98% of 1,000 -> 96.9-98.7%; 96% of 100 -> 90.2-98.4%; 80% of 1,000 ->
    # 77.4-82.4%.
    checks = [goodput_check(stage_with(share, n), 0.95) for share, n in ((0.98, 1000), (0.96, 100), (0.80, 1000))]
    assert [(c.verdict, c.observed) for c in checks] == [
        ("Met", "98.0% of 1000 (95% CI 96.9%-98.7%)"),
        ("Inconclusive", "96.0% of 100 (95% CI 90.2%-98.4%)"),
        ("NotMet", "80.0% of 1000 (95% CI 77.4%-82.4%)"),
    ]
    assert checks[0].objective == "goodput >= 95% of requests"
    with pytest.raises(ValueError, match="goodput counts the requests that meet every latency objective"):
        spec(slo={"minGoodputShare": 0.95, "maxErrorRate": 0.01})


def test_server_load_from_prometheus_stands_in_for_the_endpoint_only_where_the_generator_could_not_read_it() -> None:
    from kaliper.api.modeldeployment import ModelDeploymentSpec

    llama = ModelDeploymentSpec.model_validate(
        {"model": {"file": "/m/model.gguf"}, "runtime": {"type": "llamacpp"}, "replicas": 2}
    )
    onnx = ModelDeploymentSpec.model_validate({"model": {"file": "/m/model.onnx"}, "runtime": {"type": "onnxruntime"}})
    trial = generating(0, "1", 4, 250)
    assert trials.needs_server_load_from_prometheus(trial, llama) is True
    assert trials.needs_server_load_from_prometheus(trial, onnx) is False
    assert trials.needs_server_load_from_prometheus(trial, None) is False  # a URL target: no pods to query
    scraped = ServerLoad(source="llama.cpp", read_from="prometheus", samples=2, running_max=8, waiting_max=3)
    assert trial.stage is not None and trial.stage.tokens is not None
    trial.stage.tokens.server_load = ServerLoad(source="llama.cpp", samples=5)
    assert trials.needs_server_load_from_prometheus(trial, llama) is False  # read at every window edge
    trial.stage.tokens.server_load = None

    with_load = trials.with_server_load(trial, scraped)
    assert with_load.stage is not None and with_load.stage.tokens is not None
    assert with_load.stage.tokens.server_load == scraped
    s = spec(sweep={"cpu": ["1"]}, cost={"perCoreHour": 0.036})
    judged = trials.judge_trial(with_load, s, configurations(s, BASE)[0])
    assert judged.limited_by == [
        "requests queued in the llama.cpp server for a free slot (up to 3, 0.0 on average) while its slots "
        "were busy: the slots set the pace"
    ]
    reason = "server load: the 10 s window holds no scrape of the server pods"
    without = trials.with_server_load(trial, reason)
    assert without.resources is not None and without.resources.unavailable == [reason]
    assert without.stage is not None and without.stage.tokens is not None and without.stage.tokens.server_load is None
