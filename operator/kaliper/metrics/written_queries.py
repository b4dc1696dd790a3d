"""The PromQL a ProfileRun writes (metrics.customQueries, payload.prompts.fromPrometheus.selector), checked
against what its namespace may read before the run starts, naming the field. Each query is confined again
when it runs (PrometheusMetrics.written_instant); this refuses a run whose queries never could be."""

from __future__ import annotations

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.metrics.prometheus import QueryWindow, fill_placeholders
from kaliper.metrics.promql_scope import QueryRefused, QueryScope
from kaliper.metrics.workload_query import FINISHED_REQUESTS, WorkloadError, normalise_selector


def written_queries_problem(spec: ProfileRunSpec, scope: QueryScope) -> str | None:
    """Why the PromQL the run writes reads past its namespace (or cannot be confined to it), or None."""
    # The placeholders as a trial fills them: the namespace, a regex of its pods, a window.
    window = QueryWindow(namespace=scope.namespace, pod_regex=".+", end=0, seconds=60)
    written = [
        (f"spec.metrics.customQueries[{i}].query", fill_placeholders(query.query, window))
        for i, query in enumerate(spec.metrics.custom_queries or [])
    ]
    fitted = spec.payload.prompts.from_prometheus if spec.payload.prompts is not None else None
    if fitted is not None:
        field = "spec.payload.prompts.fromPrometheus.selector"
        try:
            written.append((field, f"{FINISHED_REQUESTS}{{{normalise_selector(fitted.selector)}}}"))
        except WorkloadError as exc:
            return f"{field}: {exc}"
    for field, promql in written:
        try:
            scope.confine(promql)
        except QueryRefused as exc:
            return f"{field}: {exc}"
    return None
