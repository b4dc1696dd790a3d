"""spec.baseline on Kubernetes: the earlier run's report, read from its `<run>-report` ConfigMap or from a
ConfigMap the user wrote; checked before the run sends anything (controllers.admission) and read again when it
concludes. `kaliper run` reads a file instead (local/baseline.py)."""

from __future__ import annotations

from pydantic import ValidationError

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.controllers import kube
from kaliper.controllers.run_records import REPORT_KEY
from kaliper.manifests.profilerun import report_name
from kaliper.report.schema import ProfileReport
from kaliper.report.store import read_document


def saved_report_text(namespace: str, run: str) -> str | None:
    """A finished run's whole report as JSON, from its `<run>-report` ConfigMap (plain or gzipped); None when
    the run has none (not finished, or no such run). Raises what the API client raises."""
    configmap = kube.get("ConfigMap", namespace, report_name(run))
    return read_document(configmap, REPORT_KEY) if configmap is not None else None


def baseline_text(spec: ProfileRunSpec, namespace: str) -> tuple[str, str | None]:
    """(which field, the baseline report's JSON or None when it is not there)."""
    source = spec.baseline
    assert source is not None
    if source.run is not None:
        return "spec.baseline.run", saved_report_text(namespace, source.run)
    assert source.config_map is not None
    configmap = kube.get("ConfigMap", namespace, source.config_map.name)
    return "spec.baseline.configMap", read_document(configmap, source.config_map.key) if configmap else None


def baseline_report(spec: ProfileRunSpec, namespace: str) -> ProfileReport | None:
    """spec.baseline's report at the end of the run (None without one, or if it went away since the start)."""
    if spec.baseline is None or spec.baseline.report is not None:
        return None
    _, text = baseline_text(spec, namespace)
    try:
        return ProfileReport.model_validate_json(text) if text is not None else None
    except ValidationError:
        return None
