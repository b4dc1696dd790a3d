"""Quality in the choice (spec.quality): answers scored, each configuration's score and Wilson interval against
the floor, and a configuration whose interval lies wholly below it held back, however cheap; on scripted
answers (the load generator's asking is tests/llm/test_quality_run.py's)."""

from __future__ import annotations

import pytest

from kaliper.api.profilerun import QualityCheck
from kaliper.measure.quality import correct, first_choice, first_number, interval
from kaliper.profiling.quality import quality_scores
from kaliper.report.schema import QualityAnswers, TrialReport


@pytest.mark.parametrize(
    ("scorer", "answer", "expected", "tolerance", "scores"),
    [
        ("exact", "  Paris. ", "paris", 0, True),
        ("exact", "Paris, France", "Paris", 0, False),
        ("contains", "The capital is Paris.", "paris", 0, True),
        ("contains", "The capital is Lyon.", "Paris", 0, False),
        ("number", "It is 1,234.5 metres", "1234.5", 0, True),
        ("number", "about 3.14", "3.1416", 0.01, True),
        ("number", "about 3.2", "3.1416", 0.01, False),
        ("number", "no idea", "4", 0, False),
        ("choice", "(B) Paris", "b", 0, True),
        ("choice", "The answer is C.", "B", 0, False),
        ("agreement", "Le chat", "le chat.", 0, True),
    ],
)
def test_each_scorer(scorer: str, answer: str, expected: str, tolerance: float, scores: bool) -> None:
    assert correct(scorer, answer, expected, tolerance) is scores


def test_the_first_number_and_choice_are_read_as_written() -> None:
    assert first_number("-12 degrees, then 30") == -12.0
    assert first_choice("Answer: D, not A") == "D"
    assert first_choice("I'd say (C)") == "C"
    assert first_choice("I think D, not A") is None  # capitals in prose name no choice
    assert first_choice("no letter here") is None


def test_the_interval_is_wilsons() -> None:
    # 14 of 20: centre (0.7 + 1.96^2/40) / (1 + 1.96^2/20), half-width from the same.
    low, high = interval(14, 20)
    assert (round(low, 4), round(high, 4)) == (0.4810, 0.8545)
    assert interval(20, 20)[1] == 1.0
    assert round(interval(0, 20)[1], 4) == 0.1611


def trial(index: int, variant: str, answers: list[str | None] | None, expected: list[str | None]) -> TrialReport:
    quality = None
    if answers is not None:
        quality = QualityAnswers(rows=len(answers), expected=expected, answers=answers)
    parameters = {"variant": variant, "concurrency": "1"}
    return TrialReport.model_validate(
        {"index": index, "name": f"t{index}", "parameters": parameters} | {"status": "Succeeded", "quality": quality}
    )


def check(**fields: object) -> QualityCheck:
    return QualityCheck.model_validate({"dataset": {"file": "q.jsonl"}, **fields})


def test_a_score_wholly_below_the_floor_is_held_back_and_one_straddling_it_is_not() -> None:
    expected: list[str | None] = [str(n) for n in range(20)]
    right = [str(n) for n in range(20)]
    half = [str(n) if n % 2 else "x" for n in range(20)]  # 10 of 20
    seventeen = [str(n) if n > 2 else "x" for n in range(20)]  # 17 of 20
    scores = quality_scores(
        check(scorer="exact", floor={"min": 0.8}),
        [
            trial(0, "f32", right, expected),
            trial(1, "q8", seventeen, expected),
            trial(2, "q4", half, expected),
            trial(3, "q4", None, expected),  # a second trial of q4: it asked nothing
            trial(4, "q2", None, expected),
        ],
    )
    by_variant = {dict(k)["variant"]: s for k, s in scores.items()}
    assert (by_variant["f32"].verdict, by_variant["f32"].correct) == ("Held", 20)
    assert (by_variant["q8"].verdict, by_variant["q8"].observed) == (
        "Held",
        "17 of 20 rows (85.0%, 95% CI 64.0%-94.8%) against the floor 80.0%",
    )
    assert (by_variant["q4"].verdict, by_variant["q4"].observed) == (
        "Below",
        "10 of 20 rows (50.0%, 95% CI 29.9%-70.1%) against the floor 80.0%",
    )
    assert (by_variant["q2"].verdict, by_variant["q2"].observed) == (
        "Unknown",
        "not scored: none of its trials answered the rows (skipped, or failed before it asked)",
    )


