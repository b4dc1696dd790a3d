"""The candidate space, the strategies, the goals, the frontiers and the choice: pure functions, literal cases."""

from __future__ import annotations

from kaliper.api.modeloptimization import Evaluator, ModelOptimizationSpec
from kaliper.optimize.frontier import choose, closest, frontiers, goal_problems, throttling_note
from kaliper.optimize.space import CandidatePlan, all_plans, default_intra_op, run_search
from kaliper.pareto import pareto_front
from kaliper.report.optimization import CandidateResult


def spec(passes: dict, search: dict | None = None, evaluator: dict | None = None) -> ModelOptimizationSpec:
    return ModelOptimizationSpec.model_validate(
        {
            "model": {"source": {"file": "m.onnx"}},
            "passes": passes,
            "search": search or {},
            "evaluator": evaluator or {},
        }
    )


def test_default_thread_counts_double_up_to_the_cpu_limit() -> None:
    assert default_intra_op(1) == [1]
    assert default_intra_op(2) == [1, 2]
    assert default_intra_op(6) == [1, 2, 4]
    assert default_intra_op(0.5) == [1]


def test_exhaustive_lists_every_distinct_candidate_without_the_original() -> None:
    plans = all_plans(spec({"graphOptimization": {}, "quantization": {}}), cpus=2)
    assert plans == [
        CandidatePlan(quantization=True),
        CandidatePlan(graph=True),
        CandidatePlan(graph=True, quantization=True),
    ]


def test_inter_op_threads_only_count_in_parallel_mode() -> None:
    tuning = {"threadTuning": {"intraOp": [1, 2], "interOp": [1, 2], "executionModes": ["sequential", "parallel"]}}
    plans = all_plans(spec(tuning), cpus=2)
    # sequential: 2 intra counts; parallel: 2 intra x 2 inter
    assert len(plans) == 6
    assert CandidatePlan(intra_op=1, inter_op=None, execution_mode="sequential") in plans
    assert CandidatePlan(intra_op=2, inter_op=2, execution_mode="parallel") in plans
    assert all(p.inter_op is None for p in plans if p.execution_mode == "sequential")


def test_plan_parameters_and_passes() -> None:
    s = spec({"graphOptimization": {"level": "extended"}, "quantization": {"perChannel": True}, "threadTuning": {}})
    plan = CandidatePlan(graph=True, quantization=True, intra_op=2)
    assert plan.passes(converted=True) == ["conversion", "quantization", "graphOptimization", "threadTuning"]
    assert plan.parameters(s) == {
        "graphOptimization.level": "extended",
        "quantization.mode": "dynamic",
        "quantization.weightType": "int8",
        "quantization.perChannel": "true",
        "intraOp": "2",
        "executionMode": "sequential",
    }


def test_max_candidates_bounds_exhaustive_and_says_what_was_left_out() -> None:
    s = spec({"graphOptimization": {}, "threadTuning": {"intraOp": [1, 2, 4]}}, search={"maxCandidates": 3})
    seen: list[CandidatePlan] = []
    evaluated, note = run_search(s, 4, lambda p: seen.append(p) or 1.0)
    assert (
        seen
        == evaluated
        == [
            CandidatePlan(intra_op=1),
            CandidatePlan(intra_op=2),
            CandidatePlan(intra_op=4),
        ]
    )
    # graph off/on x 3 thread counts
    assert note == "6 distinct candidates; exhaustive evaluates 3 (search.maxCandidates=3 leaves 3 out)"


def test_random_is_repeatable_with_a_seed_and_distinct() -> None:
    s = spec(
        {"graphOptimization": {}, "threadTuning": {"intraOp": [1, 2, 4]}},
        {"strategy": "random", "seed": 7, "maxCandidates": 4},
    )
    first, _ = run_search(s, 4, lambda p: 1.0)
    second, _ = run_search(s, 4, lambda p: 1.0)
    assert first == second
    assert len(set(first)) == 4


def test_tpe_evaluates_distinct_candidates_up_to_the_bound() -> None:
    s = spec(
        {"graphOptimization": {}, "quantization": {}, "threadTuning": {"intraOp": [1, 2, 4, 8]}},
        {"strategy": "tpe", "seed": 3, "maxCandidates": 12},
    )

    # A made-up landscape where quantized models with 4 threads are fastest.
    def latency(plan: CandidatePlan) -> float:
        return (1.0 if plan.quantization else 2.0) + abs((plan.intra_op or 1) - 4) * 0.1

    evaluated, note = run_search(s, 8, latency)
    assert len(evaluated) == 12 and len(set(evaluated)) == 12
    # graph off/on x quantization off/on x 4 thread counts
    assert note == "16 distinct candidates; tpe evaluates 12 (search.maxCandidates=12 leaves 4 out)"


def test_tpe_stops_at_the_number_of_distinct_candidates() -> None:
    s = spec({"graphOptimization": {}}, {"strategy": "tpe", "seed": 1, "maxCandidates": 10})
    evaluated, _ = run_search(s, 1, lambda p: 1.0)
    assert evaluated == [CandidatePlan(graph=True)]


