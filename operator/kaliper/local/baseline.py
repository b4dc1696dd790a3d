"""spec.baseline under `kaliper run`: the earlier run's report, read from a file before anything is measured
(a run named like its baseline would otherwise overwrite it)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.local.sources import NotOnThisMachine, local_path
from kaliper.report.schema import ProfileReport


def local_baseline(spec: ProfileRunSpec, base_dir: Path) -> ProfileReport | None:
    """The report spec.baseline names: baseline.report (relative to the manifest's folder), or baseline.run's
    under ./kaliper-reports/. ValueError naming the field when it cannot be read."""
    source = spec.baseline
    if source is None:
        return None
    if source.config_map is not None:
        raise NotOnThisMachine(
            "spec.baseline.configMap: a ConfigMap is read on Kubernetes; under `kaliper run` name a report file "
            "(baseline.report: path/to/report.json) or an earlier local run (baseline.run)"
        )
    if source.report is not None:
        field, path = "spec.baseline.report", local_path(source.report, base_dir)
    else:
        field, path = "spec.baseline.run", Path("kaliper-reports") / str(source.run) / "report.json"
    if not path.is_file():
        raise ValueError(f"{field}: no report at {path}; run the baseline first, or point at its report.json")
    try:
        return ProfileReport.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise ValueError(f"{field}: {path} is not a Kaliper profile report: {exc.errors()[0]['msg']}") from exc
