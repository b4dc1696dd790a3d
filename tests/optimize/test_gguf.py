"""The GGUF optimization's decisions without a server: greedy agreement, per-token figures, the prompts file
and the goals, with literal inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.api.modeloptimization import GenerationEvaluator, ModelOptimizationSpec
from kaliper.optimize.context import OptimizationFailed
from kaliper.optimize.gguf import Answer, agreement, check_gguf, goal_problems, per_token_figures, read_prompts
from kaliper.report.optimization import CandidateResult


def test_agreement_counts_the_original_tokens_reproduced_before_the_first_difference() -> None:
    assert agreement([5, 6, 7, 8], [5, 6, 7, 8]) == 1.0
    assert agreement([5, 6, 7, 8], [5, 6, 9, 8]) == 0.5  # the 8 after a difference does not count
    assert agreement([5, 6, 7, 8], [1, 6, 7, 8]) == 0.0
    assert agreement([5, 6, 7, 8], [5, 6]) == 0.5  # a shorter answer: what it reproduced
    assert agreement([], [1]) == 1.0


def test_time_per_token_is_a_mean_over_answers_with_its_interval() -> None:
    answers = [
        Answer(
            [1],
            10,
            5.0,
            32,
            ms,
        )
        for ms in (32.0, 48.0, 40.0, 40.0)
    ]  # 1.0, 1.5, 1.25, 1.25 ms/token
    figures = per_token_figures(answers)
    assert (figures.runs, figures.value_ms, figures.min_ms, figures.max_ms) == (4, 1.25, 1.0, 1.5)
    # mean +- 1.96 sd / sqrt(4); sd of (1.0, 1.5, 1.25, 1.25) is 0.2041
    assert figures.ci_low_ms == pytest.approx(1.25 - 1.96 * 0.204124 / 2, abs=1e-5)
    with pytest.raises(OptimizationFailed):
        per_token_figures([Answer([], 10, 5.0, 0, 0.0)])


def test_prompts_come_from_prompt_rows_and_bad_rows_name_the_line(tmp_path: Path) -> None:
    rows = tmp_path / "prompts.jsonl"
    rows.write_text('{"prompt": "one"}\n\n{"prompt": "two"}\n{"prompt": "three"}\n')
    assert read_prompts(rows, 2) == ["one", "two"]
    rows.write_text('{"prompt": "one"}\n{"text": "two"}\n')
    with pytest.raises(OptimizationFailed) as failed:
        read_prompts(rows, 8)
    assert str(failed.value) == ('evaluator.generation.dataset line 2: expected {"prompt": "..."}, got {"text": "two"}')
    with pytest.raises(OptimizationFailed) as failed:
        read_prompts(None, 8)
    assert failed.value.reason == "DatasetMissing"


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"\x08\x07\x12\x04")
    with pytest.raises(OptimizationFailed) as failed:
        check_gguf(onnx)
    assert failed.value.reason == "ModelDidNotLoad"
    assert str(failed.value) == (
        f"model.source: model {onnx} is not a GGUF file (it starts with b'\\x08\\x07\\x12\\x04', not b'GGUF'): "
        "model.framework gguf takes GGUF models; convert the model with llama.cpp's convert_hf_to_gguf.py or give a "
        ".gguf file"
    )


def candidate(improvement: float, agreed: float, ci_high: float = 0.9) -> CandidateResult:
    return CandidateResult(
        id="q4_0",
        latency_ms=1.0,
        latency_ci_high_ms=ci_high,
        original_latency_ms=1.0 / (1 - improvement / 100),
        latency_improvement_percent=improvement,
        accuracy=agreed,
    )


def test_goals_are_the_agreement_and_a_speed_up_beyond_the_noise() -> None:
    evaluator = GenerationEvaluator.model_validate({"dataset": {"file": "p.jsonl"}, "minAgreement": 0.75})
    assert goal_problems(candidate(40.0, 0.9), evaluator, noise_percent=2.0) == []
    assert goal_problems(candidate(40.0, 0.5), evaluator, noise_percent=2.0) == [
        "reproduces 50% of the original's greedy tokens, less than evaluator.generation.minAgreement=0.75"
    ]
    assert goal_problems(candidate(1.5, 0.9), evaluator, noise_percent=2.0) == [
        "not faster than the original beyond the noise (1.5%, noise 2%)"
    ]
    wanted = evaluator.model_copy(update={"min_improvement_percent": 50.0})
    assert goal_problems(candidate(40.0, 0.9), wanted, noise_percent=2.0) == [
        "40.0% less time per token than the original, less than evaluator.generation.minImprovementPercent=50"
    ]
    assert goal_problems(candidate(-5.0, 0.9), wanted, noise_percent=2.0) == [
        "5.0% more time per token than the original; evaluator.generation.minImprovementPercent=50 asks for less"
    ]


def test_a_negative_improvement_goal_lets_a_smaller_model_be_that_much_slower() -> None:
    tolerant = GenerationEvaluator.model_validate({"dataset": {"file": "p.jsonl"}, "minImprovementPercent": -25})
    assert goal_problems(candidate(-20.0, 0.9), tolerant, noise_percent=2.0) == []
    assert goal_problems(candidate(1.0, 0.9), tolerant, noise_percent=2.0) == []  # the noise rule is the default's
    assert goal_problems(candidate(-30.0, 0.9), tolerant, noise_percent=2.0) == [
        "30.0% more time per token than the original; evaluator.generation.minImprovementPercent=-25 allows at "
        "most 25% more"
    ]
    with pytest.raises(ValueError, match=r"minImprovementPercent\n  Input should be greater than -100"):
        GenerationEvaluator.model_validate({"dataset": {"file": "p.jsonl"}, "minImprovementPercent": -100})


def test_gguf_models_take_the_gguf_pass_and_the_generation_evaluator_only() -> None:
    base = {
        "model": {"source": {"file": "m.gguf"}, "framework": "gguf"},
        "passes": {"ggufQuantization": {"types": ["Q8_0", "Q4_K_M"]}},
        "evaluator": {"generation": {"dataset": {"file": "p.jsonl"}}},
    }
    spec = ModelOptimizationSpec.model_validate(base)
    assert spec.evaluation_dataset() is not None and spec.evaluation_dataset()[0] == "evaluator.generation.dataset"  # type: ignore[index]
    for change, message in (
        ({"passes": {"ggufQuantization": {"types": ["Q8_0"]}, "threadTuning": {}}}, "the only pass for GGUF"),
        ({"evaluator": {}}, "measured by evaluator.generation"),
        ({"model": {"source": {"file": "m.onnx"}}}, "optimized by passes.ggufQuantization alone"),
    ):
        with pytest.raises(ValueError) as refused:
            ModelOptimizationSpec.model_validate({**base, **change})
        assert message in str(refused.value)
