"""The contract's runs: one ProfileRun per part of the plan (profiling.run_plan) the two executors carry out,
each with scripted measurements (tests/support/scripted_trials.py), so that `kaliper run`'s loop and the
operator decide from the same figures. tests/profiling/test_scripted_plan.py states what each decides through
`kaliper run`; tests/cluster/test_contract.py runs them all through the operator at once and finds the same."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from kaliper.api.resources import ModelDeployment, ProfileRun
from kaliper.local.executor import RunOptions
from kaliper.report.schema import ProfileReport
from tests.support.many_runs import TARGET, profile_run
from tests.support.scripted_trials import FAILS, QUALITY, SPEED, SPREAD, ScriptedLocalExecutor


def _run(name: str, **spec: object) -> dict:
    """The iris target's run of tests/support/many_runs.py, swept over two CPU limits at 2, 4 and 8 users, priced,
    with `spec`'s sections in place of its own."""
    run = profile_run(name, ["500m", "1"])
    run["spec"].update(
        load={"closedLoop": {"concurrency": 2}},
        sweep={"cpu": ["500m", "1"], "concurrency": [2, 4, 8]},
        slo={"latency": [{"percentile": 99, "max": "50ms"}], "maxErrorRate": 0.01},
        cost={"perCoreHour": 0.04},
    )
    run["spec"].update(spec)
    return run


GRID = _run("grid")
# The capacity search: one core, listed 2 and 16 users, four probes, 400 requests a second to serve.
KNEE = _run(
    "knee",
    sweep={"cpu": ["1"], "concurrency": [2, 16]},
    search={"strategy": "knee", "capacity": {"probes": 4}},
    slo={"latency": [{"percentile": 99, "max": "45ms"}], "targetThroughput": 400},
)
# One core against 1.01: 0.5% apart in cost, inside the noise of two repetitions 6% apart (wider than the 1%
# tolerance), so a tie-break round measures both again.
TIE = _run(
    "tie",
    sweep={"cpu": ["1", "1010m"], "concurrency": [2]},
    search={"tieBreak": {"budget": "10m", "rounds": 1}},
    recommendation={"tieTolerance": 0.01},
)
TIE["metadata"]["annotations"] = {SPREAD: "0.06"}
# The same, and the tie-break's first trial fails: that configuration was measured again without qualifying.
FAILED_REPEAT = copy.deepcopy(TIE)
FAILED_REPEAT["metadata"] = {"name": "failed-repeat", "annotations": {SPREAD: "0.06", FAILS: "2"}}
# Two model variants that serve alike (a tie inside the noise) under the knee search, which skips each one's
# lowest level once a higher one met the SLO: the tie-break round still comes (the operator used to wait for
# every trial to succeed or fail, Skipped ones too, and never started it).
KNEE_TIE = _run(
    "knee-tie",
    sweep={
        "cpu": ["1"],
        "modelVariants": [
            {"name": name, "model": {"configMap": {"name": f"iris-{name}", "key": "model.onnx"}}} for name in ("a", "b")
        ],
        "concurrency": [2, 4, 16],
    },
    search={"strategy": "knee", "tieBreak": {"budget": "10m", "rounds": 1}},
    recommendation={"tieTolerance": 0.01},
)
KNEE_TIE["metadata"]["annotations"] = {SPREAD: "0.06"}
# 2,000 cores never become ready: its first level fails deploying, its second fails without being deployed.
NEVER_READY = _run("never-ready", sweep={"cpu": ["500m", "2000"], "concurrency": [2, 4]}, readyTimeout="15s")
# The grid against a baseline twice as fast, gated by slo.failIfRegressed (where the baseline is read differs:
# baseline_source).
REGRESSED = _run("regressed", slo={**GRID["spec"]["slo"], "failIfRegressed": {}})  # type: ignore[dict-item]
BASELINE = copy.deepcopy(GRID)
BASELINE["metadata"] = {"name": "baseline", "annotations": {SPEED: "0.5"}}

