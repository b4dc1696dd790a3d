"""The documentation site built as `make docs` builds it (mkdocs.yml), for the tests that check it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = (
    "index.html",
    "tutorials/one-machine.html",
    "tutorials/llm.html",
    "how-to/install.html",
    "how-to/size-an-llm-deployment.html",
    "how-to/replay-production-traffic.html",
    "how-to/gate-a-release.html",
    "how-to/gitops.html",
    "how-to/profile-a-running-deployment.html",
    "how-to/clean-up.html",
    "how-to/run-on-gpus.html",
    "reference/resources.html",
    "reference/load-generator.html",
    "reference/cli.html",
    "reference/reports.html",
    "reference/helm-values.html",
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
