"""The evaluation dataset (evaluator.accuracy.dataset): labelled rows, one JSON object per line,
{"inputs": {"<input name>": <value: scalar or list>}, "label": <scalar>}, turned into batches of the model's inputs;
and generated inputs for latency when there is no dataset.

The first dimension of every input is the batch axis: each row holds one item, and rows are stacked along it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from kaliper.api.common import TensorSpec
from kaliper.measure import labelled
from kaliper.measure.labelled import DatasetError, Row

FIELD = "evaluator.accuracy.dataset"

# ONNX Runtime's type strings -> numpy dtypes for the inputs a dataset can fill.
DTYPES: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint64)": np.uint64,
    "tensor(uint32)": np.uint32,
    "tensor(uint16)": np.uint16,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
    "tensor(string)": np.object_,
}


# --- reading -----------------------------------------------------------------------------------------


def dataset_lines(path: Path, limit: int | None = None) -> list[tuple[int, str]]:
    """(line number, text) of the dataset file's non-blank lines, up to `limit` of them; DatasetError when it
    cannot be read as text."""
    found: list[tuple[int, str]] = []
    try:
        with path.open(encoding="utf-8") as lines:
            for number, text in enumerate(lines, start=1):
                if limit is not None and len(found) >= limit:
                    break
                if text.strip():
                    found.append((number, text))
    except OSError as exc:
        raise DatasetError(f"{FIELD}: cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{FIELD}: {path} is not UTF-8 text ({exc.reason}); write it as JSON lines") from exc
    return found


def read_rows(path: Path, limit: int | None = None) -> list[Row]:
    """The rows of a JSON-lines file, up to `limit`; blank lines are skipped."""
    return [parse_row(text, number) for number, text in dataset_lines(path, limit)]


def parse_row(text: str, line: int) -> Row:
    """One line of the dataset as a Row."""
    return labelled.parse_row(text, line, FIELD)


# --- checking against the model ----------------------------------------------------------------------


def check_fields(rows: Sequence[Row], session_inputs: Sequence[ort.NodeArg]) -> None:
    """Every row has exactly the model's inputs, each convertible to its type and shaped as one batch item."""
    names = [arg.name for arg in session_inputs]
    listed = ", ".join(names)
    example = '{"inputs": {' + ", ".join(f'"{n}": [...]' for n in names) + '}, "label": ...}'
    shapes: dict[str, tuple[tuple[int, ...], int]] = {}  # first row's shape of inputs with dynamic dims, and its line
    for row in rows:
        where = f"{FIELD} line {row.line}"
        for name in names:
            if name not in row.inputs:
                raise DatasetError(
                    f"{where}: inputs has no field '{name}' (the model's inputs are: {listed}); "
                    f"rows look like {example}"
                )
        for name in row.inputs:
            if name not in names:
                raise DatasetError(
                    f"{where}: inputs has a field '{name}' the model does not take (the model's inputs are: {listed}); "
                    "remove it"
                )
        for arg in session_inputs:
            array = item_array(row, arg)
            first = shapes.setdefault(arg.name, (array.shape, row.line))
            if array.shape != first[0]:
                raise DatasetError(
                    f"{where}: inputs.{arg.name} has shape {list(array.shape)} but line {first[1]} has "
                    f"{list(first[0])}; rows are stacked into batches, so they need the same shape"
                )
    fixed = fixed_batch(session_inputs)
    if fixed is not None and fixed > 1 and len(rows) % fixed:
        raise DatasetError(
            f"{FIELD}: the model takes batches of exactly {fixed} rows and the dataset has {len(rows)}; use a "
            f"multiple of {fixed} rows (evaluator.accuracy.samples)"
        )


def item_array(row: Row, arg: ort.NodeArg) -> np.ndarray:
    """The row's value for one input, as an array of the input's type shaped as one batch item."""
    where = f"{FIELD} line {row.line}: inputs.{arg.name}"
    dtype = _dtype(arg)
    value = row.inputs[arg.name]
    try:
        # numpy would turn null into NaN for float inputs: refuse it rather than evaluate on made-up values.
        if dtype is not np.object_ and np.asarray(value).dtype == np.object_:
            raise ValueError("it holds null, or numbers mixed with other values")
        array = np.asarray(value, dtype=dtype)
    except (ValueError, TypeError) as exc:
        raise DatasetError(f"{where} does not convert to {np.dtype(dtype).name} ({exc})") from exc
    if dtype is np.object_ and not all(isinstance(v, str) for v in array.ravel()):
        raise DatasetError(f"{where} must hold strings: the model's input {arg.name} is {arg.type}")
    dims = list(arg.shape or [])[1:] if has_batch_axis(arg) else []
    wanted = "[" + ", ".join(str(d) if _is_fixed(d) else "?" for d in dims) + "]"
    if all(_is_fixed(d) for d in dims):
        if array.size != math.prod(dims):
            raise DatasetError(
                f"{where} has {array.size} value{'s' if array.size != 1 else ''} (shape {list(array.shape)}); "
                f"the model takes shape {wanted} for each row"
            )
        return array.reshape(dims)
    if array.ndim != len(dims) or any(_is_fixed(d) and d != n for d, n in zip(dims, array.shape, strict=True)):
        raise DatasetError(
            f"{where} has shape {list(array.shape)}; the model takes shape {wanted} for each row (? is any size)"
        )
    return array


