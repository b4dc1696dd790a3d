"""A small language model made here, never downloaded: random llama-architecture weights in a GGUF file
that llama.cpp's llama-server loads, and its byte-level BPE tokenizer, trained here on generated words and
written both inside the GGUF (llama.cpp needs it there) and beside it as tokenizer.json (so a client counts
tokens exactly as the server does).

Random weights emit arbitrary tokens, the end-of-turn token and unprintable bytes among them. The output
layer is shaped so that they never win: every token's embedding carries one large constant dimension that
the (deliberately weak) layers cannot move, so after the final norm that dimension is a constant, and the
output weight on it puts every special or unprintable token far below the rest. The model then streams
printable text and never stops on its own: `max_tokens` decides every response's length exactly.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
    " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_SYLLABLES = [
    "ka",
    "li",
    "per",
    "mo",
    "de",
    "la",
    "ti",
    "ser",
    "ve",
    "no",
    "ra",
    "be",
    "go",
    "lu",
    "mi",
    "sa",
    "to",
    "ne",
    "vi",
    "ro",
    "da",
    "fe",
    "ho",
    "ju",
    "ke",
    "ma",
    "ni",
    "po",
    "qu",
    "re",
    "su",
    "ta",
    "we",
    "xi",
    "ya",
    "ze",
    "bo",
    "ci",
    "du",
    "fa",
    "gi",
    "hu",
    "jo",
    "ko",
    "le",
    "mu",
    "na",
    "pi",
    "ri",
    "so",
    "tu",
    "va",
    "wi",
    "yo",
    "zu",
]


@dataclass(frozen=True)
class TinyLlmShape:
    """The model's dimensions. The default loads in milliseconds and streams thousands of tokens a second on
    one core; `benchmark_shape()` is slower per token, so its timings are not dominated by HTTP."""

    vocab: int = 2048
    dim: int = 64
    layers: int = 2
    heads: int = 4
    feed_forward: int = 256
    context: int = 4096


def benchmark_shape() -> TinyLlmShape:
    return TinyLlmShape(vocab=8192, dim=512, layers=8, heads=8, feed_forward=1536, context=4096)


def demo_shape() -> TinyLlmShape:
    """The LLM demo's model: a few milliseconds a token on one core, so a short run still measures tens of
    requests per configuration."""
    return TinyLlmShape(vocab=8192, dim=256, layers=4, heads=4, feed_forward=768, context=4096)


def _corpus(seed: int, words: int = 60_000) -> list[str]:
    """Pseudo-words of one to four syllables, Zipf-like in frequency so BPE learns whole words."""
    rng = random.Random(seed)
    lexicon = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    lines = []
    for _ in range(words // 12):
        lines.append(" ".join(rng.choices(lexicon, weights, k=12)) + ".")
    return lines


def train_tokenizer(vocab: int, seed: int = 7):  # -> tokenizers.Tokenizer
    """A GPT-2-style byte-level BPE tokenizer trained on generated text, with ChatML's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(seed), trainer=trainer)
    return tokenizer


def printable(token_bytes: bytes) -> bool:
    return bool(token_bytes) and all(0x20 <= b < 0x7F for b in token_bytes)


def make_tiny_llm(directory: Path, shape: TinyLlmShape | None = None, name: str = "tiny-llm", seed: int = 7) -> Path:
    """Write DIRECTORY/NAME.gguf, DIRECTORY/tokenizer.json and DIRECTORY/tokenizer_config.json; returns the
    GGUF's path."""
    import gguf

    shape = shape or TinyLlmShape()
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(shape.vocab, seed)
    vocab = tokenizer.get_vocab()
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    size = len(tokens)
    special_ids = {tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    model_json = json.loads(tokenizer.to_str())
    merges = [m if isinstance(m, str) else " ".join(m) for m in model_json["model"]["merges"]]

    rng = np.random.default_rng(seed)
    dim, ff, head_dim = shape.dim, shape.feed_forward, shape.dim // shape.heads

    def weights(*dims: int, scale: float) -> np.ndarray:
        return (rng.standard_normal(dims) * scale).astype(np.float32)

    # Dimension 0 of every embedding is a large constant: the residual stream keeps it, the final norm turns it
    # into the same value for every position, and output weights on it act as a per-token bias.
    embeddings = weights(size, dim, scale=0.02)
    embeddings[:, 0] = 8.0
    output = weights(size, dim, scale=0.5)
    decoded = [tokenizer.decode([i], skip_special_tokens=False).encode() for i in range(size)]
    output[:, 0] = [(-40.0 if i in special_ids or not printable(decoded[i]) else 0.0) for i in range(size)]

    writer = gguf.GGUFWriter(str(directory / f"{name}.gguf"), "llama")
    writer.add_name(name)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(dim)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if i in special_ids else gguf.TokenType.NORMAL for i in range(size)])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokenizer.token_to_id("<|endoftext|>"))
    writer.add_eos_token_id(tokenizer.token_to_id("<|im_end|>"))
    writer.add_pad_token_id(tokenizer.token_to_id("<|endoftext|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)

    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", np.ones(dim, dtype=np.float32))
    writer.add_tensor("output.weight", output)
    # Weak layers: they vary the output with the context but cannot move dimension 0 far.
    for block in range(shape.layers):
        prefix = f"blk.{block}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", np.ones(dim, dtype=np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{prefix}.{part}.weight", weights(dim, dim, scale=0.05))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", np.ones(dim, dtype=np.float32))
        writer.add_tensor(f"{prefix}.ffn_gate.weight", weights(ff, dim, scale=0.05))
        writer.add_tensor(f"{prefix}.ffn_up.weight", weights(ff, dim, scale=0.05))
        writer.add_tensor(f"{prefix}.ffn_down.weight", weights(dim, ff, scale=0.05))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|endoftext|>",
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "add_bos_token": False,
                "chat_template": CHATML_TEMPLATE,
                "model_max_length": shape.context,
            },
            indent=2,
        )
    )
    return directory / f"{name}.gguf"
