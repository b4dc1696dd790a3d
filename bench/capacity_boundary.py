"""How far the answer at the listed load levels is from the answer at the SLO boundary (issue 40): a demo's
ProfileRun (examples/local/demo.yaml, or --demo llm) run once with capacity probes, then decided twice from
the same report: from the trials at the listed levels only (what Kaliper answered before the capacity search),
and from every trial, probes included. The boundary is the ground truth here, measured in the same run.

    .venv/bin/python bench/capacity_boundary.py [--demo classic|llm] [--probes 3]

Printed: each configuration's bracket at the listed levels and after the probes, the cost per million
requests (output tokens) at its highest level met in each, the chosen configuration, its cost and replicas
both ways, and the time the probes took (a markdown table for docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "operator"))
sys.path.insert(0, str(BENCH))

from repeatability import demo_manifest, one_run  # noqa: E402

from kaliper.api.resources import ProfileRun  # noqa: E402
from kaliper.profiling.capacity import capacities  # noqa: E402
from kaliper.profiling.decisions import best_trial, recommend  # noqa: E402
from kaliper.profiling.plan import configurations  # noqa: E402
from kaliper.report.schema import ProfileReport  # noqa: E402


def with_probes(manifest: Path, probes: int) -> tuple[Path, ProfileRun]:
    documents = list(yaml.safe_load_all(manifest.read_text()))
    for document in documents:
        if document["kind"] == "ProfileRun":
            document["spec"].setdefault("search", {})["capacity"] = {"probes": probes}
            run = ProfileRun.model_validate(document)
    path = manifest.with_name("probed.yaml")
    path.write_text(yaml.safe_dump_all(documents))
    return path, run


def decide(report: ProfileReport, run: ProfileRun, trials: list) -> tuple[str, float | None, int | None]:  # type: ignore[type-arg]
    """The choice, its cost per million and its replicas, from these trials alone."""
    spec = run.spec
    choice = best_trial(trials, spec.slo, spec.recommendation.tie_tolerance)
    if choice is None:
        return "-", None, None
    best = next(t for t in trials if t.index == choice.best)
    advice = recommend(
        best,
        trials,
        spec.recommendation,
        best.replicas,
        spec.slo.target_throughput if spec.slo else None,
        spec.slo.target_output_tokens_per_second if spec.slo else None,
    )
    return ", ".join(f"{k}={v}" for k, v in best.parameters.items()), best.unit_cost(), advice.replicas


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", choices=["classic", "llm"], default="classic")
    parser.add_argument("--probes", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        manifest, run = with_probes(demo_manifest(Path(tmp), args.demo), args.probes)
        report, seconds = one_run(manifest, Path(tmp) / "reports", busy=False)
    configs = configurations(run.spec, None)
    first_probe = len(configs) * len(configs[0].levels)
    listed = [t for t in report.trials if t.index < first_probe]
    level = configs[0].level_name
    before = {tuple(c.parameters.items()): c for c in capacities(listed, level, first_probe)}
    header = ["configuration", "listed levels", f"after {args.probes} probes", "cost at the listed level met"]
    print("| " + " | ".join([*header, "cost at the boundary", "change"]) + " |")
    print("|---|---|---|---|---|---|")
    for after in report.capacities:
        start = before[tuple(after.parameters.items())]
        where = ", ".join(f"{k}={v}" for k, v in after.parameters.items())
        costs = [f"{c:.4f}" if c is not None else "-" for c in (start.unit_cost, after.unit_cost)]
        change = (
            f"{(after.unit_cost - start.unit_cost) / start.unit_cost:+.1%}"
            if start.unit_cost and after.unit_cost
            else "-"
        )
        print(f"| {where} | {start.interval_text()} | {after.interval_text()} | {costs[0]} | {costs[1]} | {change} |")
    listed_choice, boundary_choice = decide(report, run, listed), decide(report, run, report.trials)
    probe_seconds = sum(c.probe_seconds for c in report.capacities)
    print()
    print("| decided from | choice | cost per million | replicas |")
    print("|---|---|---|---|")
    for label, (best, cost, replicas) in (("listed levels", listed_choice), ("every trial", boundary_choice)):
        print(f"| {label} | {best} | {f'{cost:.4f}' if cost is not None else '-'} | {replicas or '-'} |")
    print(
        f"\n{len(report.trials)} trials ({len(report.trials) - len(listed)} probes) in {seconds:.0f} s; the probes "
        f"took {probe_seconds:.0f} s of the {report.load_generation_s:.0f} s of load"
    )


if __name__ == "__main__":
    main()
