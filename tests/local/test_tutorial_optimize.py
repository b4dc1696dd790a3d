"""The optimization tutorial (docs/tutorials/optimize.md) run as written: its two steps' commands (the iris
pipeline with its follow-ups, then the transformer example; tests/support/as_written.py).

Which candidate wins and which configuration the follow-up chooses depend on this machine's speed (another
pytest worker runs beside this one; the choices are proven on scripted figures in tests/optimize and
tests/profiling), so the test holds what does not: the candidates each example makes, what ONNX Runtime fused,
the accuracy, the profiles, the follow-ups and their trials."""

from __future__ import annotations

from pathlib import Path

import yaml

from kaliper.api.modeloptimization import ModelOptimizationStatus
from kaliper.report.optimization import OptimizationReport
from kaliper.report.schema import ProfileReport
from tests.support.as_written import run_as_written, workspace
from tests.support.docs_site import bash_blocks
from tests.support.paths import REPO

TUTORIAL = REPO / "docs" / "tutorials" / "optimize.md"


def optimization_report(folder: Path) -> OptimizationReport:
    return OptimizationReport.model_validate_json((folder / "report.json").read_text())


def profile_report(folder: Path) -> ProfileReport:
    return ProfileReport.model_validate_json((folder / "report.json").read_text())


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    blocks = bash_blocks(TUTORIAL.read_text())
    assert len(blocks) == 2, blocks
    folder = workspace(tmp_path, "examples/pipeline.yaml", "examples/local/transformer.yaml")
    printed = [done.stdout + done.stderr for done in run_as_written(blocks[0] + blocks[1], folder)]
    pipeline, transformer = printed[1], printed[3]

    # 1. The iris pipeline: three candidates, then the follow-ups serving and profiling the chosen model.
    models = tmp_path / "examples" / "local" / "models"
    optimized = optimization_report(models / "iris" / "pipeline")
    assert [(c.id, c.passes, c.status) for c in optimized.candidates] == [
        ("c1", ["quantization"], "Succeeded"),
        ("c2", ["graphOptimization"], "Succeeded"),
        ("c3", ["quantization", "graphOptimization"], "Succeeded"),
    ]
    assert optimized.target["cpuLimit"] == "1" and (models / "iris/pipeline/best/model.onnx").is_file()
    assert optimized.chosen is not None and optimized.chosen.artifact == str(models / "iris/pipeline/best/model.onnx")
    # The file's kinds ran in order: the follow-ups once a model was chosen, then the Cleanup (skipped locally).
    status = yaml.safe_load((models / "iris/pipeline/status.yaml").read_text())
    assert status["followUp"] == {"deploymentName": "iris-pipeline", "profileRunName": "iris-pipeline-size"}
    assert "follow-ups: ModelDeployment iris-pipeline, ProfileRun iris-pipeline-size" in pipeline
    assert "Cleanup iris-pipeline-cleanup: skipped" in pipeline
    sized = profile_report(tmp_path / "kaliper-reports" / "iris-pipeline-size")
    assert [(t.parameters["cpu"], t.parameters["model_variant"], t.status) for t in sized.trials] == [
        ("500m", "original", "Succeeded"),
        ("500m", "optimized", "Succeeded"),
        ("1", "original", "Succeeded"),
        ("1", "optimized", "Succeeded"),
    ]

    # 3. The transformer: fusions off/on x quantization off/on x intra-op threads 1, 2, under two CPUs.
    assert "tokenizing the text rows to 128 tokens each" in transformer
    report = optimization_report(tmp_path / "kaliper-models" / "tiny-bert-optimize")
    assert report.target["cpuLimit"] == "2"
    assert [(c.id, c.passes, c.parameters["intraOp"]) for c in report.candidates] == [
        ("c1", ["threadTuning"], "1"),
        ("c2", ["threadTuning"], "2"),
        ("c3", ["quantization", "threadTuning"], "1"),
        ("c4", ["quantization", "threadTuning"], "2"),
        ("c5", ["transformersOptimization", "threadTuning"], "1"),
        ("c6", ["transformersOptimization", "threadTuning"], "2"),
        ("c7", ["transformersOptimization", "quantization", "threadTuning"], "1"),
        ("c8", ["transformersOptimization", "quantization", "threadTuning"], "2"),
    ]
    assert all(c.status == "Succeeded" for c in report.candidates), [c.message for c in report.candidates]
    # ONNX Runtime's counts of what it fused: four layers of the example model, one embedding layer.
    fused = {"Attention": 4, "BiasGelu": 4, "EmbedLayerNormalization": 1, "SkipLayerNormalization": 8}
    assert [c.fused_operators for c in report.candidates] == [None] * 4 + [fused] * 4
    assert report.candidates[4].parameters["transformersOptimization.numHeads"] == "4"
    # Sentence pairs labelled by the original itself: it scores 1.0, and the fused model answers alike.
    assert report.original is not None and (report.original.accuracy, report.original.agreement) == (1.0, 1.0)
    assert [(c.accuracy, c.agreement) for c in report.candidates[4:6]] == [(1.0, 1.0), (1.0, 1.0)]
    assert all(c.agreement == c.accuracy for c in report.candidates)
    # The operator types the fused model ran, beside the original's: attention and layer norms replaced.
    profiles = {p.model: {t.op_type: t.nodes for t in p.operator_types} for p in report.profiles}
    assert {"Softmax": 4, "LayerNormalization": 9}.items() <= profiles["original"].items()
    # A profile of a fused candidate is there whichever wins (the chosen one, or the fastest fused one besides):
    # no Softmax left, one attention operator per layer (quantized when the candidate is).
    candidates = {c.id: c for c in report.candidates}
    fused_ids = [m for m in profiles if m != "original" and candidates[m].fused_operators]
    assert len(fused_ids) == 1
    attention = "QAttention" if "quantization" in candidates[fused_ids[0]].passes else "Attention"
    assert "Softmax" not in profiles[fused_ids[0]] and profiles[fused_ids[0]][attention] == 4
    status = ModelOptimizationStatus.model_validate(
        yaml.safe_load((tmp_path / "kaliper-models/tiny-bert-optimize/status.yaml").read_text())
    )
    assert status.candidates is not None and status.candidates[4].fused_operators == fused
    assert status.profiles is not None and len(status.profiles) == len(report.profiles)
    # The follow-ups served the chosen model and load-tested it with the tokenized rows: every request answered.
    assert "follow-ups: ModelDeployment tiny-bert, ProfileRun tiny-bert-profile" in transformer
    trial = profile_report(tmp_path / "kaliper-reports" / "tiny-bert-profile").trials[0]
    assert trial.status == "Succeeded" and trial.stage is not None
    assert trial.stage.requests > 0 and trial.stage.errors_by_kind == {}
