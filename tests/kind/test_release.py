"""`make release`'s script on this machine: the wheel, the sdist, the chart package and the image, one version on
each. In the kind tier because the image is the walkthrough's (the same tag, its layers reused), built by then."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import yaml

from tests.support.kind_cluster import IMAGE, KindCluster
from tests.support.paths import REPO


def test_a_release_builds_every_artifact_with_one_version(cluster: KindCluster, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    environment = {**os.environ, "PYTHON": str(REPO / ".venv" / "bin" / "python")}
    done = subprocess.run(
        ["bash", "hack/release.sh", str(dist)], cwd=REPO, capture_output=True, text=True, timeout=1800, env=environment
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in dist.iterdir()) == [
        "kaliper-0.1.0-py3-none-any.whl",
        "kaliper-0.1.0.tar.gz",
        "kaliper-0.1.0.tgz",
        "kaliper-image-0.1.0.tar",
    ]
    assert done.stdout.startswith("release 0.1.0:\n") and f"  image {IMAGE}\n" in done.stdout
    with zipfile.ZipFile(dist / "kaliper-0.1.0-py3-none-any.whl") as wheel:
        metadata = wheel.read("kaliper-0.1.0.dist-info/METADATA").decode()
        assert "\nVersion: 0.1.0\n" in metadata
        assert "kaliper/api/reasons.py" in wheel.namelist()
    with tarfile.open(dist / "kaliper-0.1.0.tar.gz") as sdist:
        assert "kaliper-0.1.0/pyproject.toml" in sdist.getnames()
    with tarfile.open(dist / "kaliper-0.1.0.tgz") as chart:
        chart_yaml = yaml.safe_load(chart.extractfile("kaliper/Chart.yaml").read())  # type: ignore[union-attr]
        assert (chart_yaml["version"], chart_yaml["appVersion"]) == ("0.1.0", "0.1.0")
        assert "kaliper/templates/crds.yaml" in chart.getnames()
    with tarfile.open(dist / "kaliper-image-0.1.0.tar") as image:
        manifest = json.load(image.extractfile("manifest.json"))  # type: ignore[arg-type]
        assert manifest[0]["RepoTags"] == ["ghcr.io/kaliper-dev/kaliper:0.1.0"]
