"""The evaluation dataset against the inputs of real ONNX Runtime sessions (models of Identity nodes, so the
inputs are exactly what each test declares)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from kaliper.api.common import TensorSpec
from kaliper.optimize.dataset import (
    DatasetError,
    Row,
    check_fields,
    feeds,
    generated_feeds,
    labels,
    read_rows,
)

Dims = list[int | str | None]


def _inputs(**declared: tuple[int, Dims]) -> list[ort.NodeArg]:
    """The inputs of a session on a model that passes each declared input through an Identity."""
    nodes = [helper.make_node("Identity", [name], [f"{name}_out"]) for name in declared]
    graph = helper.make_graph(
        nodes,
        "identity",
        [helper.make_tensor_value_info(name, dtype, dims) for name, (dtype, dims) in declared.items()],
        [helper.make_tensor_value_info(f"{name}_out", dtype, dims) for name, (dtype, dims) in declared.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.get_inputs()


IRIS = {"float_input": (TensorProto.FLOAT, [None, 4])}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text(text)
    return path


def _error(call: object, *args: object) -> str:
    with pytest.raises(DatasetError) as error:
        call(*args)  # type: ignore[operator]
    return str(error.value)


# --- reading -------------------------------------------------------------------------------------------------------


def test_rows_keep_their_line_numbers_and_skip_blank_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '{"inputs": {"float_input": [5.1, 3.5, 1.4, 0.2]}, "label": 0}\n'
        "\n"
        '{"inputs": {"float_input": [6.3, 3.3, 6.0, 2.5]}, "label": 2}\n'
        "   \n"
        '{"inputs": {"float_input": [5.9, 3.0, 4.2, 1.5]}, "label": 1}\n',
    )
    assert read_rows(path) == [
        Row({"float_input": [5.1, 3.5, 1.4, 0.2]}, 0, 1),
        Row({"float_input": [6.3, 3.3, 6.0, 2.5]}, 2, 3),
        Row({"float_input": [5.9, 3.0, 4.2, 1.5]}, 1, 5),
    ]
    assert [r.line for r in read_rows(path, limit=2)] == [1, 3]


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"inputs": {"x": [1]}, "label": 0}\n\n{"inputs": {"x": [1]}, "label": }\n')
    assert _error(read_rows, path) == (
        "evaluator.accuracy.dataset line 3: not valid JSON (Expecting value at column 33); each line holds one row "
        'like {"inputs": {"<input name>": [...]}, "label": ...}'
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "[1, 2]",
            'a row is a JSON object like {"inputs": {"<input name>": [...]}, "label": ...}, not a list',
        ),
        (
            '{"features": [1, 2], "label": 0}',
            '"inputs" must be an object of input values (found none); rows look like '
            '{"inputs": {"<input name>": [...]}, "label": ...}',
        ),
        (
            '{"inputs": [1, 2], "label": 0}',
            '"inputs" must be an object of input values (found a list); rows look like '
            '{"inputs": {"<input name>": [...]}, "label": ...}',
        ),
        (
            '{"inputs": {"x": [1, 2]}}',
            'the row has no "label"; rows look like {"inputs": {"<input name>": [...]}, "label": ...}',
        ),
        ('{"inputs": {"x": [1, 2]}, "label": [0, 1]}', "label must be one number or string, not a list"),
    ],
)
def test_a_row_of_the_wrong_form_is_named(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path, '{"inputs": {"x": [1, 2]}, "label": 0}\n' + line + "\n")
    assert _error(read_rows, path) == f"evaluator.accuracy.dataset line 2: {message}"


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    assert _error(read_rows, tmp_path / "absent.jsonl") == (
        f"evaluator.accuracy.dataset: cannot read {tmp_path / 'absent.jsonl'}: No such file or directory"
    )


def test_an_empty_file_has_no_rows(tmp_path: Path) -> None:
    assert read_rows(_write(tmp_path, "\n\n")) == []


# --- checking ------------------------------------------------------------------------------------------------------


def test_matching_rows_pass() -> None:
    rows = [Row({"float_input": [5.1, 3.5, 1.4, 0.2]}, 0, 1), Row({"float_input": [[6.3, 3.3, 6.0, 2.5]]}, 2, 2)]
    check_fields(rows, _inputs(**IRIS))  # a [1, 4] nested list fits a row of 4 values too


def test_a_missing_field_is_named_with_an_example_row() -> None:
    rows = [Row({"float_input": [1, 2, 3, 4]}, 0, 1), Row({"features": [1, 2, 3, 4]}, 0, 3)]
    assert _error(check_fields, rows, _inputs(**IRIS)) == (
        "evaluator.accuracy.dataset line 3: inputs has no field 'float_input' (the model's inputs are: float_input); "
        'rows look like {"inputs": {"float_input": [...]}, "label": ...}'
    )


def test_an_unexpected_field_is_named() -> None:
    rows = [Row({"float_input": [1, 2, 3, 4], "id": 7}, 0, 2)]
    assert _error(check_fields, rows, _inputs(**IRIS)) == (
        "evaluator.accuracy.dataset line 2: inputs has a field 'id' the model does not take (the model's inputs "
        "are: float_input); remove it"
    )


def test_a_value_of_the_wrong_size_names_the_expected_shape() -> None:
    rows = [Row({"float_input": [1, 2, 3]}, 0, 4)]
    assert _error(check_fields, rows, _inputs(**IRIS)) == (
        "evaluator.accuracy.dataset line 4: inputs.float_input has 3 values (shape [3]); the model takes shape [4] "
        "for each row"
    )


def test_a_value_that_is_no_number_is_named() -> None:
    rows = [Row({"float_input": [1, 2, "three", 4]}, 0, 1)]
    assert _error(check_fields, rows, _inputs(**IRIS)) == (
        "evaluator.accuracy.dataset line 1: inputs.float_input does not convert to float32 (could not convert "
        "string to float: 'three')"
    )


def test_a_null_value_is_refused_rather_than_read_as_nan() -> None:
    rows = [Row({"float_input": [1, None, 3, 4]}, 0, 1)]
    assert _error(check_fields, rows, _inputs(**IRIS)) == (
        "evaluator.accuracy.dataset line 1: inputs.float_input does not convert to float32 (it holds null, or "
        "numbers mixed with other values)"
    )


def test_strings_for_a_string_input() -> None:
    inputs = _inputs(text=(TensorProto.STRING, ["N", 1]))
    check_fields([Row({"text": "hello"}, 0, 1)], inputs)
    assert _error(check_fields, [Row({"text": 5}, 0, 2)], inputs) == (
        "evaluator.accuracy.dataset line 2: inputs.text must hold strings: the model's input text is tensor(string)"
    )


def test_rows_of_a_dynamic_dimension_must_agree() -> None:
    inputs = _inputs(tokens=(TensorProto.INT64, ["N", "T"]))
    rows = [Row({"tokens": [1, 2, 3]}, 0, 1), Row({"tokens": [4, 5]}, 1, 2)]
    assert _error(check_fields, rows, inputs) == (
        "evaluator.accuracy.dataset line 2: inputs.tokens has shape [2] but line 1 has [3]; rows are stacked into "
        "batches, so they need the same shape"
    )
    assert _error(check_fields, [Row({"tokens": 7}, 0, 5)], inputs) == (
        "evaluator.accuracy.dataset line 5: inputs.tokens has shape []; the model takes shape [?] for each row "
        "(? is any size)"
    )


def test_a_fixed_batch_needs_whole_batches() -> None:
    inputs = _inputs(x=(TensorProto.FLOAT, [2, 3]))
    rows = [Row({"x": [1, 2, 3]}, 0, n) for n in (1, 2, 3)]
    assert _error(check_fields, rows, inputs) == (
        "evaluator.accuracy.dataset: the model takes batches of exactly 2 rows and the dataset has 3; use a multiple "
        "of 2 rows (evaluator.accuracy.samples)"
    )


# --- batches -------------------------------------------------------------------------------------------------------


def test_feeds_stack_rows_in_the_models_types() -> None:
    inputs = _inputs(
        pixels=(TensorProto.FLOAT, ["N", 2, 2]), count=(TensorProto.INT64, ["N"]), word=(TensorProto.STRING, ["N"])
    )
    rows = [Row({"pixels": [r, r, r, r], "count": r, "word": f"w{r}"}, r, r) for r in range(1, 6)]
    check_fields(rows, inputs)
    batches = list(feeds(rows, inputs, 2))
    assert [b["pixels"].shape for b in batches] == [(2, 2, 2), (2, 2, 2), (1, 2, 2)]
    assert [b["pixels"].dtype for b in batches] == [np.float32] * 3
    assert batches[0]["pixels"].tolist() == [[[1.0, 1.0], [1.0, 1.0]], [[2.0, 2.0], [2.0, 2.0]]]
    assert [b["count"].tolist() for b in batches] == [[1, 2], [3, 4], [5]]
    assert batches[2]["count"].dtype == np.int64
    assert [b["word"].tolist() for b in batches] == [["w1", "w2"], ["w3", "w4"], ["w5"]]
    assert batches[0]["word"].dtype == np.object_


def test_feeds_follow_a_fixed_batch_of_one() -> None:
    inputs = _inputs(x=(TensorProto.DOUBLE, [1, 2]))
    rows = [Row({"x": [1, 2]}, 0, 1), Row({"x": [3, 4]}, 1, 2)]
    batches = list(feeds(rows, inputs, 64))
    assert [b["x"].tolist() for b in batches] == [[[1.0, 2.0]], [[3.0, 4.0]]]
    assert batches[0]["x"].dtype == np.float64


def test_labels_in_row_order() -> None:
    rows = [Row({}, 2, 1), Row({}, 0, 2), Row({}, 1, 3)]
    assert labels(rows).tolist() == [2, 0, 1]
    assert labels([Row({}, "setosa", 1), Row({}, "virginica", 2)]).tolist() == ["setosa", "virginica"]


# --- generated inputs ----------------------------------------------------------------------------------------------


def test_generated_feeds_fill_the_batch_in_the_models_types() -> None:
    inputs = _inputs(
        x=(TensorProto.FLOAT, [None, 4]),
        ids=(TensorProto.INT64, ["N", 3]),
        flag=(TensorProto.BOOL, ["N"]),
        word=(TensorProto.STRING, ["N"]),
    )
    feed = generated_feeds(inputs, 8)
    assert {name: (value.shape, value.dtype) for name, value in feed.items()} == {
        "x": ((8, 4), np.dtype(np.float32)),
        "ids": ((8, 3), np.dtype(np.int64)),
        "flag": ((8,), np.dtype(np.bool_)),
        "word": ((8,), np.dtype(np.object_)),
    }
    assert feed["x"].min() >= 0.0 and feed["x"].max() < 1.0
    assert set(np.unique(feed["ids"]).tolist()) <= {0, 1}
    seeded = generated_feeds(_inputs(x=(TensorProto.FLOAT, [None, 3])), 1, seed=0)["x"]
    assert [round(float(v), 4) for v in seeded[0]] == [0.637, 0.2698, 0.041]


def test_generated_feeds_take_other_dynamic_sizes_from_model_inputs() -> None:
    inputs = _inputs(image=(TensorProto.FLOAT, ["N", 3, "H", "W"]))
    specs = [TensorSpec(name="image", shape=[-1, 3, 32, 24])]
    assert generated_feeds(inputs, 2, specs=specs)["image"].shape == (2, 3, 32, 24)


def test_generated_feeds_keep_a_fixed_batch() -> None:
    assert generated_feeds(_inputs(x=(TensorProto.FLOAT, [1, 4])), 16)["x"].shape == (1, 4)


def test_a_dynamic_dimension_without_a_size_is_named() -> None:
    inputs = _inputs(image=(TensorProto.FLOAT, ["N", 3, "H", "W"]))
    assert _error(generated_feeds, inputs, 1) == (
        "model.inputs: the model's input image has a dynamic dimension at position 2 (shape [N, 3, H, W]); list "
        "image in model.inputs with a size for it, as in shape: [-1, 3, <size>, <size>]"
    )
    unsized = [TensorSpec(name="image", shape=[-1, 3, -1, 24])]
    assert "dynamic dimension at position 2" in _error(generated_feeds, inputs, 1, 0, unsized)


def test_a_model_inputs_entry_of_another_rank_is_named() -> None:
    inputs = _inputs(x=(TensorProto.FLOAT, [None, 4]))
    specs = [TensorSpec(name="x", shape=[-1, 2, 2])]
    assert _error(generated_feeds, inputs, 1, 0, specs) == (
        "model.inputs: x has 3 dimensions there ([-1, 2, 2]) but the model's input has 2 ([?, 4]); list the "
        "model's shape"
    )