# Quality in the choice: the cheaper half core predicts half the rows right, below the 0.9 floor, so the choice
# is the whole core; each configuration asks the rows once, on its first trial to start. The dataset is where
# each path reads it (quality_dataset).
QUALITY_FLOOR = _run(
    "quality",
    quality={"dataset": {"file": "rows.jsonl"}, "scorer": "accuracy", "rows": 40, "floor": {"min": 0.9}},
)
QUALITY_FLOOR["metadata"]["annotations"] = {QUALITY: "500m=0.5,1=1"}

SCENARIOS = [GRID, KNEE, TIE, FAILED_REPEAT, KNEE_TIE, NEVER_READY, REGRESSED, QUALITY_FLOOR]


def quality_dataset(run: dict, dataset: dict) -> dict:
    """The run with its quality dataset read from `dataset` (a ConfigMap on the cluster)."""
    manifest = copy.deepcopy(run)
    if "quality" in manifest["spec"]:
        manifest["spec"]["quality"]["dataset"] = dataset
    return manifest


def fitted(target: str, prometheus: str, tokenizer: dict) -> dict:
    """A run whose prompts and arrivals are fitted from vLLM's series in `prometheus` when it is planned
    (payload.prompts.fromPrometheus, load.fitted at 30 times the rate seen), against a URL target; `tokenizer`:
    where its tokenizer is (a file for `kaliper run`, a ConfigMap on Kubernetes)."""
    run = _run("fitted")
    del run["spec"]["sweep"], run["spec"]["cost"]  # the target as it is, unpriced (a URL)
    run["spec"].update(
        target={"url": target},
        request={"protocol": "openai-completions", "modelName": "truth"},
        payload={
            "prompts": {
                "fromPrometheus": {"url": prometheus, "selector": 'model_name="truth"', "window": "10m"},
                "tokenizer": tokenizer,
            }
        },
        load={"fitted": {"scale": 30}},
    )
    return run


# Each path's own: what it measured of resources (none here on the cluster: no Prometheus) and of its servers'
# startup (pods there, processes here), when, and the name.
OWN = {"name", "resources", "startup", "start_time", "completion_time"}


def with_baseline(run: dict, baseline: dict) -> dict:
    manifest = copy.deepcopy(run)
    manifest["spec"]["baseline"] = baseline
    return manifest


def run_locally(run: dict, tmp_path: Path, baseline: Path | None = None) -> ProfileReport:
    """The run through `kaliper run`'s executor, scripted; `baseline`: the file spec.baseline.report names."""
    manifest = with_baseline(run, {"report": str(baseline)}) if baseline is not None else copy.deepcopy(run)
    options = RunOptions(base_dir=tmp_path, output_dir=tmp_path / "work", limits=False)
    return ScriptedLocalExecutor(options).run(
        ProfileRun.model_validate(manifest), {"iris": ModelDeployment.model_validate(TARGET)}
    )


def baseline_report(tmp_path: Path) -> Path:
    """BASELINE run locally, its report written where spec.baseline.report names it."""
    path = tmp_path / "baseline.json"
    path.write_text(run_locally(BASELINE, tmp_path / "baseline").model_dump_json(by_alias=True, exclude_none=True))
    return path


def decided(report: ProfileReport, names: str) -> dict:
    """What the run decided, with `names` (the cluster's "<run>-t") written as the local "t", and the words of
    each path's own (why a server never came up, where the baseline was read) made the same."""
    data = report.model_dump(
        mode="json",
        include={"trials", "capacities", "best_trial", "choice", "configurations", "frontier", "verdict",
                 "verdict_reason", "recommendation", "error", "warnings", "baseline", "comparison", "workload",
                 "slo", "level_name"},
    )  # fmt: skip
    for trial in data["trials"]:
        for key in OWN & trial.keys():
            del trial[key]
        if trial["stage"] is not None:
            del trial["stage"]["started_at"]
    if data.get("baseline"):
        data["baseline"]["source"] = "the baseline"
    if data.get("workload"):  # fitted at its own instant, over the window that ends there
        del data["workload"]["fitted_at"], data["workload"]["source"]
    text = json.dumps(data)
    never_ready = {t.message for t in report.trials if t.status == "Failed" and t.stage is None and t.message}
    for message in never_ready - {"scripted: the target refused every connection"}:
        text = text.replace(json.dumps(message)[1:-1], "never ready")
    return json.loads(text.replace(names, "t"))
