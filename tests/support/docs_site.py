"""The documentation site built as `make docs` builds it (mkdocs.yml), for the tests that check it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
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


class _RenderingFaults(HTMLParser):
    """Walks a built page for what a strict build lets through: a fenced block that came out as inline code (a
    `<code>` outside `<pre>` holding several lines) and a list that collapsed into a paragraph (a `<p>` whose text
    has a line starting with a list marker)."""

    LIST_LINE = re.compile(r"\n[ \t]*(?:[-*] |\d+\. )\S")

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.inline_code: str | None = None
        self.paragraph: str | None = None
        self.faults: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.open.append(tag)
        if tag == "code" and "pre" not in self.open:
            self.inline_code = ""
        elif tag == "p":
            self.paragraph = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "code" and self.inline_code is not None:
            if self.inline_code.count("\n") >= 2:  # wrapped inline code spans two lines at most
                self.faults.append(f"a fenced block rendered as inline code: {self.inline_code[:60]!r}")
            self.inline_code = None
        elif tag == "p" and self.paragraph is not None:
            if self.LIST_LINE.search(self.paragraph):
                self.faults.append(f"a list collapsed into a paragraph: {self.paragraph[:60]!r}")
            self.paragraph = None
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if self.inline_code is not None:
            self.inline_code += data
        if self.paragraph is not None:
            self.paragraph += data


def rendering_faults(html: str) -> list[str]:
    """What a built page renders wrong that the strict build does not catch (see _RenderingFaults)."""
    walker = _RenderingFaults()
    walker.feed(html)
    return walker.faults


METRICS_PAGE = REPO / "docs" / "reference" / "metrics.md"


def documented_metrics(section: str) -> dict[str, str]:
    """The metrics (name -> type) of a section of the page."""
    text = METRICS_PAGE.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (\w+) \|", text, re.M))


def exported_metrics(exposition: str, prefix: str) -> dict[str, str]:
    """The metrics (name -> type) an exposition declares, whether or not they have samples yet, but the _created
    gauges prometheus_client adds beside each counter and histogram (the page says so once): each of those is
    checked to stand beside a metric declared."""
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M))
    created = {name.removesuffix("_created") for name in declared if name.endswith("_created")}
    assert all(f"{name}_total" in declared or name in declared for name in created), created
    assert "counters and histograms also a `_created` gauge" in METRICS_PAGE.read_text()
    return {name: kind for name, kind in declared.items() if name.startswith(prefix) and not name.endswith("_created")}


# A command that reproduces a figure: a benchmark script, a make target or a kaliper command, written in code
# (a fenced or indented block, or inline).
_COMMAND = re.compile(
    r"(?:^|\s|`)((?:\.venv/bin/)?python3? (bench/\S+\.py)|(?:\.venv/bin/)?kaliper \w|make [a-z-]+)", re.M
)
_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def figures_without_provenance(page: str, repo: Path) -> list[str]:
    """The sections (`### ` headings) of a benchmarks page that do not say when they were measured (a date) or
    the command that reproduces them, or that name a benchmark script the repository does not have."""
    faults = []
    for section in re.split(r"^### ", page, flags=re.M)[1:]:
        title = section.splitlines()[0]
        code = "\n".join(
            re.findall(r"```[a-z]*\n(.*?)```", section, re.S)
            + re.findall(r"^    (\S.*)$", section, re.M)
            + re.findall(r"`([^`\n]+)`", section)
        )
        commands = _COMMAND.findall(code)
        if not _DATE.search(section):
            faults.append(f"{title}: no date")
        if not commands:
            faults.append(f"{title}: no command")
        faults += [
            f"{title}: {script} does not exist" for _, script in commands if script and not (repo / script).is_file()
        ]
    return faults
