"""Decision repeatability (issue 12): the demo's ProfileRun (examples/local/demo.yaml) five times in a row on
this machine, then five times with a competing CPU-bound process beside it; `--demo llm` does the same for the
LLM demo (examples/llm/demo.yaml: llama-server, CPU x slots x concurrency, priced per million output tokens;
issue 23).

    .venv/bin/python bench/repeatability.py [--runs 5] [--demo llm] [--quiet-only]

Goal: the same best configuration every time, or an honest Inconclusive / Disturbed where the run cannot
tell, never a silent other answer; the CPU recommendation within 10% from the lowest to the highest run.
Every run is printed (a markdown table for docs/benchmarks.md) and the raw reports kept under --keep.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "operator"))

from kaliper.api.units import parse_cpu  # noqa: E402
from kaliper.report.schema import ProfileReport  # noqa: E402

KALIPER = Path(sys.executable).with_name("kaliper")
HOG = "while True: pass"  # one core's worth of CPU-bound work, placed by the scheduler like any neighbour


DEMOS = {  # manifest, model file, tokenizer (None: not a generation run) under the example models
    "classic": ("examples/local/demo.yaml", "iris.onnx", None),
    "llm": ("examples/llm/demo.yaml", "small-llm/small.gguf", "small-llm/tokenizer.json"),
}


def demo_manifest(directory: Path, demo: str) -> Path:
    """The demo's manifests with the model path pointing at a fresh copy of the example models."""
    subprocess.run([str(KALIPER), "make-example-models", str(directory / "models")], check=True, capture_output=True)
    manifest, model, tokenizer = DEMOS[demo]
    documents = list(yaml.safe_load_all((REPO / manifest).read_text()))
    for document in documents:
        if document["kind"] == "ModelDeployment":
            document["spec"]["model"]["file"] = str(directory / "models" / model)
        else:
            document["spec"]["report"] = {"formats": ["json"]}
            if tokenizer is not None:
                document["spec"]["payload"]["prompts"]["tokenizer"] = {"file": str(directory / "models" / tokenizer)}
    path = directory / "demo.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    return path


def one_run(manifest: Path, out: Path, busy: bool) -> tuple[ProfileReport, float]:
    hog = subprocess.Popen([sys.executable, "-c", HOG]) if busy else None
    started = time.monotonic()
    try:
        process = subprocess.run(
            [str(KALIPER), "run", str(manifest), "--output-dir", str(out)], capture_output=True, text=True
        )
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    if not (out / "report.json").exists():
        raise SystemExit(f"kaliper run wrote no report (exit {process.returncode}): {process.stderr[-2000:]}")
    return ProfileReport.model_validate_json((out / "report.json").read_text()), time.monotonic() - started


def row(label: str, report: ProfileReport, seconds: float) -> dict:
    best = next((t for t in report.trials if t.index == report.best_trial), None)
    recommendation = report.recommendation
    return {
        "run": label,
        "verdict": report.verdict,
        "best": ", ".join(f"{k}={v}" for k, v in best.parameters.items()) if best else "-",
        "certainty": report.choice.certainty if report.choice else "-",
        # p99 of the latency, of the time to first token for a generation run.
        "p99_ms": best.frontier_p99_ms() if best else None,
        "cost": best.unit_cost() if best else None,
        "cpu_request": recommendation.cpu_request if recommendation else None,
        "replicas": recommendation.replicas if recommendation else None,
        "trial_verdicts": "".join(
            {"Met": "M", "NotMet": "x", "Inconclusive": "?"}.get(t.slo_verdict or "", "-") for t in report.trials
        ),
        "flagged": sum(bool(t.limited_by) for t in report.trials),
        "seconds": round(seconds),
        "explanation": report.choice.explanation if report.choice else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--demo", choices=sorted(DEMOS), default="classic")
    parser.add_argument("--keep", type=Path, default=None, help="Keep every run's report.json here.")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--quiet-only", action="store_true", help="Leave out the runs beside a busy process.")
    only.add_argument("--busy-only", action="store_true", help="Only the runs beside a busy process.")
    args = parser.parse_args()
    kinds = (False,) if args.quiet_only else (True,) if args.busy_only else (False, True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        manifest = demo_manifest(Path(tmp), args.demo)
        for busy in kinds:
            for i in range(args.runs):
                label = f"{'busy' if busy else 'quiet'} {i + 1}"
                out = (args.keep or Path(tmp) / "reports") / label.replace(" ", "-")
                report, seconds = one_run(manifest, out, busy)
                rows.append(row(label, report, seconds))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    unit = "USD/1M output tokens" if args.demo == "llm" else "USD/1M requests"
    p99 = "ttft p99 ms" if args.demo == "llm" else "p99 ms"
    columns = ["run", "verdict", "best", "certainty", p99, unit, "CPU request", "replicas", "trial verdicts"]
    print("| " + " | ".join([*columns, "trials flagged", "s"]) + " |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        figure = f"{r['p99_ms']:.2f}" if r["p99_ms"] is not None else "-"
        cost = f"{r['cost']:.4f}" if r["cost"] is not None else "-"
        print(
            f"| {r['run']} | {r['verdict']} | {r['best']} | {r['certainty']} | {figure} | {cost} "
            f"| {r['cpu_request'] or '-'} | {r['replicas'] or '-'} | {r['trial_verdicts']} | {r['flagged']} "
            f"| {r['seconds']} |"
        )
    undisturbed = [r for r in rows if r["certainty"] in ("Clear", "Tie")]
    answers = sorted({r["best"] for r in undisturbed})
    cpus = [float(parse_cpu(r["cpu_request"])) for r in rows if r["cpu_request"]]
    print(f"\nbest configurations among clear or tied choices: {answers}")
    if cpus:
        spread = (max(cpus) - min(cpus)) / min(cpus)
        print(f"CPU recommendation: {min(cpus):.3f}-{max(cpus):.3f} cores, spread {spread:.1%}")
    for r in rows:
        print(f"- {r['run']}: {r['explanation']}")


if __name__ == "__main__":
    main()
