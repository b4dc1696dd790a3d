"""A ProfileRun whose prompts (and arrivals) are fitted from Prometheus: fitted once, when the run is planned,
and kept in its status, so that every trial, and an operator restarted halfway, sends the same workload."""

from __future__ import annotations

import time

from kaliper.api.profilerun import FittedWorkload, ProfileRunSpec, ProfileRunStatus
from kaliper.controllers.admission import query_scope
from kaliper.controllers.run_records import RunFailed
from kaliper.controllers.settings import SETTINGS
from kaliper.metrics.workload_query import WorkloadError, fit_for_run


def run_fit(spec: ProfileRunSpec, status: ProfileRunStatus, namespace: str) -> FittedWorkload | None:
    """The fit that replaces payload.prompts.fromPrometheus and load.fitted in every trial (profiling.run_plan),
    kept in status.workload, made now if the run has none yet. Its window ends at this instant, not at the step's
    time, which is whole seconds (as status timestamps are): samples of the last second would be left out (seen: a
    run planned 0.8 s after the scrape that held all its traffic fitted nothing). The selector reads only the
    series of the run's namespace and those the admin allowed (kaliper.metrics.promql_scope)."""
    prompts = spec.payload.prompts
    if prompts is None or prompts.from_prometheus is None:
        return None
    if status.workload is None:
        try:
            status.workload = fit_for_run(spec, time.time(), query_scope(namespace, SETTINGS.tenancy))
        except WorkloadError as exc:
            raise RunFailed(str(exc)) from exc
    return status.workload
