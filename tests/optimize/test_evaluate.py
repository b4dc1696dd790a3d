"""Latency figures from literal samples, predictions from real sessions, and the accuracy metrics."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from skl2onnx import to_onnx
from skl2onnx.common.data_types import FloatTensorType
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from kaliper.optimize.evaluate import (
    EvaluationError,
    accuracy_interval,
    degradation,
    higher_is_better,
    latency_figures,
    paired_samples,
    predict,
    score,
)

Dims = list[int | str | None]


def _identity(dtype: int, dims: Dims) -> ort.InferenceSession:
    """A session whose only output is its input x: the test chooses what the model "predicts"."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", dtype, dims)],
        [helper.make_tensor_value_info("y", dtype, dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


# --- latency -------------------------------------------------------------------------------------------------------


def test_figures_of_one_to_a_hundred_ms_by_the_mean() -> None:
    samples = [float(v) for v in range(100, 0, -1)]  # unordered on purpose
    figures = latency_figures(samples, "avg", warmup_runs=10, batch_size=4)
    assert (figures.runs, figures.warmup_runs, figures.batch_size, figures.metric) == (100, 10, 4, "avg")
    assert (figures.p50_ms, figures.p90_ms, figures.p95_ms, figures.p99_ms) == (50.0, 90.0, 95.0, 99.0)
    assert (figures.min_ms, figures.max_ms, figures.mean_ms, figures.value_ms) == (1.0, 100.0, 50.5, 50.5)
    # 50.5 ± 1.96 · 29.0115 / √100
    assert figures.ci_low_ms == pytest.approx(44.813748, abs=1e-6)
    assert figures.ci_high_ms == pytest.approx(56.186252, abs=1e-6)


@pytest.mark.parametrize(
    ("metric", "value", "low", "high"),
    [
        # The exact binomial ranks (SciPy's quantile_test on 1..100 gives the same): the 40th and 61st samples.
        ("p50", 50.0, 40.0, 61.0),
        ("p90", 90.0, 84.0, 96.0),
        ("p95", 95.0, 90.0, 100.0),  # 0.95^99 = 0.0062 is left beyond the last: within the 0.025 a tail may leave
        ("p99", 99.0, 97.0, None),  # 0.99^99 = 0.37 is: no upper bound
    ],
)
def test_percentile_figures_bracket_by_order_statistics(
    metric: str, value: float, low: float, high: float | None
) -> None:
    figures = latency_figures([float(v) for v in range(1, 101)], metric)  # type: ignore[arg-type]
    assert (figures.value_ms, figures.ci_low_ms, figures.ci_high_ms) == (value, low, high)


def test_one_sample_has_no_interval_for_the_mean() -> None:
    figures = latency_figures([2.5], "avg")
    assert (figures.value_ms, figures.ci_low_ms, figures.ci_high_ms, figures.p99_ms) == (2.5, None, None, 2.5)


def test_nearest_rank_on_a_few_samples() -> None:
    figures = latency_figures([4.0, 1.0, 3.0, 2.0, 10.0], "p90")
    assert (figures.p50_ms, figures.p90_ms, figures.p99_ms, figures.mean_ms) == (3.0, 10.0, 10.0, 4.0)
    assert (figures.ci_low_ms, figures.ci_high_ms) == (3.0, None)  # ranks 4.5 ± 1.96·√0.45: the 3rd, beyond 5th


def test_the_interval_of_a_mean_never_goes_below_zero() -> None:
    # one 80 ms stall among nineteen 0.05 ms runs: mean 4.0475, sd 17.877, half-width 1.96 * 17.877 / sqrt(20)
    figures = latency_figures([0.05] * 19 + [80.0], "avg")
    assert figures.ci_low_ms == 0.0
    assert figures.ci_high_ms == pytest.approx(11.882, abs=0.001)


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="no latency samples"):
        latency_figures([], "avg")


class Recording:
    """A real session whose calls are written down, to see the order in which they were measured."""

    def __init__(self, session: object, name: str, calls: list[str]) -> None:
        self.session, self.name, self.calls = session, name, calls

    def run(self, outputs: object, feeds: object) -> object:
        self.calls.append(self.name)
        return self.session.run(outputs, feeds)  # type: ignore[attr-defined]


def test_paired_samples_alternate_blocks_of_each_session() -> None:
    calls: list[str] = []
    session = _identity(TensorProto.FLOAT, ["N", 4])
    a, b = Recording(session, "a", calls), Recording(session, "b", calls)
    feeds = {"x": np.ones((4, 4), dtype=np.float32)}
    samples = paired_samples([a, b], feeds, warmup_runs=2, runs=6, blocks=3, min_seconds=0)  # type: ignore[list-item]
    assert [len(taken) for taken in samples] == [6, 6]
    # two warm-up calls each, then blocks of 6/3 = 2 calls, alternating, the order flipped every round
    assert calls == ["a", "a", "b", "b", "a", "a", "b", "b", "b", "b", "a", "a", "a", "a", "b", "b"]
    assert all(ms > 0 for taken in samples for ms in taken)


def test_paired_samples_go_on_until_the_minimum_time_up_to_a_bound() -> None:
    session = _identity(TensorProto.FLOAT, ["N", 4])
    feeds = {"x": np.ones((4, 4), dtype=np.float32)}
    # an hour is never reached: the bound, 4 x 5 runs, ends it
    samples = paired_samples([session, session], feeds, 0, runs=5, blocks=5, min_seconds=3600, max_factor=4)
    assert [len(taken) for taken in samples] == [20, 20]


# --- predictions ---------------------------------------------------------------------------------------------------


def test_class_scores_give_the_index_of_the_largest() -> None:
    session = _identity(TensorProto.FLOAT, ["N", 3])
    batches = [
        {"x": np.array([[0.1, 0.7, 0.2], [0.9, 0.05, 0.05]], dtype=np.float32)},
        {"x": np.array([[0.2, 0.3, 0.5]], dtype=np.float32)},
    ]
    assert predict(session, batches).tolist() == [1, 0, 2]


def test_a_single_column_of_floats_is_a_regression() -> None:
    session = _identity(TensorProto.FLOAT, ["N", 1])
    values = predict(session, [{"x": np.array([[1.5], [-2.0]], dtype=np.float32)}])
    assert values.tolist() == [1.5, -2.0]
    assert predict(_identity(TensorProto.DOUBLE, ["N"]), [{"x": np.array([0.25, 4.0])}]).tolist() == [0.25, 4.0]


def test_labels_are_taken_as_they_are() -> None:
    ints = _identity(TensorProto.INT64, ["N"])
    assert predict(ints, [{"x": np.array([2, 0], dtype=np.int64)}]).tolist() == [2, 0]
    words = _identity(TensorProto.STRING, ["N", 1])
    batch = {"x": np.array([["setosa"], ["virginica"]], dtype=object)}
    assert predict(words, [batch]).tolist() == ["setosa", "virginica"]


def test_an_output_without_one_value_per_row_is_refused() -> None:
    session = _identity(TensorProto.FLOAT, ["N", 2, 2])
    with pytest.raises(EvaluationError) as error:
        predict(session, [{"x": np.zeros((3, 2, 2), dtype=np.float32)}])
    assert str(error.value) == (
        "the model's first output y has shape [3, 2, 2]; accuracy needs one prediction per row ([N] labels or "
        "values, or [N, classes] scores)"
    )


def test_a_sequence_output_is_refused() -> None:
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x"], ["s"])],
        "seq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, ["N"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(EvaluationError) as error:
        predict(session, [{"x": np.zeros(2, dtype=np.float32)}])
    assert str(error.value) == (
        "the model's first output s is seq(tensor(float)), not a tensor; accuracy needs the first output to be the "
        "labels, class scores or values (skl2onnx: convert classifiers without ZipMap)"
    )


def test_an_iris_classifier_scores_its_accuracy() -> None:
    x, y = load_iris(return_X_y=True)
    estimator = LogisticRegression(max_iter=500).fit(x, y)
    model = to_onnx(
        estimator,
        initial_types=[("float_input", FloatTensorType([None, 4]))],
        options={id(estimator): {"zipmap": False}},
        target_opset=17,
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    features = x.astype(np.float32)
    batches = [{"float_input": features[i : i + 64]} for i in range(0, 150, 64)]
    predictions = predict(session, batches)
    assert predictions.shape == (150,)
    assert score("accuracy", y, predictions) == pytest.approx(146 / 150)


# --- metrics -------------------------------------------------------------------------------------------------------


def test_classification_scores() -> None:
    assert score("accuracy", np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2])) == 0.75
    # labels 0 and 1: the F1 of class 1 (precision 2/2, recall 2/3)
    assert score("f1", np.array([0, 1, 1, 0, 1]), np.array([0, 1, 0, 0, 1])) == pytest.approx(0.8)
    # three classes: the mean of the per-class F1 (1, 2/3, 2/3)
    assert score("f1", np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2])) == pytest.approx(7 / 9)
    assert score("f1", np.array(["a", "b", "b"]), np.array(["a", "b", "a"])) == pytest.approx(2 / 3)


