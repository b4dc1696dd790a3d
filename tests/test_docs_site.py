"""The documentation site (mkdocs.yml, Material for MkDocs) builds strictly from docs/, offline: every page of
the nav built, a link to a page or anchor that does not exist fails the build, no web font or CDN asked for;
and the README's links into docs/ resolve. The pages in a browser: tests/test_reports_in_browser.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.support.docs_site import PAGES, REPO, build_site


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