def has_batch_axis(arg: ort.NodeArg) -> bool:
    """Whether the input has a first dimension to stack rows along (a scalar input has none)."""
    return bool(arg.shape)


def fixed_batch(session_inputs: Sequence[ort.NodeArg]) -> int | None:
    """The batch size the model insists on: 1 for scalar inputs, the first dimension when it is a number."""
    for arg in session_inputs:
        if not has_batch_axis(arg):
            return 1
        first = arg.shape[0]
        if _is_fixed(first):
            return int(first)
    return None


def _is_fixed(dim: Any) -> bool:
    # ONNX Runtime reports a named dimension as its name, an unknown one as None; some exporters write -1.
    return isinstance(dim, int) and dim >= 0


def _dtype(arg: ort.NodeArg) -> Any:
    dtype = DTYPES.get(arg.type)
    if dtype is None:
        raise DatasetError(
            f"the model's input {arg.name} is {arg.type}, which Kaliper cannot fill from JSON; it fills tensors of "
            "numbers, booleans and strings"
        )
    return dtype


# --- batches -----------------------------------------------------------------------------------------


def feeds(
    rows: Sequence[Row], session_inputs: Sequence[ort.NodeArg], batch_size: int
) -> Iterator[dict[str, np.ndarray]]:
    """The rows as session.run feeds: `batch_size` rows (or the model's fixed batch) stacked per feed, in the
    model's types. Check the rows with check_fields first."""
    size = fixed_batch(session_inputs) or batch_size
    for start in range(0, len(rows), size):
        batch = rows[start : start + size]
        feed: dict[str, np.ndarray] = {}
        for arg in session_inputs:
            items = [item_array(row, arg) for row in batch]
            feed[arg.name] = np.stack(items) if has_batch_axis(arg) else items[0]
        yield feed


def labels(rows: Sequence[Row]) -> np.ndarray:
    """The rows' labels, in order."""
    return np.asarray([row.label for row in rows])


# --- generated inputs --------------------------------------------------------------------------------


def generated_feeds(
    session_inputs: Sequence[ort.NodeArg],
    batch_size: int,
    seed: int = 0,
    specs: list[TensorSpec] | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs for latency: uniform in [0, 1) for floats, 0 or 1 for integers (safe as indices into any
    table), random booleans, and digit strings. A dynamic first dimension takes batch_size; any other dynamic
    dimension takes its size from the model.inputs entry of the same name."""
    rng = np.random.default_rng(seed)
    by_name = {spec.name: spec for spec in specs or []}
    feed: dict[str, np.ndarray] = {}
    for arg in session_inputs:
        shape = _generated_shape(arg, batch_size, by_name.get(arg.name))
        dtype = _dtype(arg)
        if np.issubdtype(dtype, np.floating):
            feed[arg.name] = rng.random(shape).astype(dtype)
        elif dtype is np.bool_:
            feed[arg.name] = rng.random(shape) < 0.5
        elif dtype is np.object_:
            feed[arg.name] = rng.integers(0, 10, size=shape).astype(str).astype(object)
        else:
            feed[arg.name] = rng.integers(0, 2, size=shape).astype(dtype)
    return feed


def _generated_shape(arg: ort.NodeArg, batch_size: int, spec: TensorSpec | None) -> list[int]:
    dims = list(arg.shape or [])
    if spec is not None and len(spec.shape) != len(dims):
        raise DatasetError(
            f"model.inputs: {arg.name} has {len(spec.shape)} dimensions there ({spec.shape}) but the model's input "
            f"has {len(dims)} ({_shape_text(dims)}); list the model's shape"
        )
    shape: list[int] = []
    for position, dim in enumerate(dims):
        if _is_fixed(dim):
            shape.append(int(dim))
        elif position == 0:
            shape.append(batch_size)
        elif spec is not None and spec.shape[position] >= 0:
            shape.append(spec.shape[position])
        else:
            example = [-1] + [int(d) if _is_fixed(d) else "<size>" for d in dims[1:]]
            raise DatasetError(
                f"model.inputs: the model's input {arg.name} has a dynamic dimension at position {position} "
                f"(shape {_shape_text(dims)}); list {arg.name} in model.inputs with a size for it, as in shape: "
                f"[{', '.join(str(d) for d in example)}]"
            )
    return shape


def _shape_text(dims: list[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
