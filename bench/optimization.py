"""ModelOptimization (issue 13): speed-up, accuracy change and FLOPs on two models made at benchmark time.

    .venv/bin/python bench/optimization.py [--runs 1] [--batch-sizes 1 32] [--keep DIR]

Two models are made in a temporary folder: a scikit-learn MLPClassifier (64 features, two hidden layers of
256, 10 classes) converted by the optimizer itself (framework sklearn + passes.conversion), and a small
convolutional network written with onnx.helper (1x3x32x32 input, two Conv+Relu+MaxPool blocks, a Gemm to 10
classes, fixed-seed random weights). Each is optimized by `kaliper run` under a CPU limit of one core with
graph optimization, quantization (dynamic; static too for the convolutional network, in a second manifest)
and thread tuning (intraOp 1 and 2), and judged on a labelled held-out dataset (at most 0.02 accuracy lost)
and on the p50 of in-process latency, at each batch size given. The timed runs are as many as the original
takes SPAN_SECONDS to run (timed here first, without a limit), so every latency figure spans several periods
of the CPU limit.

Printed (markdown for docs/benchmarks.md): per optimization, the unoptimized model (ONNX Runtime's graph
optimizations off), ONNX Runtime's defaults alone, and the chosen candidate, side by side with the ratios
between them, all measured in the same run under the same limit; how far two measurements of the same model
and settings in that run are apart ("defaults, repeated"); the CPU the rest of the machine used meanwhile;
every candidate; and the FLOPs estimate of the convolutional network checked against a hand count. The
reports are kept under --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import yaml

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "operator"))

from kaliper.report.optimization import CandidateResult, OptimizationReport  # noqa: E402

KALIPER = Path(sys.executable).with_name("kaliper")
SEED = 0
ROWS = 400  # held-out, labelled rows of each dataset
MAX_DEGRADATION = 0.02
WARMUP_RUNS = 50
# The timed runs of each optimization are as many as the original model takes this long to run (at least
# 500): a 25 µs model's 1,000 runs would last 25 ms, a quarter of one CFS period (100 ms), and the figure
# would depend on where in its period the CPU limit happened to be.
SPAN_SECONDS = 1.0

# --- the models ----------------------------------------------------------------------------------------


def make_mlp(folder: Path) -> tuple[Path, Path, dict]:
    """An MLPClassifier on a synthetic 10-class problem, saved with joblib; the held-out rows as JSONL."""
    import joblib
    from sklearn.datasets import make_classification
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    x, y = make_classification(
        n_samples=6000 + ROWS, n_features=64, n_informative=40, n_redundant=8, n_classes=10, random_state=SEED
    )
    x = x.astype(np.float32)
    train_x, train_y, test_x, test_y = x[:-ROWS], y[:-ROWS], x[-ROWS:], y[-ROWS:]
    model = MLPClassifier(hidden_layer_sizes=(256, 256), max_iter=60, random_state=SEED)
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(train_x, train_y)
    trained = time.monotonic() - started
    path = folder / "mlp.joblib"
    joblib.dump(model, path)
    dataset = folder / "mlp.jsonl"
    with dataset.open("w") as out:
        for row, label in zip(test_x, test_y, strict=True):
            out.write(json.dumps({"inputs": {"float_input": row.tolist()}, "label": int(label)}) + "\n")
    info = {"train_seconds": round(trained, 1), "sklearn_test_accuracy": float(model.score(test_x, test_y))}
    return path, dataset, info


# The convolutional network's layers, from which both the graph and the hand count of FLOPs are made.
IMAGE = (3, 32, 32)  # C, H, W
CONVS = [(3, 16), (16, 32)]  # (Cin, Cout) of each 3x3 Conv (pad 1, stride 1), each followed by Relu and MaxPool 2
KERNEL = 3
POOL = 2
CLASSES = 10


def make_convnet(folder: Path) -> tuple[Path, Path, dict]:
    """The network as an ONNX graph with a dynamic batch axis; its dataset is random normal inputs labelled
    with the float model's own argmax, so the accuracy is agreement with the original model."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(SEED)
    nodes, initializers = [], []
    current, (channels, height, width) = "input", IMAGE
    for i, (cin, cout) in enumerate(CONVS, start=1):
        fan_in = cin * KERNEL * KERNEL
        weight = rng.normal(0, np.sqrt(2 / fan_in), (cout, cin, KERNEL, KERNEL)).astype(np.float32)
        bias = rng.normal(0, 0.01, cout).astype(np.float32)
        initializers += [numpy_helper.from_array(weight, f"conv{i}.w"), numpy_helper.from_array(bias, f"conv{i}.b")]
        nodes += [
            helper.make_node(
                "Conv",
                [current, f"conv{i}.w", f"conv{i}.b"],
                [f"conv{i}"],
                name=f"conv{i}",
                kernel_shape=[KERNEL, KERNEL],
                pads=[1, 1, 1, 1],
            ),
            helper.make_node("Relu", [f"conv{i}"], [f"relu{i}"], name=f"relu{i}"),
            helper.make_node(
                "MaxPool", [f"relu{i}"], [f"pool{i}"], name=f"pool{i}", kernel_shape=[POOL, POOL], strides=[POOL, POOL]
            ),
        ]
        current, channels, height, width = f"pool{i}", cout, height // POOL, width // POOL
    features = channels * height * width
    weight = rng.normal(0, np.sqrt(1 / features), (CLASSES, features)).astype(np.float32)
    bias = np.zeros(CLASSES, np.float32)  # set below, once the logits' means are known
    initializers += [numpy_helper.from_array(weight, "fc.w"), numpy_helper.from_array(bias, "fc.b")]
    nodes += [
        helper.make_node("Flatten", [current], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["scores"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", *IMAGE])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", CLASSES])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kaliper-bench")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL

    def scores(images: np.ndarray) -> np.ndarray:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return session.run(None, {"input": images})[0]

    # A random network sends most inputs to one or two classes; a bias that centres each class's score on
    # 2,000 other random inputs spreads the labels over all ten, so agreement is not won by always saying 0.
    centring = rng.normal(0, 1, (2000, *IMAGE)).astype(np.float32)
    bias = (rng.normal(0, 0.01, CLASSES) - scores(centring).mean(axis=0)).astype(np.float32)
    model.graph.initializer[-1].CopyFrom(numpy_helper.from_array(bias, "fc.b"))
    path = folder / "convnet.onnx"
    onnx.save(model, str(path))

    inputs = np.round(rng.normal(0, 1, (ROWS, *IMAGE)), 3).astype(np.float32)
    labels = scores(inputs).argmax(axis=1)
    dataset = folder / "convnet.jsonl"
    with dataset.open("w") as out:
        for row, label in zip(inputs, labels, strict=True):
            out.write(json.dumps({"inputs": {"input": row.ravel().tolist()}, "label": int(label)}) + "\n")
    counts = np.bincount(labels, minlength=CLASSES)
    return path, dataset, {"label_counts": counts.tolist()}


def hand_count_flops() -> tuple[int, list[tuple[str, str, int]]]:
    """The convolutional network's FLOPs for one image, by the conventions of kaliper.optimize.flops: a
    multiply-add is 2 FLOPs; Conv 2 * output elements * Cin * k*k plus one per output element for the bias;
    Relu 1 per output element; MaxPool k*k per output element; Flatten 0; Gemm 2 * M * N * K plus M * N for C."""
    lines = []
    channels, height, width = IMAGE
    for i, (cin, cout) in enumerate(CONVS, start=1):
        out = cout * height * width  # pad 1, stride 1: same height and width
        lines.append(
            (
                f"conv{i}",
                f"2 * ({cout}*{height}*{width}) * ({cin}*{KERNEL}*{KERNEL}) + {out}",
                2 * out * cin * KERNEL * KERNEL + out,
            )
        )
        lines.append((f"relu{i}", f"{cout}*{height}*{width}", out))
        height, width, channels = height // POOL, width // POOL, cout
        pooled = channels * height * width
        lines.append((f"pool{i}", f"({POOL}*{POOL}) * ({channels}*{height}*{width})", POOL * POOL * pooled))
    features = channels * height * width
    lines.append(("flatten", "0", 0))
    lines.append(("fc", f"2 * 1*{CLASSES}*{features} + 1*{CLASSES}", 2 * CLASSES * features + CLASSES))
    return sum(f for _, _, f in lines), lines


# --- the optimizations ---------------------------------------------------------------------------------


def runs_for(model: Path, batch: int) -> int:
    """Timed runs for SPAN_SECONDS of the model under ONNX Runtime's defaults (timed here, without a limit)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    arg = session.get_inputs()[0]
    feed = {arg.name: np.random.default_rng(SEED).random([batch, *arg.shape[1:]]).astype(np.float32)}
    for _ in range(20):
        session.run(None, feed)
    samples = []
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        started = time.perf_counter()
        session.run(None, feed)
        samples.append(time.perf_counter() - started)
    return int(min(200_000, max(500, round(SPAN_SECONDS / float(np.median(samples)), -2))))


def as_onnx(mlp: Path, folder: Path) -> Path:
    """The MLP converted as the optimizer converts it, only to time it for runs_for."""
    from kaliper.api.common import TensorSpec
    from kaliper.optimize.passes import convert_sklearn

    spec = TensorSpec(name="float_input", shape=[-1, 64], datatype="FP32")
    return convert_sklearn(mlp, [spec], 17, folder / "mlp-timing.onnx")


def manifest(
    folder: Path, name: str, model: dict, quantization: str, dataset: Path, output: Path, latency: dict
) -> Path:
    document = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelOptimization",
        "metadata": {"name": name},
        "spec": {
            "model": model,
            "passes": {
                **({"conversion": {}} if model.get("framework") == "sklearn" else {}),
                "graphOptimization": {"level": "all"},
                "quantization": {"mode": quantization},
                "threadTuning": {"intraOp": [1, 2]},
            },
            "evaluator": {
                "accuracy": {
                    "metric": "accuracy",
                    "dataset": {"file": str(dataset)},
                    "maxDegradation": MAX_DEGRADATION,
                },
                "latency": latency,
            },
            "target": {"cpu": "1"},
            "output": {"directory": str(output), "keep": 1},
        },
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat, all CPUs)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def optimize(path: Path, output: Path) -> tuple[OptimizationReport, float, float]:
    """`kaliper run` on one manifest: its report, the wall time, and the CPU the rest of the machine used
    meanwhile (in cores; what this run's processes did not use)."""
    busy, mine, started = busy_seconds(), children_seconds(), time.monotonic()
    process = subprocess.run([str(KALIPER), "run", str(path)], capture_output=True, text=True)
    seconds = time.monotonic() - started
    others = max(0.0, (busy_seconds() - busy) - (children_seconds() - mine)) / seconds
    if not (output / "report.json").exists():
        raise SystemExit(f"kaliper run wrote no report (exit {process.returncode}): {process.stderr[-3000:]}")
    return OptimizationReport.model_validate_json((output / "report.json").read_text()), seconds, others


# --- the tables ----------------------------------------------------------------------------------------


def latency(c: CandidateResult | None) -> str:
    if c is None or c.latency_ms is None:
        return "-"
    high = f"{c.latency_ci_high_ms:.4g}" if c.latency_ci_high_ms is not None else "?"
    return f"{c.latency_ms:.4g} [{c.latency_ci_low_ms:.4g}, {high}]"


def settings(c: CandidateResult) -> str:
    passes = [p for p in c.passes if p != "conversion"]
    keys = ("quantization.mode", "intraOp")
    shown = [f"{k.removeprefix('quantization.')}={c.parameters[k]}" for k in keys if k in c.parameters]
    return f"{' + '.join(passes) or 'none'} ({', '.join(shown)})" if shown else " + ".join(passes) or "none"


def paired(result: CandidateResult | None) -> float | None:
    """The original's latency over this model's, both from the same measurement (the engine alternates
    blocks of the two): how many times faster it is than ONNX Runtime's defaults, drift of the machine's load
    cancelled."""
    if result is None or not result.latency_ms or not result.original_latency_ms:
        return None
    return result.original_latency_ms / result.latency_ms


def ratio(slow: CandidateResult | None, fast: CandidateResult | None) -> float | None:
    """How many times faster `fast` is than `slow`, chained through the original each was measured with."""
    slower, faster = paired(slow), paired(fast)
    if slower is None or faster is None:
        return None
    return faster / slower


def row(label: str, batch: int, report: OptimizationReport, seconds: float, others: float) -> dict:
    unoptimized = next((r for r in report.references if r.id == "unoptimized"), None)
    defaults = report.original
    chosen = next((c for c in report.candidates if report.chosen and c.id == report.chosen.candidate_id), None)
    return {
        "model": label,
        "batch": batch,
        "runs": defaults.latency.runs if defaults and defaults.latency else None,
        "unoptimized": latency(unoptimized),
        "defaults": latency(defaults),
        "chosen": f"{chosen.id}: {settings(chosen)}"
        if chosen
        else f"none met the goals ({report.reason}: {report.message})",
        "chosen_latency": latency(chosen),
        "chosen_vs_unoptimized": ratio(unoptimized, chosen),
        "defaults_vs_unoptimized": ratio(unoptimized, defaults),
        "chosen_vs_defaults": paired(chosen),
        "repeat": repeat_ratio(report),
        "accuracy_original": defaults.accuracy if defaults else None,
        "accuracy_chosen": chosen.accuracy if chosen else None,
        "accuracy_change": -chosen.accuracy_degradation + 0.0
        if chosen and chosen.accuracy_degradation is not None
        else None,
        "size_original": defaults.model_size_bytes if defaults else None,
        "size_chosen": chosen.model_size_bytes if chosen else None,
        "seconds": round(seconds),
        "others_cores": round(others, 2),
    }


def repeat_ratio(report: OptimizationReport) -> float | None:
    """The paired ratio of the candidate with exactly the same model and session settings as ONNX Runtime's
    defaults (no pass, intraOp = its default thread count, one per core here): 1.00 when two measurements of
    the same thing agree, so its distance from 1 is the noise a ratio in the same row carries."""
    same = next(
        (
            c
            for c in report.candidates
            if [p for p in c.passes if p != "conversion"] == ["threadTuning"]
            and c.parameters.get("intraOp") == str(os.cpu_count())
            and c.parameters.get("executionMode", "sequential") == "sequential"
        ),
        None,
    )
    return paired(same)


def x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def number(value: float | None, form: str) -> str:
    return format(value, form) if value is not None else "-"


def kib(size: int | None) -> str:
    return f"{size / 1024:.0f} KiB" if size is not None else "-"


def print_rows(rows: list[dict]) -> None:
    print(
        "| model | batch | timed runs | unoptimized p50 ms [95% CI] | ORT defaults p50 ms | chosen candidate "
        "| chosen p50 ms | chosen vs unoptimized | defaults vs unoptimized | chosen vs defaults "
        "| accuracy original → chosen (change) | size original → chosen | defaults, repeated | s | others' CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        accuracy = (
            f"{number(r['accuracy_original'], '.4f')} → {number(r['accuracy_chosen'], '.4f')} "
            f"({number(r['accuracy_change'], '+.4f')})"
        )
        print(
            f"| {r['model']} | {r['batch']} | {number(r['runs'], ',')} | {r['unoptimized']} | {r['defaults']} "
            f"| {r['chosen']} | {r['chosen_latency']} | {x(r['chosen_vs_unoptimized'])} "
            f"| {x(r['defaults_vs_unoptimized'])} | {x(r['chosen_vs_defaults'])} | {accuracy} "
            f"| {kib(r['size_original'])} → {kib(r['size_chosen'])} | {x(r['repeat'])} | {r['seconds']} "
            f"| {r['others_cores']:.2f} |"
        )


def print_candidates(label: str, report: OptimizationReport) -> None:
    print(f"\n{label}: every model measured (speed-up over the unoptimized model, at p50)\n")
    print(
        "| id | passes (settings) | p50 ms [95% CI] | mean ms | p99 ms | vs unoptimized | accuracy | size "
        "| meets goals | why not |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    unoptimized = next((r for r in report.references if r.id == "unoptimized"), None)
    everything = [*report.references, *([report.original] if report.original else []), *report.candidates]
    names = {"unoptimized": "unoptimized (graph optimizations off)", "original": "original (ORT defaults)"}
    for c in everything:
        meets = "-" if c.meets_goals is None else "yes" if c.meets_goals else "no"
        chosen = " (chosen)" if report.chosen is not None and c.id == report.chosen.candidate_id else ""
        figures = c.latency
        print(
            f"| {names.get(c.id, c.id)}{chosen} | {settings(c)} | {latency(c)} "
            f"| {number(figures.mean_ms if figures else None, '.4g')} "
            f"| {number(figures.p99_ms if figures else None, '.4g')} | {x(ratio(unoptimized, c))} "
            f"| {number(c.accuracy, '.4f')} | {kib(c.model_size_bytes)} | {meets} "
            f"| {(c.message or '') if not c.meets_goals or c.status == 'Failed' else ''} |"
        )


def print_flops(report: OptimizationReport, batch: int) -> None:
    total, lines = hand_count_flops()
    profile = next((p for p in report.profiles if p.model == "original"), None)
    print(
        f"\nFLOPs of the convolutional network (a multiply-add is 2 FLOPs), per image; the report's at batch {batch}:\n"
    )
    print("| node | hand count, one image | FLOPs | kaliper's estimate (report, profiles[original].graphNodes) |")
    print("|---|---|---|---|")
    estimated = {n.node: n.flops for n in profile.graph_nodes} if profile else {}
    for node, formula, flops in lines:
        print(
            f"| {node} | {formula} | {flops * batch:,}{f' (x{batch})' if batch > 1 else ''} "
            f"| {number(estimated.get(node), ',')} |"
        )
    if profile is None:
        print("\nthe report has no profile of the original model")
        return
    print(f"| **total** | | **{total * batch:,}** | **{profile.flops:,}** |")
    missing = f"; no estimate for {', '.join(profile.nodes_without_estimate)}" if profile.nodes_without_estimate else ""
    print(f"\nreport profiles[original].flops / hand count = {profile.flops / (total * batch):.6f}{missing}")


def print_chosen_flops(reports: dict[tuple[str, int], OptimizationReport]) -> None:
    """The FLOPs estimate of each chosen model beside its original's (profiles[1] against profiles[0])."""
    print("\nFLOPs estimates of the chosen models (report profiles), against their original:\n")
    print("| optimization | batch | original | chosen | chosen's estimate | ops without an estimate |")
    print("|---|---|---|---|---|---|")
    for (label, batch), report in reports.items():
        original = next((p for p in report.profiles if p.model == "original"), None)
        for other in report.profiles:
            if other.model == "original" or original is None:
                continue
            chosen = next((c for c in report.candidates if c.id == other.model), None)
            print(
                f"| {label} | {batch} | {original.flops:,} | {other.model}: {settings(chosen) if chosen else ''} "
                f"| {other.flops:,} | {', '.join(other.nodes_without_estimate) or '-'} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="Optimize each model this many times.")
    parser.add_argument("--keep", type=Path, default=None, help="Keep every report (report.json, .html) here.")
    parser.add_argument(
        "--batch-sizes", type=int, nargs="+", default=[1, 32], help="evaluator.latency.batchSize values to run."
    )
    args = parser.parse_args()
    rows, first = [], {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kaliper-bench-opt-") as tmp:
        folder = Path(tmp)
        reports = (args.keep or folder / "reports").resolve()
        mlp, mlp_rows, mlp_info = make_mlp(folder)
        conv, conv_rows, conv_info = make_convnet(folder)
        mlp_onnx = as_onnx(mlp, folder)
        print(
            f"MLP: trained in {mlp_info['train_seconds']} s, scikit-learn's held-out accuracy "
            f"{mlp_info['sklearn_test_accuracy']:.4f}; convnet: labels per class {conv_info['label_counts']}",
            file=sys.stderr,
        )
        mlp_model = {
            "source": {"file": str(mlp)},
            "framework": "sklearn",
            "inputs": [{"name": "float_input", "shape": [-1, 64], "datatype": "FP32"}],
        }
        conv_model = {"source": {"file": str(conv)}}
        jobs = [
            ("sklearn MLP 64-256-256-10, dynamic int8", "mlp-dynamic", mlp_model, "dynamic", mlp_rows, mlp_onnx),
            ("ONNX convnet, dynamic int8", "convnet-dynamic", conv_model, "dynamic", conv_rows, conv),
            ("ONNX convnet, static int8", "convnet-static", conv_model, "static", conv_rows, conv),
        ]
        timed = {(onnx, batch): runs_for(onnx, batch) for *_, onnx in jobs for batch in args.batch_sizes}
        for i in range(args.runs):
            for batch in args.batch_sizes:
                for label, name, model, quantization, dataset, onnx in jobs:
                    output = reports / f"{name}-b{batch}-{i + 1}"
                    latency_spec = {
                        "metric": "p50",
                        "runs": timed[onnx, batch],
                        "warmupRuns": WARMUP_RUNS,
                        "batchSize": batch,
                    }
                    path = manifest(folder, name, model, quantization, dataset, output, latency_spec)
                    report, seconds, others = optimize(path, output)
                    rows.append(row(label + (f" #{i + 1}" if args.runs > 1 else ""), batch, report, seconds, others))
                    first.setdefault((label, batch), report)
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(
        f"Measured {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs seen, target.cpu 1, latency p50 after "
        f"{WARMUP_RUNS} warm-up runs; {time.monotonic() - started:.0f} s in all\n"
    )
    print_rows(rows)
    if args.runs > 1:
        print()
        for batch in args.batch_sizes:
            for label, *_ in jobs:
                ratios = [
                    r["chosen_vs_unoptimized"] for r in rows if r["model"].startswith(label) and r["batch"] == batch
                ]
                ratios = [v for v in ratios if v is not None]
                if ratios:
                    print(
                        f"- {label}, batch {batch}: chosen vs unoptimized {min(ratios):.2f}x-{max(ratios):.2f}x "
                        f"over {len(ratios)} of {args.runs} runs that chose a model"
                    )
    for (label, batch), report in first.items():
        print_candidates(f"{label}, batch {batch}", report)
    batch = min(args.batch_sizes)
    print_flops(first["ONNX convnet, dynamic int8", batch], batch)
    print_chosen_flops(first)
    print(
        f"\nMLP: scikit-learn's own held-out accuracy {mlp_info['sklearn_test_accuracy']:.4f} (the ONNX model's is "
        "in the table). Convnet: the labels are the float model's own argmax (accuracy = agreement with it), per "
        f"class {conv_info['label_counts']}"
    )


if __name__ == "__main__":
    main()
