"""Benchmarks of the local runtime (`kaliper run`): limit fidelity and search efficiency.

    .venv/bin/python bench/local_runtime.py limits      # throughput at CPU limits vs unconstrained
    .venv/bin/python bench/local_runtime.py search      # knee search vs grid on an 18-trial sweep

limits: a CPU-bound model (an MLP, 64 -> 4x512 -> 1, 16 rows per request, 2 intra-op threads) under CPU limits
of 0.5, 1 and 2 cores and without a limit; the ratio of each throughput to the unconstrained one should follow
the limit. search: the same ProfileRun with search.strategy grid and knee; both answers and both
load-generation times.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "operator"))

from kaliper.report.schema import ProfileReport  # noqa: E402
from kaliper.serving.examples import make_cpu_heavy, make_iris  # noqa: E402

KALIPER = Path(sys.executable).with_name("kaliper")


def deployment(name: str, model: Path, threads: int, cpu: str | None) -> dict:
    resources = {"limits": {"memory": "1Gi", **({"cpu": cpu} if cpu else {})}}
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {"model": {"file": str(model), "name": "m"}, "threads": {"intraOp": threads}, "resources": resources},
    }


def profile_run(name: str, target: str, shape: list[int], **spec: object) -> dict:
    return {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": name},
        "spec": {
            "target": {"deploymentRef": {"name": target}},
            "payload": {"tensors": {"inputs": [{"name": "float_input", "shape": shape}], "seed": 1}},
            "report": {"formats": ["json"]},
            **spec,
        },
    }


def run(tmp: Path, name: str, *documents: dict) -> ProfileReport:
    manifest = tmp / f"{name}.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    out = tmp / name
    subprocess.run(
        [str(KALIPER), "run", str(manifest), "--output-dir", str(out)], check=True, stdout=subprocess.DEVNULL
    )
    return ProfileReport.model_validate_json((out / "report.json").read_text())


def limits(tmp: Path) -> None:
    model = make_cpu_heavy(tmp / "mlp.onnx")
    load = {
        "closedLoop": {"concurrency": 4},
        "warmup": "3s",
        "minDuration": "15s",
        "maxDuration": "15s",
        "stopping": {"window": "5s"},
    }
    shape = [16, 64]
    limited = run(
        tmp,
        "limited",
        deployment("mlp", model, 2, "1"),
        profile_run("limits", "mlp", shape, load=load, sweep={"cpu": ["500m", "1", "2"]}),
    )
    free = run(tmp, "free", deployment("mlp-free", model, 2, None), profile_run("free", "mlp-free", shape, load=load))
    baseline = free.trials[0]
    print("# Limit fidelity: CPU-bound MLP, 16 rows per request, closed loop with 4 users\n")
    print("| CPU limit | requests/s | ratio to unconstrained | CPU used (cores, cgroup) | throttled periods |")
    print("|---|---|---|---|---|")
    for trial in [*limited.trials, baseline]:
        label = trial.parameters.get("cpu", "none")
        rps = trial.stage.throughput_rps
        print(
            f"| {label} | {rps:.1f} | {rps / baseline.stage.throughput_rps:.3f} | "
            f"{trial.resources.cpu_avg_cores:.3f} | {trial.resources.cpu_throttled_ratio:.0%} |"
        )


def search(tmp: Path) -> None:
    model = make_iris(tmp / "iris.onnx")
    spec = {
        "load": {
            "closedLoop": {"concurrency": 1},
            "warmup": "2s",
            "minDuration": "4s",
            "maxDuration": "4s",
            "stopping": {"window": "1s"},
        },
        "sweep": {"cpu": ["250m", "500m", "750m", "1", "1500m", "2"], "concurrency": [1, 4, 16]},
        "slo": {"latency": [{"percentile": 99, "max": "20ms"}], "maxErrorRate": 0.001},
        "cost": {"perCoreHour": 0.0316, "perGibHour": 0.0042},
    }
    target = deployment("iris", model, 1, None)
    grid = run(tmp, "grid", target, profile_run("grid", "iris", [-1, 4], search={"strategy": "grid"}, **spec))
    knee = run(tmp, "knee", target, profile_run("knee", "iris", [-1, 4], search={"strategy": "knee"}, **spec))
    print("# Search efficiency: 6 CPU limits x 3 load levels = 18 trials, SLO p99 <= 20 ms\n")
    print("| strategy | trials run | load-generation time | best trial | best configuration | cost per 1M |")
    print("|---|---|---|---|---|---|")
    for name, report in (("grid", grid), ("knee", knee)):
        ran = sum(t.status != "Skipped" for t in report.trials)
        best = next((t for t in report.trials if t.index == report.best_trial), None)
        params = ", ".join(f"{k}={v}" for k, v in best.parameters.items()) if best else "-"
        cost = f"{best.cost_per_million_requests:.5f}" if best and best.cost_per_million_requests else "-"
        print(
            f"| {name} | {ran} of {len(report.trials)} | {report.load_generation_s:.0f} s | "
            f"{report.best_trial} | {params} | {cost} |"
        )
    print(
        f"\nknee / grid load-generation time: {knee.load_generation_s / grid.load_generation_s:.2f}; "
        f"same best configuration: {grid.best_trial == knee.best_trial}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("benchmark", choices=["limits", "search"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (limits if args.benchmark == "limits" else search)(Path(tmp))


if __name__ == "__main__":
    main()
