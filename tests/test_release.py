"""hack/release.sh (`make release`) checks that one version is written everywhere before it builds anything. The
whole release is built in the kind tier (tests/kind/test_release.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.paths import REPO

FILES = ("hack/release.sh", "pyproject.toml", "operator/kaliper/__init__.py", "charts/kaliper/Chart.yaml",
         "docs/changelog.md")  # fmt: skip


def release_in(copy: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "hack/release.sh"], cwd=copy, capture_output=True, text=True, timeout=60)


def copy_of_the_repository(tmp_path: Path) -> Path:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_versions_out_of_step_stop_the_release_before_anything_is_built(tmp_path: Path) -> None:
    copy = copy_of_the_repository(tmp_path)
    chart = copy / "charts/kaliper/Chart.yaml"
    chart.write_text(chart.read_text().replace('appVersion: "0.1.0"', 'appVersion: "0.0.9"'))
    changelog = copy / "docs/changelog.md"
    changelog.write_text(changelog.read_text().replace("## 0.1.0 (", "## 0.0.9 ("))
    done = release_in(copy)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        'release: charts/kaliper/Chart.yaml: appVersion is 0.0.9; set it to "0.1.0"',
        "release: docs/changelog.md: no section '## 0.1.0 (DATE)'; write what changed for its readers",
        "release: version 0.1.0 (pyproject.toml) is not the same everywhere; nothing was built",
    ]
    assert not (copy / "dist").exists()


def test_the_repository_as_it_is_passes_the_check(tmp_path: Path) -> None:
    """The same check on the files as committed: it gets past the versions to the build (which needs the venv's
    Python, absent from the copy, and stops there)."""
    done = release_in(copy_of_the_repository(tmp_path))
    assert "is not the same everywhere" not in done.stderr
    assert "] release 0.1.0 into " in done.stderr
