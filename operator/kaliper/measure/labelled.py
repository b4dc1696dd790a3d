"""Labelled rows and a model's predictions, read one way wherever a model's accuracy is measured: a
ModelOptimization's evaluator (kaliper.optimize: each candidate in-process) and a ProfileRun's quality check
(kaliper.loadgen.quality: each configuration's server, over the Open Inference Protocol). One row per line,
{"inputs": {"<input name>": <value>}, "label": <value>}; one prediction per row from the model's first output."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

ROW_EXAMPLE = '{"inputs": {"<input name>": [...]}, "label": ...}'


class DatasetError(Exception):
    """A dataset that does not fit the model; the message names the line, the field and the fix."""


class UnscorableOutput(ValueError):
    """A model output that does not give one prediction per row; the message says what it needs."""


@dataclass(frozen=True)
class Row:
    inputs: dict[str, Any]
    label: Any
    line: int
    """1-based line of the file the row came from (blank lines count)."""


def parse_row(text: str, line: int, field: str) -> Row:
    """One line of a labelled dataset as a Row; `field` names the dataset in errors."""
    where = f"{field} line {line}"
    value = json_object(text, where, ROW_EXAMPLE)
    inputs = value.get("inputs")
    if not isinstance(inputs, dict):
        found = "none" if inputs is None else json_kind(inputs)
        raise DatasetError(
            f'{where}: "inputs" must be an object of input values (found {found}); rows look like {ROW_EXAMPLE}'
        )
    if "label" not in value or value["label"] is None:
        raise DatasetError(f'{where}: the row has no "label"; rows look like {ROW_EXAMPLE}')
    label = value["label"]
    if isinstance(label, list | dict):
        raise DatasetError(f"{where}: label must be one number or string, not {json_kind(label)}")
    return Row(inputs=inputs, label=label, line=line)


def json_object(text: str, where: str, example: str) -> dict[str, Any]:
    """One line of a JSON-lines dataset as an object; errors say where and show a row like `example`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); each line holds one row like {example}"
        ) from exc
    if not isinstance(value, dict):
        raise DatasetError(f"{where}: a row is a JSON object like {example}, not {json_kind(value)}")
    return value


def json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, int | float) else "null"


def per_row(value: np.ndarray, name: str) -> np.ndarray:
    """One prediction per row of a model's output: integer, boolean or string tensors are labels ([N] or
    [N, 1]); a float [N, C] tensor with C > 1 holds class scores, whose largest is the prediction; a float [N] or
    [N, 1] tensor holds regression values."""
    if value.ndim == 2 and value.shape[1] > 1 and np.issubdtype(value.dtype, np.floating):
        return value.argmax(axis=1)
    if value.ndim == 1 or (value.ndim == 2 and value.shape[1] == 1):
        return value.reshape(-1)
    raise UnscorableOutput(
        f"the model's first output {name} has shape {list(value.shape)}; accuracy needs one prediction per row "
        "([N] labels or values, or [N, classes] scores)"
    )
