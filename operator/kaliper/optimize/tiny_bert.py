"""A small BERT-style text classifier made here, never downloaded: the transformer examples and tests optimize it.

The ONNX graph is written node by node in the shape PyTorch's TorchScript exporter gives a Hugging Face
`BertForSequenceClassification` (decomposed attention with an additive mask, Gelu through Erf, LayerNormalization,
embeddings looked up by Gather, position ids sliced from a constant): the shape ONNX Runtime's transformer
optimizer looks for, so its fusions (EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu) apply
as they would to an exported BERT. The weights are random (seeded); the tokenizer is a WordPiece one trained
here on generated words, and the labelled rows are sentence pairs the model itself labels, its class bias set so
that both classes are equally common. Original accuracy is therefore 1.0 by construction, and a candidate's
accuracy is its agreement with the original.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kaliper.optimize.text import encode

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
_SYLLABLES = ("ka", "li", "per", "mo", "del", "ser", "ve", "to", "ken", "la", "ten", "cy", "bat", "ch", "gpu", "ro")


@dataclass(frozen=True)
class TinyBertShape:
    """The model's dimensions, named as Hugging Face's BertConfig names them."""

    vocab: int = 2048
    """WordPiece tokens the embedding table holds (vocab_size)."""
    hidden: int = 256
    """The width of every token's vector between layers (hidden_size)."""
    layers: int = 4
    """Transformer encoder layers (num_hidden_layers)."""
    heads: int = 4
    """Attention heads per layer; hidden is split evenly among them (num_attention_heads)."""
    intermediate: int = 1024
    """The width of each layer's feed-forward block (intermediate_size)."""
    max_positions: int = 128
    """The longest input, in tokens (max_position_embeddings)."""
    labels: int = 2
    """Classes the classifier head scores (num_labels)."""

    @property
    def head_size(self) -> int:
        return self.hidden // self.heads


def benchmark_shape() -> TinyBertShape:
    """The benchmark's transformer: half of BERT-base's width and depth (the size of MiniLM-L6)."""
    return TinyBertShape(vocab=8192, hidden=384, layers=6, heads=6, intermediate=1536, max_positions=128)


# --- tokenizer and text ------------------------------------------------------------------------------


def _lexicon(seed: int, size: int = 2000) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(size)]


def sentences(count: int, seed: int, words: tuple[int, int] = (6, 20)) -> list[str]:
    """Generated sentences of pseudo-words, Zipf-like in frequency."""
    rng = random.Random(seed)
    lexicon = _lexicon(7)
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    return [" ".join(rng.choices(lexicon, weights, k=rng.randint(*words))) + "." for _ in range(count)]


