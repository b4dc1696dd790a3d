"""The documentation site (mkdocs.yml, Material for MkDocs) builds strictly from docs/, offline: every page of
the nav built, a link to a page or anchor that does not exist fails the build, no web font or CDN asked for;
and the README's links into docs/ resolve. The pages in a browser: tests/test_reports_in_browser.py."""

from __future__ import annotations

import re
import shlex
import shutil
import textwrap
from pathlib import Path

import yaml
from click.testing import CliRunner

from kaliper.api.cleanup import CleanupSpec
from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.cli import main
from kaliper.profiling.plan import configurations, sweep_problem
from kaliper.profiling.quality import original_problem
from tests.support.docs_site import PAGES, REPO, build_site, figures_without_provenance, rendering_faults


def test_the_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    done = build_site(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert [page for page in PAGES if not (tmp_path / "site" / page).is_file()] == []
    index = (tmp_path / "site" / "index.html").read_text()
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index
    faults = {page: rendering_faults((tmp_path / "site" / page).read_text()) for page in PAGES}
    assert {page: found for page, found in faults.items() if found} == {}
    # A YAML block nested in a numbered list (issue 76 found three pages where it came out as one line of code).
    gpus = (tmp_path / "site" / "how-to" / "run-on-gpus.html").read_text()
    assert '<div class="highlight"><pre><span></span><code><span class="nt">spec</span>' in gpus
    assert gpus.count("<li>") == 4


def test_a_fence_rendered_inline_and_a_collapsed_list_are_found() -> None:
    """What Python-Markdown makes of a fence inside a list item without superfences, and of a list with no blank
    line before it."""
    inline_fence = "<ol><li><p>Ask:</p><p><code>yaml\nspec:\n  gpu: {count: 1}</code></p></li></ol>"
    collapsed = "<p>How it behaves:\n- It lists only the kinds it names.\n- olderThan counts from the end.</p>"
    wrapped = "<p>Run <code>helm\n  install</code> with\nthe chart, then 2 more.</p>"
    assert rendering_faults(inline_fence) == [
        "a fenced block rendered as inline code: 'yaml\\nspec:\\n  gpu: {count: 1}'"
    ]
    assert rendering_faults(collapsed) == [
        "a list collapsed into a paragraph: 'How it behaves:\\n- It lists only the kinds it names.\\n- olderT'"
    ]
    assert rendering_faults(wrapped) == []


def test_a_link_to_a_page_that_does_not_exist_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "how-to" / "gitops.md"
    page.write_text(page.read_text() + "\nSee [the capacity guide](capacity.md).\n")
    done = build_site(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 1
    assert (
        "Doc file 'how-to/gitops.md' contains a link 'capacity.md', but the target 'how-to/capacity.md' is not found "
        "among documentation files." in done.stderr
    ), done.stderr


def test_the_readmes_links_into_the_docs_resolve() -> None:
    links = re.findall(r"\]\((docs/[^)#\s]+)", (REPO / "README.md").read_text())
    assert "docs/how-to/gitops.md" in links
    assert [link for link in links if not (REPO / link).is_file()] == []


def test_every_page_but_the_home_page_starts_with_what_its_reader_will_be_able_to_do() -> None:
    leads = {}
    for page in PAGES:
        text = (REPO / "docs" / page.removesuffix(".html")).with_suffix(".md").read_text()
        paragraphs = [p for p in text.split("\n\n") if p.strip() and not p.lstrip().startswith(("<!--", "# "))]
        leads[page] = paragraphs[0].split()[0]
    assert leads.pop("index.html") == "**Which"
    assert {page: word for page, word in leads.items() if word != "After"} == {}


def test_the_release_gates_spec_in_the_guide_is_a_valid_profilerun() -> None:
    """The YAML of docs/how-to/gate-a-release.md, put into the example ProfileRun, passes the API's checks."""
    guide = (REPO / "docs" / "how-to" / "gate-a-release.md").read_text()
    block = guide.split("```yaml\n", 1)[1].split("```", 1)[0]
    example = yaml.safe_load((REPO / "examples" / "profilerun.yaml").read_text())
    example["spec"] |= yaml.safe_load(block)["spec"]
    spec = ProfileRunSpec.model_validate(example["spec"])
    assert spec.baseline is not None and spec.baseline.run == "iris-sweep-v1"
    assert spec.slo is not None and spec.slo.fail_if_regressed is not None
    assert (spec.slo.fail_if_regressed.default, spec.slo.fail_if_regressed.ttft) == (0.05, 0.10)
    assert spec.fail_if_not_met is True


def yaml_blocks(page: str) -> list[dict]:
    text = (REPO / "docs" / page).read_text()
    return [yaml.safe_load(textwrap.dedent(block.split("```", 1)[0])) for block in text.split("```yaml\n")[1:]]


def test_the_how_to_guides_manifests_pass_the_apis_checks() -> None:
    (workload,) = yaml_blocks("how-to/profile-a-running-deployment.md")
    example = yaml.safe_load((REPO / "examples" / "profilerun-workload.yaml").read_text())
    spec = ProfileRunSpec.model_validate(example["spec"] | workload["spec"])
    assert spec.target.workload_ref is not None and spec.target.workload_ref.name == "scorer"
    sizing, engines = yaml_blocks("how-to/size-an-llm-deployment.md")
    example = yaml.safe_load((REPO / "examples" / "llm" / "profilerun-sweep.yaml").read_text())
    spec = ProfileRunSpec.model_validate(example["spec"] | sizing["spec"])
    assert spec.slo is not None and spec.slo.target_output_tokens_per_second == 5000
    # The engine flags' axis beside the guide's sweep, on the example's llama.cpp deployment: flags it accepts.
    sweep = {**sizing["spec"]["sweep"], **engines["spec"]["sweep"]}
    spec = ProfileRunSpec.model_validate(example["spec"] | sizing["spec"] | {"sweep": sweep})
    llama = yaml.safe_load((REPO / "examples" / "llm" / "modeldeployment.yaml").read_text())
    configs = configurations(spec, ModelDeploymentSpec.model_validate(llama["spec"]))
    assert len(configs) == 18 and sweep_problem(spec, configs) is None
    # The quality check beside the sizing run: its original names a configuration of the sweep.
    (quality,) = yaml_blocks("how-to/choose-a-quantization.md")
    spec = ProfileRunSpec.model_validate(example["spec"] | quality["spec"])
    configs = configurations(spec, ModelDeploymentSpec.model_validate(llama["spec"]))
    assert len(configs) == 3 and original_problem(spec.quality, configs) is None
    (replay,) = yaml_blocks("how-to/replay-production-traffic.md")
    example = yaml.safe_load((REPO / "examples" / "llm" / "profilerun-trace.yaml").read_text())
    spec = ProfileRunSpec.model_validate(example["spec"] | replay["spec"])
    assert spec.load.trace is not None and spec.payload.prompts is not None
    (gpus,) = yaml_blocks("how-to/run-on-gpus.md")
    example = yaml.safe_load((REPO / "examples" / "modeldeployment-gpu.yaml").read_text())
    deployment = ModelDeploymentSpec.model_validate(example["spec"] | gpus["spec"])
    assert deployment.resources is not None and deployment.resources.gpu is not None
    assert deployment.resources.gpu.resource_name == "nvidia.com/mig-1g.5gb"
    (cleanup,) = yaml_blocks("how-to/clean-up.md")
    assert CleanupSpec.model_validate(cleanup["spec"]).keep_last == 10


def documented_kaliper_commands() -> list[tuple[str, list[str]]]:
    """Every `kaliper` command of the tutorials' and guides' bash blocks (continuation lines joined, comments
    dropped), as (page, arguments)."""
    found = []
    for page in sorted([*(REPO / "docs" / "tutorials").glob("*.md"), *(REPO / "docs" / "how-to").glob("*.md")]):
        for block in page.read_text().split("```bash\n")[1:]:
            for line in block.split("```", 1)[0].replace("\\\n", " ").splitlines():
                for command in line.split("&&"):
                    words = shlex.split(command, comments=True)
                    words = words[: next((i for i, w in enumerate(words) if w in (">", ">>", "|")), len(words))]
                    if words and words[0] in ("kaliper", ".venv/bin/kaliper"):
                        found.append((str(page.relative_to(REPO)), words[1:]))
    return found


def test_every_kaliper_command_the_guides_give_parses_and_the_manifests_they_run_are_valid() -> None:
    """Each command as written is one the command line accepts (its options parsed, then --help), and each
    manifest a `kaliper run` names from examples/ passes `kaliper validate`."""
    commands = documented_kaliper_commands()
    assert len(commands) >= 10
    for page, arguments in commands:
        parsed = CliRunner().invoke(main, [*arguments, "--help"])
        assert parsed.exit_code == 0, (page, arguments, parsed.output)
        if arguments[0] == "run":
            manifests = [a for a in arguments[1:] if a.startswith("examples/")]
            for manifest in manifests:
                checked = CliRunner().invoke(main, ["validate", str(REPO / manifest)])
                assert checked.exit_code == 0, (page, manifest, checked.output)


def test_the_compatibility_page_names_every_version_the_suite_pins() -> None:
    """A pin moved in hack/ without the page fails here: the page says what is tested."""
    page = (REPO / "docs" / "reference" / "compatibility.md").read_text()
    pins = dict(re.findall(r"^([A-Z_]+)=(\S+)$", (REPO / "hack" / "testcluster" / "versions.env").read_text(), re.M))
    assert len(pins) == 13 and pins["KUBERNETES_VERSION"] == "v1.35.4"
    for script, names in (
        ("hack/llama/build.sh", ["LLAMA_CPP_PYTHON_VERSION"]),
        ("hack/vllm/venv.sh", ["VLLM_VERSION", "TORCH_VERSION"]),
        ("hack/pytorch/venv.sh", ["TORCH_VERSION", "TRANSFORMERS_VERSION"]),
    ):
        text = (REPO / script).read_text()
        for name in names:
            pins[f"{script}:{name}"] = re.search(rf"^{name}=(?:\$\{{{name}:-)?([0-9][\w.]*)", text, re.M).group(1)
    pins.pop("ARGOCD_GITOPS_ENGINE")  # a commit of Argo CD's repository, the release's own
    missing = {name: version for name, version in pins.items() if version.removeprefix("v") not in page}
    assert missing == {}


def test_every_benchmark_says_when_it_was_measured_and_the_command_that_reproduces_it() -> None:
    assert figures_without_provenance((REPO / "docs" / "benchmarks.md").read_text(), REPO) == []


def test_a_figure_without_its_date_or_its_command_is_found(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "here.py").write_text("")
    page = textwrap.dedent(
        """\
        ## A chapter

        ### Dated, with its command

            .venv/bin/python bench/here.py

        Measured 2026-12-06: 1.00x.

        ### Dated, no command

        Measured 2026-12-06: 0.98x.

        ### A command, no date

        `make demo` read 0.97x.

        ### A script that is not there

        ```bash
        python bench/gone.py
        ```

        Measured 2026-12-06.
        """
    )
    assert figures_without_provenance(page, tmp_path) == [
        "Dated, no command: no command",
        "A command, no date: no date",
        "A script that is not there: bench/gone.py does not exist",
    ]
