"""The documentation site built as `make docs` builds it (mkdocs.yml), for the tests that check it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _nav_pages(entries: list) -> list[str]:
    pages: list[str] = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value.removesuffix(".md") + ".html"]
    return pages


PAGES = tuple(_nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]))
"""Every page of the site's navigation, as the built site names it (the build refuses a page left out of it)."""


def build_site(config: Path, out: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `config` into `out`, as `make docs` runs it."""
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(out)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block of a page, continuation lines joined and comments kept (bash drops
    them when it runs one)."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [[line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()] for block in blocks]
