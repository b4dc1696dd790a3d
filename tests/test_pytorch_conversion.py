"""The pytorch extra for real: a Hugging Face BERT and a TorchScript model converted to ONNX with torch and
transformers installed (in the environment hack/pytorch/venv.sh keeps outside the repository, running this
checkout's code). The project's own environment has no torch; tests/optimize checks what a user without the
extra is told."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from kaliper.optimize.tiny_bert import make_tiny_bert
from kaliper.report.optimization import OptimizationReport
from tests.support.builds import run_build
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def pytorch_python() -> Path:
    """The pytorch environment's python, installed on first use (a no-op when cached: minutes otherwise, set-up
    and not the tests' own time)."""
    built = run_build(["bash", str(REPO / "hack/pytorch/venv.sh")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-4000:]
    return Path(built.stdout.strip().splitlines()[-1])


def with_pytorch(python: Path, *args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run the pytorch environment's python with this checkout's code first on its path."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'operator'}{os.pathsep}{REPO}"}
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_hugging_face_bert_is_converted_and_gains_every_bert_fusion(tmp_path: Path, pytorch_python: Path) -> None:
    make_tiny_bert(tmp_path / "rows", rows=64)  # the tokenizer and the sentence pairs
    tokenizer = tmp_path / "rows/tokenizer.json"
    made = with_pytorch(
        pytorch_python,
        "-m",
        "tests.support.pytorch_models",
        "hf-bert",
        str(tmp_path / "hf-bert"),
        str(tokenizer),
        cwd=REPO,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr[-4000:]
    inputs = [
        {"name": n, "shape": [-1, 128], "datatype": "INT64"} for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    manifest = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": "hf-bert-optimize"},
        "spec": {
            "model": {"framework": "huggingface", "source": {"file": "hf-bert"}, "inputs": inputs},
            "passes": {
                "conversion": {"targetOpset": 17},
                "transformersOptimization": {"modelType": "bert", "numHeads": 4, "hiddenSize": 256},
            },
            "evaluator": {
                "accuracy": {
                    "dataset": {"file": "rows/rows.jsonl"},
                    "text": {"inputCols": ["sentence1", "sentence2"], "labelCol": "label"},
                    "maxDegradation": 0.01,
                },
                "latency": {"runs": 20},
            },
            "target": {"device": "cpu", "cpu": "2"},
            "output": {"directory": "out"},
        },
    }
    (tmp_path / "hf-bert.yaml").write_text(yaml.safe_dump(manifest))
    ran = with_pytorch(
        pytorch_python, "-c", "from kaliper.cli import main; main()", "run", "hf-bert.yaml", cwd=tmp_path, timeout=600
    )
    # Whether the fused model met the latency goal is a timing on a shared machine: not asserted here (the
    # exit code says it), only what the conversion and the fusions made.
    assert "exporting the Hugging Face model to ONNX" in ran.stdout + ran.stderr, ran.stderr[-4000:]
    assert (tmp_path / "out/report.json").is_file(), ran.stdout[-4000:] + ran.stderr[-4000:]

    report = OptimizationReport.model_validate_json((tmp_path / "out/report.json").read_text())
    # The export ran attention eagerly: ONNX Runtime fuses its MatMul-Softmax-MatMul into Attention, one per
    # layer (the default SDPA export leaves attention unfused: no Attention, no EmbedLayerNormalization).
    fused = {"Attention": 4, "BiasGelu": 4, "EmbedLayerNormalization": 1, "SkipLayerNormalization": 8}
    assert [c.fused_operators for c in report.candidates] == [fused]
    # On 64 sentence pairs the fused model answers as the converted original does.
    assert report.candidates[0].agreement == 1.0


def test_a_torchscript_model_is_converted_and_answers_as_torch_does(tmp_path: Path, pytorch_python: Path) -> None:
    checked = with_pytorch(
        pytorch_python, "-m", "tests.support.pytorch_models", "torchscript-check", str(tmp_path), cwd=REPO, timeout=300
    )
    assert checked.returncode == 0, checked.stderr[-4000:]
    result = json.loads(checked.stdout.strip().splitlines()[-1])
    assert result["inputs"] == [["x", ["batch", 4]]]
    # float32 rounding apart (kernels differ between CPUs); a wrong or fixed-batch export is off by far more.
    assert result["max_abs_difference"] < 1e-5
