"""Text datasets (evaluator.accuracy.text): rows of one or two text columns and a label, tokenized with the
tokenizer that ships with the model (tokenizer.json, read by the tokenizers library) into the model's inputs:
input_ids, attention_mask and token_type_ids as Hugging Face names them, padded or truncated to the model's
sequence length. The result is the same Row the tensor datasets give, so batching and checks are shared."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from kaliper.api.common import TensorSpec
from kaliper.api.modeloptimization import TextColumns
from kaliper.measure.labelled import DatasetError, Row, json_object
from kaliper.optimize.dataset import FIELD, dataset_lines

TEXT_FIELD = "evaluator.accuracy.text"

# The model inputs a tokenizer's encoding fills, by the names Hugging Face's exporters give them.
_ENCODING_FIELDS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


def load_tokenizer(path: Path):  # -> tokenizers.Tokenizer
    """The tokenizer in a tokenizer.json file."""
    from tokenizers import Tokenizer

    if not path.is_file():
        raise DatasetError(
            f"{TEXT_FIELD}.tokenizer: {path} does not exist; the tokenizer.json that ships with the model goes in "
            "the model's folder (or set tokenizer to its path inside that folder)"
        )
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the tokenizers library raises plain Exceptions for files it cannot read
        raise DatasetError(
            f"{TEXT_FIELD}.tokenizer: {path.name} is not a Hugging Face tokenizer.json ({exc}); give the "
            "tokenizer.json the model was trained with"
        ) from exc


def tokenizer_path(model: Path, columns: TextColumns) -> Path:
    """Where the tokenizer is: relative to the model's folder (the model itself when it is a folder)."""
    return (model if model.is_dir() else model.parent) / columns.tokenizer


def sequence_length(session_inputs: Sequence[ort.NodeArg], columns: TextColumns, specs: list[TensorSpec] | None) -> int:
    """Tokens per row: maxLength, else the model's fixed sequence dimension, else model.inputs' size for it."""
    by_name = {arg.name: arg for arg in session_inputs}
    fixed = None
    for name in _ENCODING_FIELDS:
        arg = by_name.get(name)
        if arg is not None and len(arg.shape or []) == 2 and isinstance(arg.shape[1], int) and arg.shape[1] > 0:
            fixed = int(arg.shape[1])
            break
    if columns.max_length is not None:
        if fixed is not None and fixed != columns.max_length:
            raise DatasetError(
                f"{TEXT_FIELD}.maxLength is {columns.max_length} but the model takes sequences of exactly {fixed} "
                f"tokens; set maxLength to {fixed} or remove it"
            )
        return columns.max_length
    if fixed is not None:
        return fixed
    for spec in specs or []:
        if spec.name in _ENCODING_FIELDS and len(spec.shape) == 2 and spec.shape[1] > 0:
            return spec.shape[1]
    raise DatasetError(
        f"{TEXT_FIELD}.maxLength: the model's sequence length is dynamic; set maxLength (tokens per row, such as "
        "128), or list input_ids in model.inputs with shape [-1, <length>]"
    )


def read_text_rows(
    path: Path,
    columns: TextColumns,
    tokenizer: Any,
    session_inputs: Sequence[ort.NodeArg],
    length: int,
    limit: int | None = None,
) -> list[Row]:
    """The dataset's rows tokenized into the model's inputs, up to `limit` rows; blank lines are skipped."""
    wanted = [arg.name for arg in session_inputs]
    unknown = [name for name in wanted if name not in _ENCODING_FIELDS]
    if unknown:
        raise DatasetError(
            f"{TEXT_FIELD}: the model takes {', '.join(unknown)}, which a tokenizer does not produce (it fills "
            f"{', '.join(_ENCODING_FIELDS)}); give the rows as tensors instead (remove text)"
        )
    texts: list[tuple[str, ...]] = []
    labels: list[tuple[Any, int]] = []
    for number, line in dataset_lines(path, limit):
        row_texts, label = _parse(line, number, columns)
        texts.append(row_texts)
        labels.append((label, number))
    encoded = encode(tokenizer, texts, length)
    return [
        Row(inputs={name: encoded[name][i] for name in wanted}, label=label, line=line)
        for i, (label, line) in enumerate(labels)
    ]


def encode(tokenizer: Any, texts: list[tuple[str, ...]], length: int) -> dict[str, np.ndarray]:
    """Token ids, attention masks and token types of single texts or pairs, padded or truncated to `length`
    tokens (the tokenizer's own template adds its special tokens, such as [CLS] and [SEP])."""
    tokenizer.enable_truncation(length)
    pad_token = _pad_token(tokenizer)
    tokenizer.enable_padding(length=length, pad_id=tokenizer.token_to_id(pad_token), pad_token=pad_token)
    encodings = tokenizer.encode_batch([t[0] if len(t) == 1 else t for t in texts])
    return {
        name: np.asarray([getattr(e, field) for e in encodings], dtype=np.int64).reshape(len(texts), length)
        for name, field in _ENCODING_FIELDS.items()
    }


def _pad_token(tokenizer: Any) -> str:
    """The tokenizer's padding token: the one its file sets, else the usual names, else id 0's."""
    padding = tokenizer.padding
    if padding and padding.get("pad_token"):
        return str(padding["pad_token"])
    for candidate in ("[PAD]", "<pad>", "<|pad|>"):
        if tokenizer.token_to_id(candidate) is not None:
            return candidate
    return str(tokenizer.id_to_token(0))


def _parse(text: str, line: int, columns: TextColumns) -> tuple[tuple[str, ...], Any]:
    where = f"{FIELD} line {line}"
    example = "{" + ", ".join(f'"{c}": "..."' for c in columns.input_cols) + f', "{columns.label_col}": ...' + "}"
    value = json_object(text, where, example)
    texts = []
    for column in columns.input_cols:
        found = value.get(column)
        if not isinstance(found, str):
            what = "no" if found is None else f"a non-text ({type(found).__name__})"
            raise DatasetError(
                f"{where}: the row has {what} '{column}' column ({TEXT_FIELD}.inputCols names it); rows look like "
                f"{example}"
            )
        texts.append(found)
    label = value.get(columns.label_col)
    if label is None or isinstance(label, list | dict):
        raise DatasetError(
            f"{where}: the row has no '{columns.label_col}' label (one number or string; {TEXT_FIELD}.labelCol "
            f"names the column); rows look like {example}"
        )
    return tuple(texts), label
