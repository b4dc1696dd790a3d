"""Measuring a candidate: in-process latency of session.run, its predictions, and the accuracy metric."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

import numpy as np
import onnxruntime as ort

from kaliper.measure import quality
from kaliper.measure.labelled import UnscorableOutput, per_row
from kaliper.measure.statistics import percentile_rank, rank_interval
from kaliper.report.optimization import LatencyMeasurement

LatencyMetric = Literal["avg", "p50", "p90", "p95", "p99"]
AccuracyMetric = Literal["accuracy", "f1", "mae", "mse", "rmse", "r2"]

_Z95 = 1.96


class EvaluationError(Exception):
    """The model's output or the labels cannot be scored; the message says why and what to change."""


# --- latency -----------------------------------------------------------------------------------------


def paired_samples(
    sessions: Sequence[ort.InferenceSession],
    feeds: dict[str, np.ndarray],
    warmup_runs: int,
    runs: int,
    blocks: int = 10,
    min_seconds: float = 1.0,
    max_factor: int = 10,
) -> list[list[float]]:
    """Latency samples (ms) of each session, taken in alternating blocks with the order flipped every round:
    a change in the machine's load during the measurement falls on every session alike, so their ratio holds
    where figures taken one after the other drift (on this project's machine the same configuration measured
    a minute apart differed by up to 39%). Each gets at least `runs` samples and the whole measurement lasts
    at least `min_seconds` (ten 100 ms CFS periods, so a CPU limit's throttling shows however fast the model
    is), up to `max_factor` x `runs` samples each."""
    for session in sessions:
        for _ in range(warmup_runs):
            session.run(None, feeds)
    block = max(1, -(-runs // blocks))
    samples: list[list[float]] = [[] for _ in sessions]
    pairs = list(zip(sessions, samples, strict=True))
    started, round_ = time.monotonic(), 0
    while len(samples[0]) < runs or (time.monotonic() - started < min_seconds and len(samples[0]) < max_factor * runs):
        for session, taken in pairs if round_ % 2 == 0 else reversed(pairs):
            for _ in range(block):
                begun = time.perf_counter_ns()
                session.run(None, feeds)
                taken.append((time.perf_counter_ns() - begun) / 1e6)
        round_ += 1
    return samples


def latency_figures(
    samples_ms: list[float], metric: LatencyMetric, warmup_runs: int = 0, batch_size: int = 1
) -> LatencyMeasurement:
    """The figures of latency samples: percentiles by the nearest-rank rule, the mean, and a 95% interval for
    the deciding figure (order statistics for a percentile, mean ± 1.96·sd/√n for avg; none from one sample)."""
    if not samples_ms:
        raise ValueError("no latency samples: runs must be at least 1")
    ordered = sorted(samples_ms)
    count = len(ordered)

    def at(percentile: float) -> float:
        return ordered[percentile_rank(count, percentile) - 1]

    mean = statistics.fmean(ordered)
    low: float | None
    high: float | None
    if metric == "avg":
        value = mean
        if count > 1:
            half = _Z95 * statistics.stdev(ordered) / math.sqrt(count)
            # A heavy tail (a throttled period among few runs) can put the normal interval below zero.
            low, high = max(0.0, mean - half), mean + half
        else:
            low = high = None
    else:
        percentile = float(metric[1:])
        value = at(percentile)
        low_rank, high_rank = rank_interval(count, percentile / 100)
        low = ordered[low_rank - 1]
        high = ordered[high_rank - 1] if high_rank is not None else None
    return LatencyMeasurement(
        runs=count,
        warmup_runs=warmup_runs,
        batch_size=batch_size,
        metric=metric,
        value_ms=value,
        ci_low_ms=low,
        ci_high_ms=high,
        mean_ms=mean,
        p50_ms=at(50),
        p90_ms=at(90),
        p95_ms=at(95),
        p99_ms=at(99),
        min_ms=ordered[0],
        max_ms=ordered[-1],
    )


# --- predictions -------------------------------------------------------------------------------------


def predict(session: ort.InferenceSession, batches: Iterable[dict[str, np.ndarray]]) -> np.ndarray:
    """One prediction per row, from the model's FIRST output (skl2onnx classifiers put the label there), read as
    a ProfileRun's quality check reads a server's (kaliper.measure.labelled.per_row)."""
    output = session.get_outputs()[0]
    parts: list[np.ndarray] = []
    for feed in batches:
        value = session.run([output.name], feed)[0]
        if not isinstance(value, np.ndarray):
            raise EvaluationError(
                f"the model's first output {output.name} is {output.type}, not a tensor; accuracy needs the first "
                "output to be the labels, class scores or values (skl2onnx: convert classifiers without ZipMap)"
            )
        try:
            parts.append(per_row(value, output.name))
        except UnscorableOutput as exc:
            raise EvaluationError(str(exc)) from exc
    if not parts:
        return np.asarray([])
    return np.concatenate(parts)


# --- metrics -----------------------------------------------------------------------------------------


def score(metric: AccuracyMetric, labels: np.ndarray, predictions: np.ndarray) -> float:
    """The metric of the predictions against the labels (scikit-learn's definitions).

    f1 is the F1 of class 1 when the labels are 0 and 1 (binary), and the unweighted mean of the per-class F1
    (macro) otherwise, so every class counts the same whatever its size.
    """
    from sklearn import metrics

    if len(labels) != len(predictions):
        raise EvaluationError(f"{len(labels)} labels but {len(predictions)} predictions; each row needs one of each")
    labels_text = labels.dtype.kind in "OUS"
    predictions_text = predictions.dtype.kind in "OUS"
    if labels_text != predictions_text:
        raise EvaluationError(
            f"the labels are {'strings' if labels_text else 'numbers'} and the model predicts "
            f"{'strings' if predictions_text else 'numbers'}; write the labels as the model outputs them (class "
            "indices for models that output scores)"
        )
    try:
        if metric == "accuracy":
            return float(metrics.accuracy_score(labels, predictions))
        if metric == "f1":
            binary = not labels_text and set(np.unique(np.concatenate([labels, predictions])).tolist()) <= {0, 1}
            return float(metrics.f1_score(labels, predictions, average="binary" if binary else "macro"))
        if labels_text:
            raise EvaluationError(f"metric {metric} needs numeric labels; use accuracy or f1 for classes")
        if metric == "mae":
            return float(metrics.mean_absolute_error(labels, predictions))
        if metric == "mse":
            return float(metrics.mean_squared_error(labels, predictions))
        if metric == "rmse":
            return float(metrics.root_mean_squared_error(labels, predictions))
        return float(metrics.r2_score(labels, predictions))
    except ValueError as exc:  # scikit-learn refuses mixed label kinds (continuous predictions for accuracy...)
        raise EvaluationError(f"evaluator.accuracy.metric {metric}: {exc}") from exc


def accuracy_interval(metric: AccuracyMetric, value: float, rows: int) -> tuple[float, float] | None:
    """The Wilson 95% interval of an accuracy over `rows` rows (a share of rows right, scored as a ProfileRun's
    quality check scores its rows); None for the other metrics, which are no share of rows."""
    if metric != "accuracy" or rows == 0:
        return None
    low, high = quality.interval(round(value * rows), rows)
    return round(low, 4), round(high, 4)


class AccuracyFigures(NamedTuple):
    metric: AccuracyMetric
    value: float
    ci_low: float | None
    ci_high: float | None


def accuracy_figures(metric: AccuracyMetric, labels: np.ndarray, predictions: np.ndarray) -> AccuracyFigures:
    """A candidate's accuracy figures: the metric's value, and its interval where it has one."""
    value = round(score(metric, labels, predictions), 6)
    low, high = accuracy_interval(metric, value, len(labels)) or (None, None)
    return AccuracyFigures(metric, value, low, high)


def higher_is_better(metric: AccuracyMetric) -> bool:
    """accuracy, f1 and r2 grow as the model improves; the error metrics shrink."""
    return metric in ("accuracy", "f1", "r2")


def degradation(metric: AccuracyMetric, original: float, candidate: float) -> float:
    """How much worse the candidate scores than the original, in the metric's units (negative: better)."""
    return original - candidate if higher_is_better(metric) else candidate - original
