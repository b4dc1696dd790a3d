"""How much a rerun of the same run moves, against the intervals one run reports: what `kaliper compare`'s
RERUN_NOISE_FLOOR (kaliper/profiling/comparison.py) must cover. The same ground-truth server (a lognormal 20 ms
median, sigma 0.1) measured RUNS times in a row by `kaliper run`, 4 users for 3 s after a 500 ms warm-up (the
runs of tests/local/test_compare_runs.py).

    .venv/bin/python bench/rerun_noise.py [--runs 22]

Prints each run (throughput, p50 with its 95% interval) and then the spread of both figures across the runs,
the widest half-interval one run gave, and the largest gap between any two runs beside the floor's 2 x floor.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import yaml
from _common import groundtruth

from kaliper.profiling.comparison import RERUN_NOISE_FLOOR
from kaliper.report.schema import ProfileReport

KALIPER = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "kaliper"


def measure(directory: Path, url: str) -> ProfileReport:
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "rerun"},
        "spec": {
            "target": {"url": url},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 4}, "warmup": "500ms", "minDuration": "3s", "maxDuration": "3s"},
            "slo": {"latency": [{"percentile": 99, "max": "1s"}]},
        },
    }
    directory.mkdir(parents=True)
    (directory / "run.yaml").write_text(yaml.safe_dump(run))
    done = subprocess.run(
        [str(KALIPER), "run", str(directory / "run.yaml"), "--output-dir", str(directory / "reports")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return ProfileReport.model_validate_json((directory / "reports" / "report.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=22)
    runs = parser.parse_args().runs
    rates, medians, half_widths = [], [], []
    root = Path(tempfile.mkdtemp(prefix="rerun-noise-"))
    print("| run | req/s | p50 ms (95%) |\n|---|---|---|")
    with groundtruth("-median", "20ms", "-sigma", "0.1") as url:
        for i in range(runs):
            stage = measure(root / str(i), url).trials[0].stage
            assert stage is not None
            p50 = stage.latency.at(50)
            assert p50 is not None and p50.value_ms and p50.ci_low_ms and p50.ci_high_ms
            rates.append(stage.throughput_rps)
            medians.append(p50.value_ms)
            half_widths.append((p50.ci_high_ms - p50.ci_low_ms) / 2 / p50.value_ms)
            print(
                f"| {i} | {stage.throughput_rps:.1f} | {p50.value_ms:.2f} ({p50.ci_low_ms:.2f}-{p50.ci_high_ms:.2f}) |"
            )
    for name, values in (("throughput", rates), ("p50", medians)):
        gap = (max(values) - min(values)) / min(values)
        print(f"{name}: {min(values):.2f}-{max(values):.2f}, largest gap between two runs {gap:.1%}")
    print(f"widest p50 half-interval of one run: +-{max(half_widths):.1%}")
    print(f"RERUN_NOISE_FLOOR {RERUN_NOISE_FLOOR:.1%} each side: runs closer than {2 * RERUN_NOISE_FLOOR:.1%} agree")


if __name__ == "__main__":
    main()
