"""What a ProfileRun keeps between steps. In its ConfigMaps, which outlive the operator: the target as the run
planned with it and the final report (`<run>-report`), and each trial's results document and report
(`<trial>-result`). In memory, per run uid until the run ends, what saves reading those again on every
step: the snapshot, the measured trials' reports and the results documents of trials in Collecting."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import TrialSummary
from kaliper.api.units import parse_duration
from kaliper.controllers import kube
from kaliper.lifecycle.gc import FINISHED
from kaliper.manifests.profilerun import build_report_configmap, report_name, trial_objects
from kaliper.profiling.trials import median_stage
from kaliper.report.publish import RESULT_KEY
from kaliper.report.schema import LoadTestResult, ProfileReport, TrialReport
from kaliper.report.store import DocumentTooLarge, configmap_content, read_document

TRIAL_KEY, TARGET_KEY, REPORT_KEY = "trial.json", "target.json", "report.json"  # beside the Job's RESULT_KEY


class RunFailed(Exception):
    """The run cannot go on; the message tells the user why and what to do."""


@dataclass
class RunMemory:
    target_known: bool = False
    target: ModelDeploymentSpec | None = None
    workload: dict[str, Any] | None = None  # a workloadRef target's snapshot (kaliper.manifests.workload)
    trial_reports: dict[int, TrialReport] = field(default_factory=dict)
    result_texts: dict[int, str] = field(default_factory=dict)


_MEMORY: dict[str, RunMemory] = {}  # by run uid: a run deleted and created again under its name starts afresh


def release(uid: str) -> None:
    """Forget a run that ended or is gone."""
    _MEMORY.pop(uid, None)


def release_all() -> None:
    _MEMORY.clear()


def _target_text(base: ModelDeploymentSpec | None, workload: dict[str, Any] | None) -> str:
    # One document, so one apply owns it: a ModelDeployment's spec, {"workload": snapshot}, or null (a URL).
    if workload is not None:
        return json.dumps({"workload": workload}, separators=(",", ":"))
    return base.model_dump_json(by_alias=True, exclude_none=True) if base else "null"


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


class RunRecords:
    """One run's records, read and written through its memory."""

    def __init__(self, run: dict[str, Any]) -> None:
        self.run = run
        self.namespace, self.name = run["metadata"]["namespace"], run["metadata"]["name"]
        self.uid: str = run["metadata"]["uid"]
        self.memory = _MEMORY.setdefault(self.uid, RunMemory())

    # -- the target snapshot

    def save_target(self, base: ModelDeploymentSpec | None, workload: dict[str, Any] | None = None) -> None:
        """The target as it is now is what every trial starts from, even if someone edits it mid-run: a
        ModelDeployment's spec, or a workload's snapshot."""
        text = _target_text(base, workload)
        kube.apply(build_report_configmap(self.run, configmap_content(TARGET_KEY, text)))
        self.memory.target_known, self.memory.target, self.memory.workload = True, base, workload

    def _load_target(self) -> None:
        if self.memory.target_known:
            return
        text = read_document(kube.get("ConfigMap", self.namespace, report_name(self.name)) or {}, TARGET_KEY)
        if text is None:
            raise RunFailed(f"ConfigMap {report_name(self.name)}, where the run keeps its target, is missing")
        document = json.loads(text)
        if isinstance(document, dict) and "workload" in document:
            self.memory.workload = document["workload"]
        elif document is not None:
            self.memory.target = ModelDeploymentSpec.model_validate(document)
        self.memory.target_known = True

    def target(self) -> ModelDeploymentSpec | None:
        """The target ModelDeployment's spec as the run planned with it (None: not a ModelDeployment)."""
        self._load_target()
        return self.memory.target

    def workload(self) -> dict[str, Any] | None:
        """The target workload's snapshot as the run planned with it (None: not a workload)."""
        self._load_target()
        return self.memory.workload

    # -- each trial's results

    def _results_name(self, index: int) -> str:
        return trial_objects(self.name, index).results

    def results(self, index: int) -> dict[str, Any] | None:
        """The trial's results ConfigMap, if this run owns it. A run deleted and created again under the same
        name can find the old run's still there (the garbage collector removes it in the background)."""
        stored = kube.get("ConfigMap", self.namespace, self._results_name(index))
        if stored is None or not _owned_by(stored, self.uid):
            return None
        return stored

    def remove_stale_results(self, index: int) -> None:
        """A results ConfigMap of an earlier run of this name would keep the load generator from publishing."""
        stale = kube.get("ConfigMap", self.namespace, self._results_name(index))
        if stale is not None and not _owned_by(stale, self.uid):
            kube.delete("ConfigMap", self.namespace, self._results_name(index))

    def result_text(self, index: int) -> str | None:
        """The load generator's results document, read once (a trial waits in Collecting for the final
        scrape over several steps)."""
        if index not in self.memory.result_texts:
            text = read_document(self.results(index) or {}, RESULT_KEY)
            if text is None:
                return None
            self.memory.result_texts[index] = text
        return self.memory.result_texts[index]

    def save_trial_report(self, report: TrialReport) -> None:
        self.memory.trial_reports[report.index] = report
        self.memory.result_texts.pop(report.index, None)
        document = report.model_dump_json(by_alias=True, exclude={"stage"}, exclude_none=True)
        kube.merge_patch("ConfigMap", self.namespace, self._results_name(report.index), {"data": {TRIAL_KEY: document}})

    def measured(self, trial: TrialSummary) -> TrialReport | None:
        """A finished trial's report as collected: from memory, else from its results ConfigMap (an operator
        restarted mid-run); None when it measured nothing (skipped, or failed before it measured)."""
        found = self.memory.trial_reports.get(trial.index)
        if found is not None or trial.phase not in FINISHED:
            return found
        stored = self.results(trial.index) or {}
        text = read_document(stored, TRIAL_KEY)
        if text is None:
            return None
        report = TrialReport.model_validate_json(text)
        result = read_document(stored, RESULT_KEY)
        if result is not None and report.stage is None:
            stages = LoadTestResult.model_validate_json(result).stages
            report.stage = median_stage(stages) if stages else None
        self.memory.trial_reports[trial.index] = report  # the plan asks again when the run concludes
        return report

    # -- the report

    def save_report(self, report: ProfileReport) -> None:
        text = report.model_dump_json(by_alias=True, exclude_none=True, indent=2)
        try:
            content = configmap_content(REPORT_KEY, text)
        except DocumentTooLarge:
            # Drop the time series (the per-trial documents keep them) so the report fits.
            report.drop_time_series()
            report.warnings.append("time series left out to fit the 1 MiB ConfigMap limit; see the *-result ConfigMaps")
            content = configmap_content(REPORT_KEY, report.model_dump_json(by_alias=True, exclude_none=True))
        # Keep the snapshot beside the report (an apply replaces the whole data map).
        content.setdefault("data", {})[TARGET_KEY] = _target_text(self.target(), self.workload())
        keep_for = (self.run["spec"].get("report") or {}).get("keepFor")
        finished = report.finished_at or datetime.now(UTC)
        keep_until = finished + timedelta(seconds=parse_duration(keep_for)) if keep_for else None
        kube.apply(build_report_configmap(self.run, content, keep_until))