def test_regression_scores() -> None:
    labels, predictions = np.array([1.0, 2.0, 3.0]), np.array([1.5, 2.0, 2.0])
    assert score("mae", labels, predictions) == pytest.approx(0.5)
    assert score("mse", labels, predictions) == pytest.approx(1.25 / 3)
    assert score("rmse", labels, predictions) == pytest.approx(0.645497, abs=1e-6)
    assert score("r2", labels, predictions) == pytest.approx(0.375)


@pytest.mark.parametrize(
    ("metric", "labels", "predictions", "message"),
    [
        (
            "accuracy",
            np.array(["setosa", "virginica"]),
            np.array([0, 2]),
            "the labels are strings and the model predicts numbers; write the labels as the model outputs them "
            "(class indices for models that output scores)",
        ),
        (
            "mae",
            np.array(["a", "b"]),
            np.array(["a", "a"]),
            "metric mae needs numeric labels; use accuracy or f1 for classes",
        ),
        ("accuracy", np.array([0, 1, 2]), np.array([0, 1]), "3 labels but 2 predictions; each row needs one of each"),
        (
            "accuracy",
            np.array([0, 1]),
            np.array([0.2, 0.9]),
            "evaluator.accuracy.metric accuracy: Classification metrics can't handle a mix of binary and continuous "
            "targets",
        ),
    ],
)
def test_labels_that_do_not_fit_the_predictions(
    metric: str, labels: np.ndarray, predictions: np.ndarray, message: str
) -> None:
    with pytest.raises(EvaluationError) as error:
        score(metric, labels, predictions)  # type: ignore[arg-type]
    assert str(error.value) == message