def result(
    id: str, latency: float | None, accuracy: float | None = None, size: int | None = None, **kw
) -> CandidateResult:
    return CandidateResult(id=id, latency_ms=latency, accuracy=accuracy, model_size_bytes=size, **kw)


def test_pareto_front_keeps_points_nothing_beats_on_both_axes() -> None:
    assert pareto_front([(1.0, 5.0, "a"), (2.0, 4.0, "b"), (3.0, 4.0, "c"), (0.5, 9.0, "d")]) == ["a", "b", "d"]


def test_frontiers_by_accuracy_and_by_size() -> None:
    measured = [
        result("original", 2.0, 0.96, 10000),
        result("c1", 1.9, 0.96, 10000),
        result("c2", 1.2, 0.953, 4000),
        result("c3", 1.3, 0.94, 3000),
        result("c4", None, status="Failed"),
    ]
    by_accuracy, by_size = frontiers(measured, higher_is_better=True)
    assert by_accuracy == ["c1", "c2"]
    assert by_size == ["c2", "c3"]
    # for an error metric (lower is better) the same figures give another frontier
    assert frontiers(measured, higher_is_better=False)[0] == ["c2", "c3"]


def test_goals_name_the_field_a_candidate_misses() -> None:
    evaluator = Evaluator.model_validate(
        {"accuracy": {"dataset": {"file": "d.jsonl"}, "maxDegradation": 0.01}, "latency": {"minImprovementPercent": 20}}
    )
    good = result("c1", 1.0, accuracy_degradation=0.005, latency_improvement_percent=30.0)
    assert goal_problems(good, evaluator) == []
    bad = result("c2", 1.0, accuracy_degradation=0.02, latency_improvement_percent=10.0)
    assert goal_problems(bad, evaluator) == [
        "loses 0.02 accuracy, more than evaluator.accuracy.maxDegradation=0.01",
        "10.0% faster than the original, less than evaluator.latency.minImprovementPercent=20",
    ]
    slower = result("c3", 1.0, latency_improvement_percent=-3.0)
    assert goal_problems(slower, Evaluator()) == ["not faster than the original (-3.0%)"]
    tolerant = Evaluator.model_validate({"latency": {"minImprovementPercent": -5}})
    assert goal_problems(slower, tolerant) == []
    assert goal_problems(result("c5", 1.0, latency_improvement_percent=-8.0), tolerant) == [
        "8.0% slower than the original; evaluator.latency.minImprovementPercent=-5 allows at most 5% slower"
    ]
    # the original measured alongside each candidate took 1.0 ms
    paired = {"original_latency_ms": 1.0, "latency_improvement_percent": None}
    noise = result(
        "c4", 0.99, latency_ci_low_ms=0.97, latency_ci_high_ms=1.0, **{**paired, "latency_improvement_percent": 1.0}
    )
    assert goal_problems(noise, Evaluator()) == [
        "not faster than the original beyond the noise (1.0%; its interval reaches the original's figure)"
    ]
    below = result(
        "c6", 0.96, latency_ci_low_ms=0.95, latency_ci_high_ms=0.99, **{**paired, "latency_improvement_percent": 4.0}
    )
    assert goal_problems(below, Evaluator()) == []


def test_the_fastest_candidate_meeting_the_goals_is_chosen_smaller_file_on_a_tie() -> None:
    candidates = [
        result("c1", 1.0, size=900, meets_goals=True),
        result("c2", 0.8, size=500, meets_goals=False),
        result("c3", 1.0, size=400, meets_goals=True),
        result("c4", 1.5, size=100, meets_goals=True),
    ]
    chosen = choose(candidates)
    assert chosen is not None and chosen.id == "c3"
    assert choose([result("c1", 1.0, meets_goals=False)]) is None


def test_the_choice_reads_each_candidate_against_the_original_measured_alongside() -> None:
    # c2's figure is lower only because the machine was faster while it ran: the original measured in the same
    # seconds took 0.7 ms, so c2 is no faster than it, while c1 took 20% less than its original.
    candidates = [
        result("c1", 0.8, meets_goals=True, original_latency_ms=1.0),
        result("c2", 0.7, meets_goals=True, original_latency_ms=0.7),
        result("c3", 0.95, meets_goals=False, original_latency_ms=1.0),
    ]
    chosen = choose(candidates)
    assert chosen is not None and chosen.id == "c1"
    closest_one = closest([c.model_copy(update={"meets_goals": False}) for c in candidates])
    assert closest_one is not None and closest_one.id == "c1"


def test_throttled_measurements_are_named_with_what_the_metric_hides() -> None:
    measured = [result("original", 0.2, throttled_percent=100.0), result("c1", 0.1, throttled_percent=4.0)]
    assert throttling_note(measured, "p50") == (
        "the CPU limit throttled the measurements of original (100%) of their 100 ms periods; "
        "evaluator.latency.metric=p50 does not show the stalls this causes, p99 or avg does"
    )
    assert (
        throttling_note(measured, "p99")
        == "the CPU limit throttled the measurements of original (100%) of their 100 ms periods"
    )
    assert throttling_note([result("c1", 0.1, throttled_percent=4.0), result("c2", 0.1)], "p50") is None
