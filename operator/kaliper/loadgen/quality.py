"""A configuration's answers to the quality dataset (a ProfileRun's spec.quality): asked once its stages are over,
with no load running, so scoring never shares the clock with latency; one row at a time, each answer kept as the
server gave it: generation greedily (temperature 0, unstreamed), a model's prediction over the Open Inference
Protocol (oip-v2) read from its first output as a ModelOptimization's evaluator reads it
(kaliper.measure.labelled). Scoring them is the plan's (kaliper.profiling.quality), which compares
configurations."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from kaliper.loadgen.config import LoadGenConfig, LoadGenError, QualityAsk, request_headers
from kaliper.measure import labelled
from kaliper.report.schema import QualityAnswers

ROW_EXAMPLE = '{"prompt": "What is 2 + 2?", "expected": "4"}'
FIELD = "quality.dataset"
TIMEOUT_S = 120.0  # one greedy answer of at most maxTokens tokens


def read_rows(ask: QualityAsk, labelled_rows: bool = False) -> list[tuple[Any, str | None]]:
    """(what to ask, expected) of the dataset's first rows: a prompt, or a labelled row's inputs; LoadGenError
    naming the line that is not a row."""
    rows: list[tuple[Any, str | None]] = []
    try:
        lines = Path(ask.file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadGenError(f"quality.dataset: cannot read {ask.file}: {exc}") from exc
    example = labelled.ROW_EXAMPLE if labelled_rows else ROW_EXAMPLE
    for number, text in enumerate(lines, start=1):
        if len(rows) >= ask.rows:
            break
        if not text.strip():
            continue
        try:
            if labelled_rows:
                row = labelled.parse_row(text, number, FIELD)
                rows.append((row.inputs, str(row.label)))
                continue
            found = labelled.json_object(text, f"{FIELD} line {number}", ROW_EXAMPLE)
        except labelled.DatasetError as exc:
            raise LoadGenError(str(exc)) from exc
        prompt, expected = found.get("prompt"), found.get("expected")
        if not isinstance(prompt, str) or not (expected is None or isinstance(expected, str | int | float)):
            raise LoadGenError(f"{FIELD} line {number}: a row is {ROW_EXAMPLE}")
        rows.append((prompt, None if expected is None else str(expected)))
    if not rows:
        raise LoadGenError(f"{FIELD} {ask.file} has no rows; write one per line: {example}")
    return rows


def infer_body(inputs: dict[str, Any]) -> dict[str, Any]:
    """One row's Open Inference Protocol request: each input a batch of one, its datatype from its values."""
    tensors = []
    for name, value in inputs.items():
        array = np.asarray(value)
        tensors.append(
            {
                "name": name,
                "shape": [1, *array.shape],
                "datatype": _datatype(array),
                "data": array.reshape(-1).tolist(),
            }
        )
    return {"inputs": tensors}


def _datatype(array: np.ndarray) -> str:
    if array.dtype.kind == "b":
        return "BOOL"
    if array.dtype.kind in "iu":
        return "INT64"
    if array.dtype.kind == "f":
        return "FP32"
    return "BYTES"


def prediction(document: dict[str, Any]) -> str:
    """The row's prediction from the response's first output, as the evaluator reads a model's."""
    output = document["outputs"][0]
    found = labelled.per_row(np.asarray(output["data"]).reshape(output["shape"]), output["name"])
    return str(found[0].item())


def request_body(config: LoadGenConfig, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One greedy, unstreamed request for the row's answer, in the run's protocol."""
    body: dict[str, Any] = {"model": config.request.model_name, "max_tokens": max_tokens, "temperature": 0}
    if config.request.protocol == "openai-chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return {**body, "stream": False}


def answer_text(config: LoadGenConfig, document: dict[str, Any]) -> str:
    choice = document["choices"][0]
    if config.request.protocol == "openai-chat":
        return choice["message"].get("content") or ""
    return choice["text"]


def ask(config: LoadGenConfig) -> QualityAnswers:
    """Every row's answer from the target, in order; a failed request leaves its row unanswered (None)."""
    assert config.quality is not None
    predicting = config.request.protocol == "oip-v2"
    rows = read_rows(config.quality, labelled_rows=predicting)
    headers = {**request_headers(config), "Content-Type": "application/json"}
    answers: list[str | None] = []
    failed, first_failure = 0, None
    started = time.monotonic()
    with httpx.Client(timeout=TIMEOUT_S) as client:
        for asked, _ in rows:
            body = infer_body(asked) if predicting else request_body(config, asked, config.quality.max_tokens)
            try:
                response = client.post(config.target, json=body, headers=headers)
                response.raise_for_status()
                document = response.json()
                answers.append(prediction(document) if predicting else answer_text(config, document))
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:  # UnscorableOutput too
                failed += 1
                first_failure = first_failure or f"{type(exc).__name__}: {exc}"[:512]
                answers.append(None)
    return QualityAnswers(
        rows=len(rows),
        expected=[expected for _, expected in rows],
        answers=answers,
        failed=failed,
        first_failure=first_failure,
        seconds=round(time.monotonic() - started, 3),
    )