def test_agreement_is_measured_against_the_originals_answers_and_max_drop_from_its_score() -> None:
    original = ["a b", "c d", "e f", None, "g h"]  # the original did not answer row 3: no row to hold it to
    other = ["a b", "c d", "x y", "anything", "g h."]
    scores = quality_scores(
        check(scorer="agreement", original={"variant": "f32"}, floor={"maxDrop": 0.1}),
        [trial(0, "f32", original, [None] * 5), trial(1, "q4", other, [None] * 5)],
    )
    by_variant = {dict(k)["variant"]: s for k, s in scores.items()}
    assert (by_variant["f32"].correct, by_variant["f32"].floor) == (4, 0.7)  # 4 of 5 rows it answered, less 0.1
    assert (by_variant["q4"].correct, by_variant["q4"].score) == (3, 0.6)


def test_a_floor_relative_to_an_original_needs_it_named() -> None:
    with pytest.raises(
        ValueError, match=r"quality\.floor\.maxDrop is measured from the original configuration's score"
    ):
        check(scorer="exact", floor={"maxDrop": 0.1})
    with pytest.raises(ValueError, match="the agreement scorer compares each answer with the original"):
        check(scorer="agreement", floor={"min": 0.9})


def test_quality_is_for_generated_answers_and_its_dataset_for_the_path_that_reads_it() -> None:
    from kaliper.api.profilerun import ProfileRunSpec
    from kaliper.local.executor import cluster_only
    from kaliper.profiling.plan import machine_paths_problem

    base = {
        "target": {"url": "http://127.0.0.1:8080"},
        "load": {"closedLoop": {"concurrency": 1}},
        "payload": {"prompts": {"dataset": {"configMap": {"name": "p", "key": "p.jsonl"}}}},
    }
    quality = {"dataset": {"file": "q.jsonl"}, "floor": {"min": 0.5}}
    tensors = {
        "payload": {"tensors": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4]}]}},
        "request": {"protocol": "oip-v2", "modelName": "iris"},
    }
    refused = r"quality scores generated answers \(request\.protocol openai-chat or openai-completions\) or, with"
    with pytest.raises(ValueError, match=refused):
        ProfileRunSpec.model_validate({**base, **tensors, "quality": quality})  # exact, over oip-v2
    predicted = ProfileRunSpec.model_validate({**base, **tensors, "quality": {**quality, "scorer": "accuracy"}})
    assert predicted.quality is not None and predicted.quality.scorer == "accuracy"
    chat = {"protocol": "openai-chat", "modelName": "m"}
    on_file = ProfileRunSpec.model_validate({**base, "request": chat, "quality": quality})
    assert machine_paths_problem(on_file) == (
        "spec.quality.dataset.file is a path on one machine; on Kubernetes put the file in a ConfigMap and use "
        "quality.dataset.configMap"
    )
    in_cluster = {**quality, "dataset": {"configMap": {"name": "q", "key": "q.jsonl"}}}
    on_map = ProfileRunSpec.model_validate({**base, "request": chat, "quality": in_cluster})
    assert cluster_only(on_map) == [
        "spec.payload.prompts.dataset.configMap is read inside the cluster (mounted into the load generator's pod); "
        "for `kaliper run` give the file on this machine as payload.prompts.dataset.file",
        "spec.quality.dataset.configMap is read inside the cluster (mounted into the load generator's pod); for "
        "`kaliper run` give the file on this machine as quality.dataset.file",
    ]
