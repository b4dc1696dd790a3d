"""The installed `kaliper` command, run as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml

from tests.support.paths import KALIPER, REPO


def kaliper(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([str(KALIPER), *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_examples_validate() -> None:
    result = kaliper("validate", "examples/")
    assert result.returncode == 0, result.stdout + result.stderr
    # Skipped: the Secret and ConfigMap of profilerun-url.yaml, llm/loadtest-chat.yaml and
    # llm/loadtest-trace.yaml (load-generator configs), the seven objects of kind/prometheus.yaml and the nine of
    # kind/metrics-server.yaml; the models `make-example-models` writes (tokenizer JSON) are skipped too where
    # they exist.
    made = len(list((REPO / "examples/local/models").rglob("*.json")))
    assert re.search(rf"\b30 valid, 0 invalid, {20 + made} skipped", result.stdout), result.stdout


def test_broken_manifests_fail_naming_each_problem() -> None:
    result = kaliper("validate", "tests/catalogue/invalid")
    assert result.returncode == 1
    output = result.stdout
    for path in sorted((REPO / "tests/catalogue/invalid").glob("*.yaml")):
        expected = re.search(r"^# expect: (\S+)", path.read_text(), re.M).group(1)  # type: ignore[union-attr]
        block = output.split(str(path.relative_to(REPO)))[1].split("\ninvalid ")[0]
        assert expected in block, f"{path.name}: {expected} not named in\n{block}"
    # The problems the issue names, each with its fix.
    assert "'2GB' is not a Kubernetes quantity" in output
    assert "spec.load.concurrency: unknown field" in output
    assert "spec.target: set exactly one of deploymentRef, workloadRef or url" in output
    assert "spec.load.warmup: '-10s' is not a duration" in output
    assert "spec.payload: required field is missing" in output


def test_yaml_errors_name_the_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: kaliper.dev/v1alpha1\nkind: ProfileRun\nspec:\n  target: [unclosed\n")
    result = kaliper("validate", str(broken))
    assert result.returncode == 1
    assert "not valid YAML: line" in result.stdout


def test_multi_document_files_report_each_document(tmp_path: Path) -> None:
    good = yaml.safe_load((REPO / "examples/modeldeployment.yaml").read_text())
    bad = json.loads(json.dumps(good))
    bad["spec"]["replicas"] = "many"
    (tmp_path / "two.yaml").write_text(yaml.safe_dump_all([good, bad]))
    result = kaliper("validate", "-o", "json", str(tmp_path))
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert [d["valid"] for d in report] == [True, False]
    assert report[1]["document"] == 2
    assert report[1]["problems"][0]["path"] == "spec.replicas"


def test_make_example_models_only_makes_the_models_named(tmp_path: Path) -> None:
    result = kaliper("make-example-models", str(tmp_path), "--only", "iris.onnx", "--only", "tiny-llm")
    assert result.returncode == 0, result.stderr
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == ["iris.onnx", "tiny-llm/tiny.gguf", "tiny-llm/tokenizer.json", "tiny-llm/tokenizer_config.json"]
    refused = kaliper("make-example-models", str(tmp_path), "--only", "resnet")
    assert refused.returncode == 2
    assert "Invalid value for '--only': 'resnet' is not one of 'iris.onnx', 'mlp.onnx', 'iris'," in refused.stderr


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    result = kaliper("validate", str(tmp_path))
    assert result.returncode != 0
    assert "no manifests found" in result.stderr


def test_crds_check_and_generate(tmp_path: Path) -> None:
    assert kaliper("crds", "generate", "--check").returncode == 0, "run `make crds` and commit the result"
    options = ["--dir", str(tmp_path), "--reference", str(tmp_path / "api.md")]
    stale = kaliper("crds", "generate", "--check", *options)
    assert stale.returncode == 1 and "out of date" in stale.stderr
    written = kaliper("crds", "generate", *options)
    assert written.returncode == 0
    assert len(list(tmp_path.glob("kaliper.dev_*.yaml"))) == 4
    reference = (tmp_path / "api.md").read_text()
    assert "| `spec.load.openLoop.rate` * | number |" in reference
    assert "`spec.target`: set exactly one of deploymentRef, workloadRef or url" in reference
    commands = (tmp_path / "reference" / "cli.md").read_text()  # every command's --help, beside it
    assert "## `kaliper run`\n\n```text\nUsage: kaliper run [OPTIONS] PATHS...\n" in commands
    fields = (tmp_path / "reference" / "reports.md").read_text()  # every field of a ProfileRun's report.json
    assert "| `trials[].stage.tokens.serverLoad.prefixCacheHitRate` | number |" in fields
    assert kaliper("crds", "generate", "--check", *options).returncode == 0
    (tmp_path / "reference" / "cli.md").write_text(commands.replace("Usage: kaliper run", "Usage: kaliper go"))
    assert (
        "out of date: " + str(tmp_path / "reference" / "cli.md")
        in kaliper("crds", "generate", "--check", *options).stderr
    )


def test_crds_print_one_kind() -> None:
    result = kaliper("crds", "print", "profilerun")
    assert result.returncode == 0
    assert yaml.safe_load(result.stdout)["metadata"]["name"] == "profileruns.kaliper.dev"
    assert kaliper("crds", "print", "nonsense").returncode != 0


def test_explain_walks_into_fields() -> None:
    result = kaliper("explain", "prun.spec.load.openLoop")
    assert result.returncode == 0, result.stderr
    assert "rate  <number> (required)" in result.stdout
    assert "arrival  <constant | poisson | gamma>" in result.stdout
    missing = kaliper("explain", "profilerun.spec.lode")
    assert missing.returncode != 0 and "has no field 'lode'" in missing.stderr


def test_report_re_renders_a_saved_file_and_refuses_what_is_not_a_report(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from kaliper.report.schema import ProfileReport

    saved = ProfileReport(
        name="saved", started_at=datetime(2026, 11, 24, tzinfo=UTC), target="http://127.0.0.1:9/", strategy="grid"
    )
    path = tmp_path / "report.json"
    path.write_text(saved.model_dump_json(by_alias=True))
    shown = kaliper("report", str(path), "--json", "--html", str(tmp_path / "report.html"))
    assert shown.returncode == 0, shown.stderr
    assert ProfileReport.model_validate_json(shown.stdout) == saved
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    path.write_text('{"kind": "ModelDeployment"}')
    refused = kaliper("report", str(path))
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"Error: {path} is not a Kaliper profile report:")


def test_recommend_prints_a_saved_runs_recommendation_as_a_patch_or_the_patched_manifest(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from kaliper.report.schema import ProfileReport, RecommendationReport

    recommendation = RecommendationReport(cpu_request="288m", memory_request="173Mi", replicas=1, rationale="p90")
    saved = ProfileReport(
        name="sweep",
        started_at=datetime(2026, 11, 24, tzinfo=UTC),
        target="ModelDeployment/iris",
        strategy="grid",
        recommendation=recommendation,
    )
    path = tmp_path / "report.json"
    path.write_text(saved.model_dump_json(by_alias=True))
    patch = kaliper("recommend", str(path))
    assert (patch.returncode, patch.stdout) == (
        0,
        '{"spec":{"replicas":1,"resources":{"requests":{"cpu":"288m","memory":"173Mi"}}}}\n',
    )
    # The manifest as Git holds it (examples/modeldeployment.yaml), with the recommendation applied.
    target = tmp_path / "iris.yaml"
    target.write_text((REPO / "examples" / "modeldeployment.yaml").read_text())
    shown = kaliper("recommend", str(path), "--format", "manifest", "--target", str(target))
    assert shown.returncode == 0, shown.stderr
    manifest = yaml.safe_load(shown.stdout)
    original = yaml.safe_load(target.read_text())
    assert manifest["metadata"] == original["metadata"] and manifest["spec"]["replicas"] == 1
    assert manifest["spec"]["resources"]["requests"] == {"cpu": "288m", "memory": "173Mi"}
    assert manifest["spec"]["model"] == original["spec"]["model"]
    kustomize = kaliper("recommend", str(path), "--format", "kustomize")
    assert kustomize.stdout.startswith(
        "apiVersion: kaliper.dev/v1alpha1\nkind: ModelDeployment\nmetadata:\n  name: iris\n"
    )
    url_run = saved.model_copy(update={"target": "http://127.0.0.1:9/"})
    path.write_text(url_run.model_dump_json(by_alias=True))
    refused = kaliper("recommend", str(path))
    assert refused.returncode == 1
    assert refused.stderr == (
        "Error: ProfileRun sweep loaded a URL (http://127.0.0.1:9/), not a ModelDeployment or a Deployment: there "
        "is no target to patch; the recommendation is in its report\n"
    )
    # A workloadRef's Deployment: its containers list would be replaced by a JSON merge patch.
    workload_run = saved.model_copy(update={"target": "Deployment/scorer", "target_container": "model"})
    path.write_text(workload_run.model_dump_json(by_alias=True))
    strategic = kaliper("recommend", str(path))
    assert (strategic.returncode, strategic.stdout) == (
        0,
        '{"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"model","resources":{"requests":'
        '{"cpu":"288m","memory":"173Mi"}}}]}}}}\n',
    )
    refused = kaliper("recommend", str(path), "--format", "merge-patch")
    assert refused.returncode == 1
    assert refused.stderr == (
        "Error: ProfileRun sweep profiled Deployment/scorer: a JSON merge patch would replace its whole containers "
        "list; use --format patch (a strategic merge patch, kubectl patch's default type)\n"
    )


def test_kaliper_run_says_a_prediction_check_is_the_operators(tmp_path: Path) -> None:
    manifest = tmp_path / "run.yaml"
    manifest.write_text(
        """apiVersion: kaliper.dev/v1alpha1
kind: ModelDeployment
metadata: {name: iris}
spec:
  model: {file: missing.onnx, name: iris}
  prediction: {profile: {run: iris-sweep}}
---
apiVersion: kaliper.dev/v1alpha1
kind: ProfileRun
metadata: {name: iris-sweep}
spec:
  target: {deploymentRef: {name: iris}}
  payload: {inline: "{}"}
  load: {closedLoop: {concurrency: 1}}
"""
    )
    done = subprocess.run(
        [str(KALIPER), "run", str(manifest), "--output-dir", str(tmp_path / "reports")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1 and f"trial 0 Failed: model {tmp_path / 'missing.onnx'} does not exist" in done.stdout
    said = " ".join(done.stderr.split())
    assert (
        "ModelDeployment iris: spec.prediction is checked by the operator against production; from this machine, "
        "`kaliper compare PROFILE --from-prometheus URL` scores it"
    ) in said
