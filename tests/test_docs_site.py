"""The documentation site (mkdocs.yml, Material for MkDocs) builds strictly from docs/, offline: every page of
the nav built, a link to a page or anchor that does not exist fails the build, no web font or CDN asked for;
and the README's links into docs/ resolve. The pages in a browser: tests/test_reports_in_browser.py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = (
    "index.html",
    "tutorials/one-machine.html",
    "tutorials/llm.html",
    "how-to/install.html",
    "how-to/gitops.html",
    "reference/resources.html",
    "reference/load-generator.html",
    "reference/cli.html",
    "development.html",
    "api-reference.html",
    "fault-model.html",
    "security.html",
    "architecture.html",
    "benchmarks.html",
)


def build_site(config: Path, out: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `config` into `out`, as `make docs` runs it."""
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)


def test_the_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    done = build_site(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert [page for page in PAGES if not (tmp_path / "site" / page).is_file()] == []
    index = (tmp_path / "site" / "index.html").read_text()
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index


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
