"""ModelOptimization of a transformer (issue 25): what ONNX Runtime's transformer fusions, int8 quantization and
thread tuning give a BERT-style text classifier under one CPU, and what they cost in accuracy.

    .venv/bin/python bench/transformer_optimization.py [--runs 1] [--keep DIR]

The model is made in a temporary folder by kaliper.optimize.tiny_bert at its benchmark shape (hidden 384, 6
layers, 6 heads, intermediate 1536: MiniLM-L6's size; random seeded weights in the graph PyTorch exports for
Hugging Face's BertForSequenceClassification), with its WordPiece tokenizer.json and 256 sentence pairs the
model labels itself (so accuracy is agreement with the original). `kaliper run` optimizes it as seed 002's
example does (transformersOptimization bert with numHeads/hiddenSize, quantization dynamic int8, thread tuning
at intraOp 1; accuracy on the text rows at most 0.01 lost; avg latency, seq 128, batch 1; target.cpu 1),
exhaustively, twice per fusion set: ONNX Runtime's default fusions, and the same without the SkipLayerNormalization
fusions (attention, embeddings and Gelu only).

Printed (markdown for docs/benchmarks.md), per run: every candidate's avg latency and its paired ratio against
ONNX Runtime's defaults on the original (the report's `original`, timed in alternating blocks with it), the
unoptimized original (graph optimizations off), the fused operators, accuracy and agreement; the chosen candidate's
speed-up over the unoptimized model and over the defaults; and the fused candidate's time per operator type
(from the report's profile), which shows where the fusions' time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "operator"))

from kaliper.optimize.tiny_bert import benchmark_shape, make_tiny_bert  # noqa: E402
from kaliper.report.optimization import CandidateResult, OptimizationReport  # noqa: E402

KALIPER = Path(sys.executable).with_name("kaliper")
SEQUENCE = 128
FUSION_SETS = {
    "default fusions": {},
    "no SkipLayerNorm fusion": {"skipLayerNorm": False, "biasSkipLayerNorm": False},
}


def manifest(name: str, folder: Path, output: Path, fusions: dict) -> dict:
    shape = benchmark_shape()
    inputs = [
        {"name": n, "shape": [-1, SEQUENCE], "datatype": "INT64"}
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": name},
        "spec": {
            "model": {"source": {"file": str(folder / "model.onnx")}, "inputs": inputs},
            "passes": {
                "transformersOptimization": {
                    "modelType": "bert",
                    "numHeads": shape.heads,
                    "hiddenSize": shape.hidden,
                    "fusions": fusions,
                },
                "quantization": {"mode": "dynamic", "weightType": "int8"},
                "threadTuning": {"intraOp": [1]},
            },
            "evaluator": {
                "accuracy": {
                    "dataset": {"file": str(folder / "rows.jsonl")},
                    "text": {"inputCols": ["sentence1", "sentence2"], "labelCol": "label"},
                    "maxDegradation": 0.01,
                },
                "latency": {"metric": "avg", "minImprovementPercent": 20, "runs": 200, "warmupRuns": 20},
            },
            "search": {"strategy": "exhaustive"},
            "target": {"device": "cpu", "cpu": "1"},
            "output": {"directory": str(output), "keep": 1},
        },
    }


def paired(result: CandidateResult) -> str:
    """How many times faster than the original's defaults, from the same seconds."""
    if not result.latency_ms or not result.original_latency_ms:
        return "-"
    return f"{result.original_latency_ms / result.latency_ms:.2f}x"


def fused_text(result: CandidateResult) -> str:
    return ", ".join(f"{op} {n}" for op, n in (result.fused_operators or {}).items()) or "-"


def table(label: str, report: OptimizationReport, seconds: float) -> list[str]:
    lines = [
        f"**{label}** ({seconds:.0f} s; {report.phase}: {report.message}; noise {report.noise_percent}%)",
        "",
        "| model | passes | avg ms [95% CI] | vs ORT defaults (paired) | fused operators | accuracy | agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    assert report.original is not None
    for result in [report.original, *report.references, *report.candidates]:
        name = {"original": "original, ORT defaults", "unoptimized": "original, graph optimizations off"}.get(
            result.id, result.id + (" (chosen)" if report.chosen and report.chosen.candidate_id == result.id else "")
        )
        low, high = result.latency_ci_low_ms, result.latency_ci_high_ms
        interval = f"[{low:.4g}, {high:.4g}]" if low is not None and high is not None else ""
        ratio = "1.00x" if result.id == "original" else paired(result)
        lines.append(
            f"| {name} | {' + '.join(result.passes) or '-'} | {result.latency_ms} {interval} | {ratio} | "
            f"{fused_text(result)} | {result.accuracy} | {result.agreement} |"
        )
    unoptimized = report.references[0]
    if report.chosen is not None:
        chosen = next(c for c in report.candidates if c.id == report.chosen.candidate_id)
        over_defaults = chosen.original_latency_ms / chosen.latency_ms  # type: ignore[operator]
        defaults_over_unoptimized = unoptimized.latency_ms / unoptimized.original_latency_ms  # type: ignore[operator]
        lines += [
            "",
            f"Chosen {chosen.id} ({' + '.join(chosen.passes)}): {over_defaults:.2f}x ORT defaults, "
            f"{over_defaults * defaults_over_unoptimized:.2f}x the unoptimized model (paired ratios chained through "
            f"the original), accuracy change {-(chosen.accuracy_degradation or 0.0) + 0.0:+.4f}.",
        ]
    for profile in report.profiles:
        if profile.model == "original" or not any(
            c.id == profile.model and c.fused_operators for c in report.candidates
        ):
            continue
        shares = ", ".join(
            f"{t.op_type} {t.time_percent:.0f}%" for t in profile.operator_types[:6] if t.time_percent is not None
        )
        lines += ["", f"Time per operator type of {profile.model} (ONNX Runtime's profiler): {shares}."]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kaliper-bench-transformer-"))
    folder = work / "tiny-bert"
    make_tiny_bert(folder, benchmark_shape(), rows=256, sequence=SEQUENCE)
    print(f"model: {(folder / 'model.onnx').stat().st_size / 2**20:.1f} MiB; CPUs: {os.cpu_count()}\n")
    for run in range(1, args.runs + 1):
        for label, fusions in FUSION_SETS.items():
            name = f"bert-{'default' if not fusions else 'noskip'}-{run}"
            output = (args.keep or work) / name
            path = work / f"{name}.yaml"
            path.write_text(yaml.safe_dump(manifest(name, folder, output, fusions), sort_keys=False))
            started = time.monotonic()
            done = subprocess.run([str(KALIPER), "run", str(path)], capture_output=True, text=True, cwd=work)
            if done.returncode not in (0, 1):
                sys.exit(f"kaliper run failed ({done.returncode}):\n{done.stderr[-3000:]}")
            report = OptimizationReport.model_validate_json((output / "report.json").read_text())
            print("\n".join(table(f"{label}, run {run}", report, time.monotonic() - started)) + "\n", flush=True)
    if args.keep is None:
        print(json.dumps({"work": str(work)}))


if __name__ == "__main__":
    main()