def test_direction_and_degradation() -> None:
    assert [m for m in ("accuracy", "f1", "mae", "mse", "rmse", "r2") if higher_is_better(m)] == [
        "accuracy",
        "f1",
        "r2",
    ]
    assert degradation("accuracy", 0.95, 0.93) == pytest.approx(0.02)
    assert degradation("f1", 0.80, 0.85) == pytest.approx(-0.05)  # a gain
    assert degradation("rmse", 1.0, 1.5) == pytest.approx(0.5)
    assert degradation("mae", 0.5, 0.4) == pytest.approx(-0.1)
    assert degradation("r2", 0.9, 0.92) == pytest.approx(-0.02)


def test_accuracy_has_the_wilson_interval_of_a_share_of_rows_and_other_metrics_none() -> None:
    # 147 of 150 rows right: p 0.98, centre (p + z²/2n)/(1 + z²/n) = 0.9680, half-width 0.0252 (z = 1.96).
    assert accuracy_interval("accuracy", 147 / 150, 150) == (0.9429, 0.9932)
    assert accuracy_interval("accuracy", 0.5, 4) == (0.15, 0.85)  # four rows decide little
    assert accuracy_interval("f1", 0.9, 10) is None
    assert accuracy_interval("rmse", 0.3, 10) is None
