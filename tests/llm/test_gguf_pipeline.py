"""The LLM pipeline under `kaliper run`: a ModelOptimization quantizes a GGUF model made here with llama.cpp's
real llama-quantize, measures each type with the real llama-server beside the original under a CPU limit,
keeps the chosen file, and its follow-ups deploy it with the llamacpp runtime and profile it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from kaliper.report.optimization import OptimizationReport
from kaliper.report.schema import ProfileReport
from kaliper.serving.tiny_llm import demo_shape, make_tiny_llm
from tests.support.llama import synthetic_payload
from tests.support.paths import KALIPER

PROMPTS = ["Write a haiku about snow.", "Why is the sky blue?", "Name three prime numbers.", "Describe a harbour."]


def pipeline(model: Path, prompts: Path) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": "small-quantize"},
        "spec": {
            "model": {"source": {"file": str(model), "name": "small"}, "framework": "gguf"},
            "passes": {"ggufQuantization": {"types": ["Q8_0", "Q4_0"]}},
            "evaluator": {
                "generation": {
                    "dataset": {"file": str(prompts)},
                    "prompts": 4,
                    "maxTokens": 16,
                    "rounds": 2,
                    "minAgreement": 0,
                    # About the pipeline, not the noise rule (tests/optimize/test_gguf.py): see test_llm_pipeline.
                    "minImprovementPercent": -90,
                }
            },
            "target": {"cpu": "1"},
            "output": {"directory": str(model.parent / "optimized")},
            "followUp": {
                "deployment": {
                    "name": "small-quantized",
                    "template": {
                        "runtime": {"type": "llamacpp"},
                        "resources": {"limits": {"cpu": "1", "memory": "512Mi"}},
                        "llm": {"slots": 2, "contextSize": 2048},
                    },
                },
                "profileRun": {
                    "name": "small-quantized-load",
                    "template": {
                        "request": {"protocol": "openai-chat", "generation": {"maxTokens": 16, "ignoreEos": True}},
                        "payload": synthetic_payload({"file": str(model.parent / "tokenizer.json")}, 32, 32),
                        "load": {
                            "closedLoop": {"concurrency": 2},
                            "warmup": "1s",
                            "minDuration": "3s",
                            "maxDuration": "3s",
                            "stopping": {"window": "1s"},
                        },
                        "cost": {"perCoreHour": 0.04},
                        "report": {"formats": ["json"]},
                    },
                },
            },
        },
    }


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    directory = tmp_path_factory.mktemp("gguf-pipeline")
    model = make_tiny_llm(directory / "model", demo_shape(), name="small")
    prompts = directory / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    manifest = directory / "pipeline.yaml"
    manifest.write_text(yaml.safe_dump(pipeline(model, prompts)))
    process = subprocess.run(
        [str(KALIPER), "run", str(manifest), "--output-dir", str(directory / "reports")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    return model, directory, process.stdout


def test_each_quantization_is_measured_beside_the_original(ran: tuple[Path, Path, str]) -> None:
    model, _, _ = ran
    report = OptimizationReport.model_validate_json((model.parent / "optimized" / "report.json").read_text())
    original = report.original
    assert original is not None and original.id == "original" and original.model_size_bytes == model.stat().st_size
    # The twin serves the very same file: greedy answers are identical, token for token (else a warning).
    assert report.noise_percent is not None
    assert not [w for w in report.warnings if "twin" in w], report.warnings
    assert [c.id for c in report.candidates] == ["q8_0", "q4_0"]
    q8, q4 = report.candidates
    assert q8.status == q4.status == "Succeeded"
    assert q4.model_size_bytes < q8.model_size_bytes < model.stat().st_size  # type: ignore[operator]
    for candidate in (q8, q4):
        assert candidate.parameters["type"] == candidate.id.upper()
        assert candidate.latency is not None and candidate.latency.runs == 4 * 2  # prompts x rounds
        assert candidate.accuracy_metric == "greedyAgreement" and 0 <= candidate.accuracy <= 1  # type: ignore[operator]
        assert candidate.original_latency_ms is not None
        expected = (candidate.original_latency_ms - candidate.latency_ms) / candidate.original_latency_ms * 100  # type: ignore[operator]
        assert candidate.latency_improvement_percent == pytest.approx(expected, abs=0.01)


def test_the_chosen_file_is_deployed_with_llama_server_and_profiled(ran: tuple[Path, Path, str]) -> None:
    model, directory, stdout = ran
    report = OptimizationReport.model_validate_json((model.parent / "optimized" / "report.json").read_text())
    assert report.phase == "Succeeded" and report.chosen is not None
    chosen = model.parent / "optimized" / "best" / "model.gguf"
    assert chosen.read_bytes()[:4] == b"GGUF"
    assert report.chosen.artifact == str(chosen)
    assert "follow-ups: ModelDeployment small-quantized, ProfileRun small-quantized-load" in stdout
    profile = ProfileReport.model_validate_json(next((directory / "reports").rglob("report.json")).read_text())
    (trial,) = profile.trials
    assert trial.status == "Succeeded" and trial.stage is not None and trial.stage.tokens is not None
    assert trial.stage.tokens.output_tokens == 16 * trial.stage.requests
    # One core at 0.04 an hour (memory unpriced), over the hours a million output tokens take.
    per_token = 0.04 * 1e6 / trial.stage.tokens.output_tokens_per_s / 3600
    assert trial.cost_per_million_output_tokens == pytest.approx(per_token)
