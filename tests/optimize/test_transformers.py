"""The transformer pass and text datasets with real components: a BERT-style encoder written at test time in the
shape PyTorch exports, ONNX Runtime's own transformer optimizer fusing it (its fusion counts), the fused model
answering as the original does, and sentence pairs tokenized by a real tokenizers.Tokenizer into the model's
inputs."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.transformers.optimizer import MODEL_TYPES

from kaliper.api.common import TensorSpec
from kaliper.api.modeloptimization import TextColumns, TransformerModelType, TransformersOptimizationPass
from kaliper.optimize.dataset import DatasetError, check_fields, feeds
from kaliper.optimize.passes import PassError, convert_huggingface, optimize_transformer
from kaliper.optimize.text import load_tokenizer, read_text_rows, sequence_length, tokenizer_path
from kaliper.optimize.tiny_bert import TinyBertShape, build_graph, make_tiny_bert
from kaliper.serving.examples import make_iris

SHAPE = TinyBertShape(vocab=64, hidden=64, layers=3, heads=4, intermediate=128, max_positions=32)


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bert") / "model.onnx"
    onnx.save(build_graph(SHAPE, seed=3), str(path))
    return path


def session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def token_feeds(rows: int, length: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    mask = np.ones((rows, length), dtype=np.int64)
    mask[:, length - 3 :] = 0  # padding at the end, as a tokenizer pads
    types = np.zeros((rows, length), dtype=np.int64)
    types[:, length // 2 :] = 1
    return {
        "input_ids": rng.integers(5, SHAPE.vocab, size=(rows, length)).astype(np.int64),
        "attention_mask": mask,
        "token_type_ids": types,
    }


def test_the_test_encoder_is_fused_by_onnx_runtime_and_answers_as_before(bert: Path, tmp_path: Path) -> None:
    result = optimize_transformer(bert, TransformersOptimizationPass(), tmp_path / "fused.onnx")
    # One embedding layer; per layer an attention, two residual LayerNorms and a bias + Gelu.
    assert result.fused_operators == {
        "Attention": 3,
        "BiasGelu": 3,
        "EmbedLayerNormalization": 1,
        "SkipLayerNormalization": 6,
    }
    fused_graph = onnx.load(str(result.path)).graph
    assert Counter(n.op_type for n in fused_graph.node)["Attention"] == 3
    assert not {"Softmax", "Erf", "LayerNormalization"} & {n.op_type for n in fused_graph.node}
    feed = token_feeds(4, 16)
    expected = session(bert).run(["logits"], feed)[0]
    fused = session(result.path).run(["logits"], feed)[0]
    np.testing.assert_allclose(fused, expected, atol=1e-4)


def test_fusions_switched_off_are_left_out(bert: Path, tmp_path: Path) -> None:
    options = TransformersOptimizationPass.model_validate(
        {"numHeads": 4, "hiddenSize": 64, "fusions": {"attention": False, "embedLayerNorm": False}}
    )
    result = optimize_transformer(bert, options, tmp_path / "fused.onnx")
    # The embeddings' LayerNormalization stays, which ONNX Runtime counts among the operators it made.
    assert result.fused_operators == {"BiasGelu": 3, "LayerNormalization": 1, "SkipLayerNormalization": 6}
    assert "Attention" not in {n.op_type for n in onnx.load(str(result.path)).graph.node}


def test_a_model_without_the_patterns_fails_the_pass_with_the_fix(tmp_path: Path) -> None:
    iris = make_iris(tmp_path / "iris.onnx")
    with pytest.raises(PassError) as caught:
        optimize_transformer(iris, TransformersOptimizationPass(), tmp_path / "fused.onnx")
    assert str(caught.value) == (
        "passes.transformersOptimization: ONNX Runtime's transformer optimizer found none of the bert patterns in "
        "iris.onnx (its operators: LinearClassifier, Normalizer); check modelType, numHeads and hiddenSize, "
        "or remove the pass for this model"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iris.onnx"]  # no scratch files left here


def test_every_model_type_offered_is_one_onnx_runtime_has() -> None:
    offered = TransformerModelType.__args__  # type: ignore[attr-defined]
    assert [t for t in offered if t not in MODEL_TYPES] == []


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_hugging_face_conversion_without_torch_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(PassError) as caught:
        convert_huggingface(tmp_path, [TensorSpec(name="input_ids", shape=[-1, 8], datatype="INT64")], 17, tmp_path)
    assert str(caught.value) == (
        "passes.conversion: converting a Hugging Face model needs torch and transformers; install kaliper with the "
        "pytorch extra (pip install 'kaliper[pytorch]'), or export the model to ONNX yourself and use framework onnx"
    )


# --- text ----------------------------------------------------------------------------------------------

VOCAB = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "the": 4, "cat": 5, "sat": 6, "dog": 7, "ran": 8}


@pytest.fixture
def text_model(bert: Path, tmp_path: Path) -> Path:
    """The encoder in a folder with a BERT-style tokenizer of a nine-token vocabulary."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordPiece(VOCAB, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    model = tmp_path / "model.onnx"
    model.write_bytes(bert.read_bytes())
    return model


