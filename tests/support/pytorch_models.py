"""Models made with torch and transformers, for the conversion tests (tests/test_pytorch_conversion.py).

Run by the pytorch environment's python (hack/pytorch/venv.sh), never imported by the project's own: torch
and transformers are not installed there.

    python -m tests.support.pytorch_models hf-bert OUT TOKENIZER
    python -m tests.support.pytorch_models torchscript-check WORKDIR
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from transformers import BertConfig, BertForSequenceClassification

from kaliper.api.common import TensorSpec
from kaliper.optimize.passes import convert_pytorch


def save_hf_bert(out: Path, tokenizer: Path) -> None:
    """A BERT sentence-pair classifier with seeded random weights, as save_pretrained writes it (config.json,
    model.safetensors), and the tokenizer the text rows were made with (its vocabulary is the config's)."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=2048,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=128,
        num_labels=2,
    )
    BertForSequenceClassification(config).eval().save_pretrained(out)
    shutil.copy(tokenizer, out / "tokenizer.json")


class _Classifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(4, 16)
        self.out = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.out(torch.relu(self.hidden(x))), dim=-1)


def torchscript_check(workdir: Path) -> dict:
    """Script a small classifier, save it, convert it with Kaliper's pass, and compare ONNX Runtime's answers
    with torch's on a batch of 5 (the export used batch 1: the batch axis must be dynamic)."""
    torch.manual_seed(0)
    module = torch.jit.script(_Classifier().eval())
    source = workdir / "model.pt"
    torch.jit.save(module, str(source))
    out = convert_pytorch(source, [TensorSpec(name="x", shape=[-1, 4])], 17, workdir / "model.onnx")
    batch = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(batch)).numpy()
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (answer,) = session.run(None, {"x": batch})
    return {
        "inputs": [(i.name, i.shape) for i in session.get_inputs()],
        "max_abs_difference": float(np.abs(answer - expected).max()),
    }


if __name__ == "__main__":
    if sys.argv[1] == "hf-bert":
        save_hf_bert(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "torchscript-check":
        print(json.dumps(torchscript_check(Path(sys.argv[2]))))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")