def train_tokenizer(vocab: int, seed: int = 7):  # -> tokenizers.Tokenizer
    """A BERT-style WordPiece tokenizer (lower-casing, [CLS] A [SEP] B [SEP] with token types 0 and 1) trained
    on generated sentences."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tokenizer.train_from_iterator(sentences(4000, seed), trainer=trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tokenizer


# --- the graph ---------------------------------------------------------------------------------------


class _Graph:
    """Nodes and initializers under construction, with fresh names."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def constant(self, stem: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(stem)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def weights(self, stem: str, *dims: int, scale: float = 0.02) -> str:
        return self.constant(stem, (self.rng.standard_normal(dims) * scale).astype(np.float32))

    def node(self, op: str, inputs: list[str], **attributes: object) -> str:
        from onnx import helper

        output = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    def linear(self, x: str, stem: str, n_in: int, n_out: int, scale: float = 0.02) -> str:
        """x @ W + b, as torch exports nn.Linear on 3-D inputs (MatMul then Add)."""
        product = self.node("MatMul", [x, self.weights(f"{stem}.weight", n_in, n_out, scale=scale)])
        return self.node("Add", [self.weights(f"{stem}.bias", n_out, scale=scale), product])

    def layer_norm(self, x: str, stem: str, size: int) -> str:
        gamma = self.constant(f"{stem}.weight", np.ones(size, dtype=np.float32))
        beta = self.constant(f"{stem}.bias", np.zeros(size, dtype=np.float32))
        return self.node("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)

    def scalar(self, stem: str, value: float) -> str:
        return self.constant(stem, np.array(value, dtype=np.float32))

    def ints(self, stem: str, *values: int) -> str:
        return self.constant(stem, np.array(values, dtype=np.int64))


def build_graph(shape: TinyBertShape, seed: int = 0, class_bias: np.ndarray | None = None):  # -> onnx.ModelProto
    """The classifier's graph: inputs input_ids, attention_mask, token_type_ids ([batch, sequence], int64),
    output logits ([batch, labels], float)."""
    from onnx import TensorProto, helper

    g = _Graph(np.random.default_rng(seed))
    h, heads, size = shape.hidden, shape.heads, shape.head_size

    # Embeddings: word + token type, then + position (ids 0..sequence-1 sliced from a constant), then LayerNorm.
    words = g.node("Gather", [g.weights("embeddings.word_embeddings.weight", shape.vocab, h), "input_ids"])
    types = g.node("Gather", [g.weights("embeddings.token_type_embeddings.weight", 2, h), "token_type_ids"])
    sequence = g.node("Gather", [g.node("Shape", ["input_ids"]), g.constant("one", np.array(1, dtype=np.int64))])
    ends = g.node("Unsqueeze", [sequence, g.ints("axes", 0)])
    position_table = np.arange(shape.max_positions, dtype=np.int64).reshape(1, -1)
    positions = g.node(
        "Slice", [g.constant("embeddings.position_ids", position_table), g.ints("starts", 0), ends, g.ints("axes", 1)]
    )
    position_vectors = g.node(
        "Gather", [g.weights("embeddings.position_embeddings.weight", shape.max_positions, h), positions]
    )
    x = g.layer_norm(g.node("Add", [g.node("Add", [words, types]), position_vectors]), "embeddings.LayerNorm", h)

    # The additive mask: (1 - mask) * -10000 on [batch, 1, 1, sequence].
    mask = g.node("Unsqueeze", [g.node("Unsqueeze", ["attention_mask", g.ints("axes", 1)]), g.ints("axes", 2)])
    inverted = g.node("Sub", [g.scalar("one_f", 1.0), g.node("Cast", [mask], to=TensorProto.FLOAT)])
    mask = g.node("Mul", [inverted, g.scalar("mask_value", -10000.0)])

    heads_shape = g.ints("heads_shape", 0, 0, heads, size)
    merged_shape = g.ints("merged_shape", 0, 0, h)
    for layer in range(shape.layers):
        stem = f"encoder.layer.{layer}"

        def split(projection: str, perm: list[int]) -> str:
            return g.node("Transpose", [g.node("Reshape", [projection, heads_shape])], perm=perm)

        # Query and key weights larger than the rest: attention peaks on a few tokens, as a trained model's
        # does, so the answer depends on the words (with uniform attention every row looks alike).
        q = split(g.linear(x, f"{stem}.attention.self.query", h, h, scale=0.3), [0, 2, 1, 3])
        k = split(g.linear(x, f"{stem}.attention.self.key", h, h, scale=0.3), [0, 2, 3, 1])
        v = split(g.linear(x, f"{stem}.attention.self.value", h, h), [0, 2, 1, 3])
        scores = g.node("Div", [g.node("MatMul", [q, k]), g.scalar("scale", float(np.sqrt(size)))])
        probabilities = g.node("Softmax", [g.node("Add", [scores, mask])], axis=-1)
        context = g.node("Transpose", [g.node("MatMul", [probabilities, v])], perm=[0, 2, 1, 3])
        attended = g.linear(g.node("Reshape", [context, merged_shape]), f"{stem}.attention.output.dense", h, h)
        x = g.layer_norm(g.node("Add", [attended, x]), f"{stem}.attention.output.LayerNorm", h)

        inner = g.linear(x, f"{stem}.intermediate.dense", h, shape.intermediate)
        erf = g.node("Erf", [g.node("Div", [inner, g.scalar("sqrt2", 1.4142135381698608)])])
        gelu = g.node(
            "Mul", [g.node("Mul", [inner, g.node("Add", [erf, g.scalar("one_f", 1.0)])]), g.scalar("half", 0.5)]
        )
        out = g.linear(gelu, f"{stem}.output.dense", shape.intermediate, h)
        x = g.layer_norm(g.node("Add", [out, x]), f"{stem}.output.LayerNorm", h)

    # Pooler on the [CLS] position, then the classifier.
    first = g.node("Gather", [x, g.constant("zero", np.array(0, dtype=np.int64))], axis=1)
    pooled = g.node("Tanh", [g.linear(first, "pooler.dense", h, h, scale=0.2)])
    product = g.node("MatMul", [pooled, g.weights("classifier.weight", h, shape.labels, scale=0.5)])
    bias = class_bias if class_bias is not None else np.zeros(shape.labels, dtype=np.float32)
    g.nodes.append(
        helper.make_node("Add", [product, g.constant("classifier.bias", bias.astype(np.float32))], ["logits"], "logits")
    )

    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes,
        "tiny-bert",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in INPUT_NAMES],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", shape.labels])],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kaliper")
    model.ir_version = 8
    return model


