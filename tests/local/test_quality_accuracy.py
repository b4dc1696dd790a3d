"""Quality in the same run for a tensor model under `kaliper run`: an iris classifier and its int8 quantization
(ONNX Runtime's own, tests/support/iris_int8.py) served by Kaliper's ONNX Runtime server under real cgroup
limits; each variant's first trial asks the 150 iris rows over the Open Inference Protocol after its load, and
its predictions, read from the model's first output as a ModelOptimization's evaluator reads them, are scored
against the labels. The int8 variant's accuracy is shown below the floor and held back; the float one is
chosen."""

from __future__ import annotations

from pathlib import Path

from tests.support.iris_int8 import make_models
from tests.support.local_run import deployment, profile_run, run_manifests


def test_an_int8_variant_whose_accuracy_falls_below_the_floor_is_held_back(tmp_path: Path) -> None:
    fp32, int8, rows = make_models(tmp_path / "models")
    run = profile_run(
        request={"protocol": "oip-v2", "modelName": "iris"},
        sweep={
            "modelVariants": [
                {"name": "fp32", "model": {"file": str(fp32)}},
                {"name": "int8", "model": {"file": str(int8)}},
            ]
        },
        slo={"maxErrorRate": 0.01},
        quality={"dataset": {"file": str(rows)}, "scorer": "accuracy", "rows": 150, "floor": {"min": 0.9}},
        report={"formats": ["json"]},
    )
    served = deployment(fp32, resources={"limits": {"cpu": "500m", "memory": "512Mi"}})
    report, _ = run_manifests(tmp_path, [served, run])
    assert [t.status for t in report.trials] == ["Succeeded", "Succeeded"]
    assert [(t.quality.rows, t.quality.failed) for t in report.trials if t.quality] == [(150, 0), (150, 0)]
    rows_by_variant = {r.parameters["model_variant"]: r for r in report.configurations}
    float32, quantized = rows_by_variant["fp32"], rows_by_variant["int8"]
    assert float32.quality is not None and quantized.quality is not None
    assert (float32.quality.correct, float32.quality.verdict, float32.chosen) == (145, "Held", True)
    assert quantized.reason == (
        "held back by quality: 50 of 150 rows (33.3%, 95% CI 26.3%-41.2%) against the floor 90.0%"
    )
    assert not quantized.chosen
