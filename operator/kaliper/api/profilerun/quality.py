"""A ProfileRun's quality check (spec.quality): each configuration answers a dataset once, apart from the timed
load, and a configuration whose score is shown below the floor is not chosen however cheap it is."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from kaliper.api.base import KaliperModel, Rule, exactly_one_of, only_with
from kaliper.api.common import StringMap
from kaliper.api.profilerun.vocabulary import DatasetSource

QualityScorer = Literal["exact", "contains", "number", "choice", "agreement", "accuracy"]
"""How an answer is scored (kaliper.measure.quality)."""


class QualityFloor(KaliperModel):
    """The least score a configuration may have and still be chosen: a configuration whose score's 95%
    interval lies wholly below it is held back. Set min, or maxDrop (with quality.original)."""

    min: Annotated[float, Field(ge=0, le=1)] | None = None
    """The share of rows answered correctly (agreement: answered as the original did), such as 0.9."""
    max_drop: Annotated[float, Field(ge=0, le=1)] | None = None
    """How far below the original configuration's score a configuration may fall, such as 0.05."""

    cross_field_rules = (exactly_one_of("min", "max_drop"),)


class QualityCheck(KaliperModel):
    """Each configuration answers the dataset's rows once, one at a time, after its first trial's measured load
    (scoring never shares the clock with latency): generation greedily (temperature 0), a model's predictions
    over the Open Inference Protocol (oip-v2); each answer scored; the report gives every configuration's score
    with its Wilson 95% interval, and the choice passes over a configuration whose score is shown below the
    floor."""

    dataset: DatasetSource
    """JSON lines, one row each. Generation: {"prompt": "...", "expected": "..."} ("expected" may be left out
    for the agreement scorer; openai-chat sends the prompt as the user's message). A model's predictions
    (oip-v2, the accuracy scorer): {"inputs": {"<input name>": [...]}, "label": ...}, a ModelOptimization
    evaluator's rows."""
    scorer: QualityScorer = "exact"
    """exact: the answer equals expected (case, surrounding spaces and a final full stop aside); contains:
    expected appears in the answer; number: the answer's first number is within tolerance of expected's;
    choice: the letter the answer names ("B", "(B) Paris", "The answer is B") is expected's; agreement: the
    answer equals the original configuration's answer to the same row; accuracy (oip-v2): the model's
    prediction, from its first output (a label, or the largest class score), equals the row's label."""
    tolerance: Annotated[float, Field(ge=0)] = 0.0
    """The number scorer: how far the answer's number may be from expected's."""
    rows: Annotated[int, Field(ge=1, le=1000)] = 100
    """The dataset's first rows answered by each configuration (fewer widen the interval)."""
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = 32
    """The longest answer asked for."""
    original: StringMap | None = None
    """The configuration the others are compared with, by its parameters (such as {model_variant: f16}):
    the agreement scorer's reference answers and floor.maxDrop's reference score."""
    floor: QualityFloor
    """The least score a configuration may have and still be chosen."""

    cross_field_rules = (
        only_with(
            "floor.max_drop",
            "original",
            message="quality.floor.maxDrop is measured from the original configuration's score; name it in "
            "quality.original (its parameters, such as {model_variant: f16}), or set floor.min",
            at="original",
        ),
        Rule(
            cel="!has(self.scorer) || self.scorer != 'agreement' || has(self.original)",
            message="the agreement scorer compares each answer with the original configuration's; name it in "
            "quality.original (its parameters, such as {model_variant: f16})",
            check=lambda q: q.scorer != "agreement" or q.original is not None,
            field_path=".original",
        ),
    )
