"""Small chat models in the Hugging Face format, made here (never downloaded), that vLLM loads: a Llama
architecture in config.json, the weights in model.safetensors (written directly: no torch needed), and the
byte-level BPE tokenizer of kaliper.serving.tiny_llm with a ChatML chat template.

Two recipes:
- `make_hf_chat_model`: random weights shaped as tiny_llm's are, so that the model streams printable text,
  never ends an answer on its own, and `max_tokens` decides every answer's length: the model for load.
- `make_reasoning_model`: a model whose output is fixed whatever the prompt and the sampling. Its hidden size
  is the vocabulary's, embeddings are one-hot, every layer's output projections are zero (so each layer
  passes the residual stream through), and the output layer maps token i to one chosen successor with a
  logit of 45 (every other token gets 0: even sampled at temperature 1 the successor has all but all the
  probability). The model therefore walks a fixed chain: `<think>`, the reasoning words, `</think>`, the
  answer words, then the answer words again, until max_tokens. `<think>` and `</think>` are ordinary added
  tokens, not special ones, as in Qwen3's and DeepSeek-R1's tokenizers: a reasoning parser must see them in
  the text. `REASONING_WORDS` and `ANSWER_WORDS` are what the stream says, one token each.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from kaliper.serving.tiny_llm import CHATML_TEMPLATE, SPECIAL_TOKENS, TinyLlmShape, printable, train_tokenizer

THINK, END_THINK = "<think>", "</think>"
END_OF_TURN = "<|im_end|>"
# Words the trained tokenizer keeps whole (single tokens, checked when the model is made).
REASONING_WORDS = ("ka", "li", "per", "mo", "de", "la")
ANSWER_WORDS = ("ti", "ser", "ve", "no")
SUCCESSOR_LOGIT = 45.0


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """The safetensors format: an 8-byte little-endian header length, a JSON header naming each tensor's
    dtype, shape and byte range, then the raw little-endian bytes."""
    header: dict[str, object] = {}
    offset = 0
    for name, tensor in tensors.items():
        size = tensor.nbytes
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data begins 8-byte aligned
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(encoded)))
        out.write(encoded)
        for tensor in tensors.values():
            out.write(np.ascontiguousarray(tensor, dtype="<f4").tobytes())


def _write_model(
    directory: Path, tokenizer, shape: TinyLlmShape, tensors: dict[str, np.ndarray], name: str
) -> Path:  # tokenizer: tokenizers.Tokenizer
    directory.mkdir(parents=True, exist_ok=True)
    end_of_turn = tokenizer.token_to_id(END_OF_TURN)
    padding = tokenizer.token_to_id("<|endoftext|>")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": tokenizer.get_vocab_size(),
        "hidden_size": shape.dim,
        "intermediate_size": shape.feed_forward,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.heads,
        "max_position_embeddings": shape.context,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": padding,
        "eos_token_id": end_of_turn,
        "pad_token_id": padding,
        "torch_dtype": "float32",
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    (directory / "generation_config.json").write_text(
        json.dumps({"bos_token_id": padding, "eos_token_id": end_of_turn, "pad_token_id": padding}, indent=2)
    )
    write_safetensors(directory / "model.safetensors", tensors)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|endoftext|>",
                "eos_token": END_OF_TURN,
                "pad_token": "<|endoftext|>",
                "add_bos_token": False,
                "chat_template": CHATML_TEMPLATE,
                "model_max_length": shape.context,
                "name_or_path": name,
            },
            indent=2,
        )
    )
    return directory


def _layers(shape: TinyLlmShape, weights) -> dict[str, np.ndarray]:  # weights: (name, *dims) -> array
    dim, ff = shape.dim, shape.feed_forward
    tensors: dict[str, np.ndarray] = {}
    for block in range(shape.layers):
        prefix = f"model.layers.{block}"
        tensors[f"{prefix}.input_layernorm.weight"] = np.ones(dim, np.float32)
        tensors[f"{prefix}.post_attention_layernorm.weight"] = np.ones(dim, np.float32)
        for part in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"{prefix}.self_attn.{part}.weight"] = weights(part, dim, dim)
        tensors[f"{prefix}.mlp.gate_proj.weight"] = weights("gate_proj", ff, dim)
        tensors[f"{prefix}.mlp.up_proj.weight"] = weights("up_proj", ff, dim)
        tensors[f"{prefix}.mlp.down_proj.weight"] = weights("down_proj", dim, ff)
    tensors["model.norm.weight"] = np.ones(dim, np.float32)
    return tensors


def make_hf_chat_model(directory: Path, shape: TinyLlmShape | None = None, seed: int = 7) -> Path:
    """Random weights that stream printable text and never stop on their own; returns the model folder."""
    shape = shape or TinyLlmShape(vocab=2048, dim=128, layers=2, heads=4, feed_forward=256, context=2048)
    tokenizer = train_tokenizer(shape.vocab, seed)
    size = tokenizer.get_vocab_size()
    rng = np.random.default_rng(seed)

    def weights(_part: str, *dims: int) -> np.ndarray:
        return (rng.standard_normal(dims) * 0.05).astype(np.float32)

    # As in tiny_llm: a large constant dimension survives the weak layers, and the output weight on it keeps
    # special and unprintable tokens far below the rest.
    embeddings = (rng.standard_normal((size, shape.dim)) * 0.02).astype(np.float32)
    embeddings[:, 0] = 8.0
    special = {tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    output = (rng.standard_normal((size, shape.dim)) * 0.5).astype(np.float32)
    decoded = [tokenizer.decode([i], skip_special_tokens=False).encode() for i in range(size)]
    output[:, 0] = [(-40.0 if i in special or not printable(decoded[i]) else 0.0) for i in range(size)]
    tensors = {"model.embed_tokens.weight": embeddings, **_layers(shape, weights), "lm_head.weight": output}
    return _write_model(directory, tokenizer, shape, tensors, directory.name)


def reasoning_chain(tokenizer) -> list[int]:  # tokenizer: tokenizers.Tokenizer
    """The token ids the reasoning model emits, in order, before it repeats its answer."""
    words = [THINK, *(" " + w for w in REASONING_WORDS), END_THINK, *(" " + w for w in ANSWER_WORDS)]
    chain = []
    for word in words:
        ids = tokenizer.encode(word, add_special_tokens=False).ids
        if len(ids) != 1:
            raise AssertionError(f"{word!r} is {len(ids)} tokens in the trained tokenizer, not one")
        chain.append(ids[0])
    if len(set(chain)) != len(chain):
        raise AssertionError("the reasoning model's words must be distinct tokens")
    return chain


def make_reasoning_model(directory: Path, seed: int = 7) -> Path:
    """The deterministic reasoning model (the module's docstring says how); returns the model folder."""
    from tokenizers import AddedToken

    vocab = 512
    tokenizer = train_tokenizer(vocab, seed)
    tokenizer.add_tokens([AddedToken(THINK, special=False), AddedToken(END_THINK, special=False)])
    size = tokenizer.get_vocab_size()
    # The hidden size holds one dimension per token (one-hot embeddings), rounded up to whole heads.
    heads = 4
    dim = -(-size // (heads * 32)) * heads * 32
    shape = TinyLlmShape(vocab=size, dim=dim, layers=2, heads=heads, feed_forward=64, context=2048)
    chain = reasoning_chain(tokenizer)
    answer_start = len(REASONING_WORDS) + 2  # after <think>, the reasoning words and </think>
    successor = np.full(size, chain[0], dtype=np.int64)  # any other token: start thinking
    for position, token in enumerate(chain):
        successor[token] = chain[position + 1] if position + 1 < len(chain) else chain[answer_start]

    embeddings = np.zeros((size, dim), np.float32)
    embeddings[np.arange(size), np.arange(size)] = 1.0
    rng = np.random.default_rng(seed)

    def weights(part: str, *dims: int) -> np.ndarray:
        if part in ("o_proj", "down_proj"):
            return np.zeros(dims, np.float32)  # the layer adds nothing to the residual stream
        return (rng.standard_normal(dims) * 0.05).astype(np.float32)

    # After the final RMS norm a one-hot vector of `dim` dimensions is sqrt(dim) at its token.
    output = np.zeros((size, dim), np.float32)
    output[successor, np.arange(size)] = SUCCESSOR_LOGIT / np.sqrt(dim)
    tensors = {"model.embed_tokens.weight": embeddings, **_layers(shape, weights), "lm_head.weight": output}
    return _write_model(directory, tokenizer, shape, tensors, directory.name)