def write_rows(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_sentence_pairs_become_padded_token_ids_masks_and_types(text_model: Path, tmp_path: Path) -> None:
    columns = TextColumns(input_cols=["sentence1", "sentence2"])
    rows_file = write_rows(
        tmp_path / "rows.jsonl",
        {"sentence1": "The cat sat", "sentence2": "dog ran", "label": 1},
        {"sentence1": "The DOG", "sentence2": "ran", "label": 0},
    )
    inputs = session(text_model).get_inputs()
    tokenizer = load_tokenizer(tokenizer_path(text_model, columns))
    rows = read_text_rows(rows_file, columns, tokenizer, inputs, length=10)
    assert [(r.line, r.label) for r in rows] == [(1, 1), (2, 0)]
    assert [r.inputs["input_ids"].tolist() for r in rows] == [
        [2, 4, 5, 6, 3, 7, 8, 3, 0, 0],
        [2, 4, 7, 3, 8, 3] + [0] * 4,
    ]
    assert [r.inputs["attention_mask"].tolist() for r in rows] == [[1] * 8 + [0] * 2, [1] * 6 + [0] * 4]
    assert [r.inputs["token_type_ids"].tolist() for r in rows] == [
        [0, 0, 0, 0, 0, 1, 1, 1, 0, 0],
        [0, 0, 0, 0, 1, 1, 0, 0, 0, 0],
    ]
    check_fields(rows, inputs)  # the shared checks and batching take them as tensor rows
    batch = next(feeds(rows, inputs, 2))
    assert batch["input_ids"].shape == (2, 10) and batch["input_ids"].dtype == np.int64


def test_one_text_column_longer_than_the_length_is_truncated(text_model: Path, tmp_path: Path) -> None:
    columns = TextColumns(input_cols=["text"], label_col="sentiment")
    rows_file = write_rows(tmp_path / "rows.jsonl", {"text": "the cat sat the dog ran", "sentiment": "positive"})
    inputs = session(text_model).get_inputs()
    rows = read_text_rows(rows_file, columns, load_tokenizer(tmp_path / "tokenizer.json"), inputs, length=5)
    assert rows[0].inputs["input_ids"].tolist() == [2, 4, 5, 6, 3]
    assert rows[0].label == "positive"


def test_a_row_without_a_text_column_names_the_line_and_the_field(text_model: Path, tmp_path: Path) -> None:
    columns = TextColumns(input_cols=["sentence1", "sentence2"])
    rows_file = write_rows(
        tmp_path / "rows.jsonl",
        {"sentence1": "the cat", "sentence2": "sat", "label": 1},
        {"sentence1": "the dog", "label": 0},
    )
    with pytest.raises(DatasetError) as caught:
        read_text_rows(rows_file, columns, load_tokenizer(tmp_path / "tokenizer.json"), [], length=8)
    assert str(caught.value) == (
        "evaluator.accuracy.dataset line 2: the row has no 'sentence2' column (evaluator.accuracy.text.inputCols "
        'names it); rows look like {"sentence1": "...", "sentence2": "...", "label": ...}'
    )


def test_a_model_whose_inputs_a_tokenizer_cannot_fill_is_refused(tmp_path: Path) -> None:
    iris = make_iris(tmp_path / "iris.onnx")
    rows_file = write_rows(tmp_path / "rows.jsonl", {"text": "the cat", "label": 1})
    with pytest.raises(DatasetError) as caught:
        read_text_rows(rows_file, TextColumns(input_cols=["text"]), None, session(iris).get_inputs(), length=8)
    assert str(caught.value) == (
        "evaluator.accuracy.text: the model takes float_input, which a tokenizer does not produce (it fills "
        "input_ids, attention_mask, token_type_ids); give the rows as tensors instead (remove text)"
    )


def test_a_missing_tokenizer_says_where_it_was_looked_for(text_model: Path) -> None:
    columns = TextColumns(input_cols=["text"], tokenizer="tokenizer/vocab.json")
    path = tokenizer_path(text_model, columns)
    assert path == text_model.parent / "tokenizer/vocab.json"
    with pytest.raises(DatasetError) as caught:
        load_tokenizer(path)
    assert str(caught.value) == (
        f"evaluator.accuracy.text.tokenizer: {path} does not exist; the tokenizer.json that ships with the model "
        "goes in the model's folder (or set tokenizer to its path inside that folder)"
    )


def test_the_sequence_length_comes_from_max_length_then_model_inputs(text_model: Path) -> None:
    inputs = session(text_model).get_inputs()  # dynamic [batch, sequence]
    assert sequence_length(inputs, TextColumns(input_cols=["a"], max_length=24), None) == 24
    specs = [TensorSpec(name="input_ids", shape=[-1, 128], datatype="INT64")]
    assert sequence_length(inputs, TextColumns(input_cols=["a"]), specs) == 128
    with pytest.raises(DatasetError) as caught:
        sequence_length(inputs, TextColumns(input_cols=["a"]), None)
    assert str(caught.value) == (
        "evaluator.accuracy.text.maxLength: the model's sequence length is dynamic; set maxLength (tokens per row, "
        "such as 128), or list input_ids in model.inputs with shape [-1, <length>]"
    )


def test_the_example_model_labels_its_rows_with_its_own_answers(tmp_path: Path) -> None:
    path = make_tiny_bert(tmp_path, SHAPE, rows=40, sequence=32)
    columns = TextColumns(input_cols=["sentence1", "sentence2"])
    inputs = session(path).get_inputs()
    rows = read_text_rows(tmp_path / "rows.jsonl", columns, load_tokenizer(tmp_path / "tokenizer.json"), inputs, 32)
    assert len(rows) == 40
    logits = session(path).run(["logits"], next(feeds(rows, inputs, 40)))[0]
    assert logits.argmax(axis=1).tolist() == [r.label for r in rows]
    assert {0, 1} <= {r.label for r in rows}  # both classes occur