# --- rows --------------------------------------------------------------------------------------------


def _logits(model, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(["logits"], feeds)[0]


def make_tiny_bert(
    directory: Path, shape: TinyBertShape | None = None, rows: int = 256, sequence: int = 128, seed: int = 0
) -> Path:
    """Write DIRECTORY/model.onnx, DIRECTORY/tokenizer.json, DIRECTORY/rows.jsonl (sentence pairs with the
    columns sentence1, sentence2 and label, as GLUE's MRPC names them) and DIRECTORY/requests.jsonl (the first
    64 rows tokenized, as Open Inference Protocol v2 request bodies); returns the model's path."""
    import onnx

    shape = shape or TinyBertShape()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(shape.vocab)
    tokenizer.save(str(directory / "tokenizer.json"))
    texts = sentences(4 * rows, seed + 1)
    pairs = list(zip(texts[::2], texts[1::2], strict=True))
    # Label the rows with the model's own answers, its class bias moved so that half of them fall on each side,
    # and keep the half it answers with the clearest margin: a trained model is sure of most rows, while a
    # random one sits near its boundary on many, where any rounding flips the answer.
    unbiased = _logits(build_graph(shape, seed), encode(tokenizer, pairs, sequence))
    margin = unbiased[:, 1] - unbiased[:, 0]
    bias = np.zeros(shape.labels, dtype=np.float32)
    bias[1] = -float(np.median(margin))
    clearest = np.sort(np.argsort(-np.abs(margin + bias[1]))[:rows])
    pairs = [pairs[i] for i in clearest]
    model = build_graph(shape, seed, bias)
    encoded = encode(tokenizer, pairs, sequence)
    labels = _logits(model, encoded).argmax(axis=1)
    with (directory / "rows.jsonl").open("w") as out:
        for (first, second), label in zip(pairs, labels, strict=True):
            out.write(json.dumps({"sentence1": first, "sentence2": second, "label": int(label)}) + "\n")
    # The same rows as Open Inference Protocol requests, for load tests of the model once it is served.
    with (directory / "requests.jsonl").open("w") as out:
        for row in range(min(rows, 64)):
            tensors = [
                {"name": name, "shape": [1, sequence], "datatype": "INT64", "data": encoded[name][row].tolist()}
                for name in INPUT_NAMES
            ]
            out.write(json.dumps({"inputs": tensors}, separators=(",", ":")) + "\n")
    onnx.checker.check_model(model)
    path = directory / "model.onnx"
    onnx.save(model, str(path))
    return path
