"""The workload a vLLM fleet served, read from the Prometheus that scrapes it: the token histograms, finished
requests and prefix-cache counters over a window, fitted by measure/workload_fit.py.

Every figure comes from the raw samples stored inside the window (a range selector), each series' increase from
its first to its last sample with resets counted from zero, summed over the series the selector matches (the
replicas, and vLLM's finished_reason labels). `increase()` is not used: it extrapolates to the window's edges,
and a histogram's buckets extrapolated each on its own no longer add up.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import httpx

from kaliper.api.profilerun import FittedWorkload, ProfileRunSpec
from kaliper.api.units import parse_duration
from kaliper.log import redacted_url
from kaliper.measure.workload_fit import FitError, LengthFit, WorkloadFit, fit_burstiness, fit_lognormal
from kaliper.metrics.prometheus import PrometheusMetrics
from kaliper.metrics.prometheus_api import PrometheusError
from kaliper.metrics.promql_scope import QueryRefused, QueryScope
from kaliper.profiling.workload import fitted_workload
from kaliper.runtimes.server_load import rise
from kaliper.runtimes.vllm import WORKLOAD_SERIES

# vLLM's names (kaliper.runtimes.vllm).
PROMPT_TOKENS = WORKLOAD_SERIES.prompt_tokens
GENERATION_TOKENS = WORKLOAD_SERIES.generation_tokens
FINISHED_REQUESTS = WORKLOAD_SERIES.finished_requests
PREFIX_QUERIES, PREFIX_HITS = WORKLOAD_SERIES.prefix_cache

# The labels a Prometheus adds to every series of a scrape target: the replicas are told apart by them.
REPLICA_LABELS = ("pod", "instance")


class WorkloadError(Exception):
    """The metrics cannot give a workload: nothing matches, or too little was served in the window."""


def normalise_selector(selector: str) -> str:
    """The label matchers inside the braces: `{a="b"}` and `a="b"` alike; empty matches every series."""
    inner = selector.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1].strip()
    if "{" in _outside_quotes(inner) or "}" in _outside_quotes(inner):
        raise WorkloadError(f"selector {selector!r}: give label matchers such as 'model_name=\"my-model\"'")
    return inner


def _outside_quotes(matchers: str) -> str:
    """The matchers without their quoted values: a regex's quantifier (pod=~"iris-.{5}") is a value's, not a
    brace of the query's."""
    kept, quote, escaped = [], "", False
    for char in matchers:
        if escaped:
            escaped = False
        elif quote:
            escaped = char == "\\"
            quote = "" if char == quote else quote
        elif char in "\"'`":
            quote = char
        else:
            kept.append(char)
    return "".join(kept)


def read_workload(client: PrometheusMetrics, selector: str, window_s: float, end: float) -> WorkloadFit:
    """Fit the workload served in the `window_s` seconds before unix time `end` by the series `selector`
    matches (label matchers, as in `vllm:request_success_total{<selector>}`)."""
    matchers = normalise_selector(selector)
    reader = WindowReader(client, matchers, window_s, end)
    notes: list[str] = []
    finished = reader.samples(FINISHED_REQUESTS)
    if not finished:
        raise WorkloadError(
            f"no {FINISHED_REQUESTS} series match {{{matchers}}} in the {window_s:g}s before the end at "
            f"{client.client.shown}: check the selector (kaliper workload --selector) and that Prometheus scrapes "
            "the servers' /metrics"
        )
    requests = sum(series_increase(points) for points in finished.values())
    span = max(points[-1][0] for points in finished.values()) - min(points[0][0] for points in finished.values())
    if requests <= 0 or span <= 0:
        raise WorkloadError(f"the servers matching {{{matchers}}} finished no request in the {window_s:g}s window")
    replicas = len({replica_of(labels) for labels in finished})

    input_tokens = reader.length_fit(PROMPT_TOKENS)
    output_tokens = reader.length_fit(GENERATION_TOKENS)
    try:
        burstiness = fit_burstiness(*_counts_per_interval(finished))
    except FitError as exc:
        burstiness = None
        notes.append(f"burstiness not fitted: {exc}")
    prefix_hit_share = None
    queries, hits = reader.samples(PREFIX_QUERIES), reader.samples(PREFIX_HITS)
    queried = sum(series_increase(points) for points in queries.values())
    if queried > 0:
        prefix_hit_share = sum(series_increase(points) for points in hits.values()) / queried
    else:
        notes.append(f"{PREFIX_QUERIES} absent or still: prefix caching off, or a vLLM before 0.7")
    return WorkloadFit(
        window_s=window_s,
        selector=matchers,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        requests=requests,
        rate=requests / span,
        replicas=replicas,
        burstiness=burstiness,
        prefix_hit_share=prefix_hit_share,
        notes=notes,
    )


def fit_for_run(spec: ProfileRunSpec, end: float, scope: QueryScope | None = None) -> FittedWorkload:
    """payload.prompts.fromPrometheus read and fitted for a run being planned (at unix time `end`); `scope`:
    the namespace the operator's run reads."""
    prompts = spec.payload.prompts
    assert prompts is not None and prompts.from_prometheus is not None
    source = prompts.from_prometheus
    url = str(source.url or (spec.metrics.prometheus.url if spec.metrics.prometheus else ""))
    timeout = parse_duration(spec.metrics.prometheus.timeout) if spec.metrics.prometheus else 10.0
    window_s = parse_duration(source.window)
    where = f"{redacted_url(url)} {{{normalise_selector(source.selector)}}} over the {source.window} to"
    try:
        fit = read_workload(PrometheusMetrics(url, timeout, scope), source.selector, window_s, end)
    except (WorkloadError, PrometheusError, QueryRefused, httpx.TransportError) as exc:  # messages show no password
        raise WorkloadError(f"payload.prompts.fromPrometheus: {exc}") from exc
    at = datetime.fromtimestamp(end, UTC)
    return fitted_workload(fit, spec, f"{where} {at.isoformat(timespec='seconds')}", at)


Labels = tuple[tuple[str, str], ...]
Points = list[tuple[float, float]]


class WindowReader:
    """The raw samples of the series some label matchers select, inside the window of `window_s` seconds before
    unix time `end`."""

    def __init__(self, client: PrometheusMetrics, matchers: str, window_s: float, end: float) -> None:
        self.client, self.matchers, self.window_s, self.end = client, matchers, window_s, end

    def samples(self, metric: str) -> dict[Labels, Points]:
        """Each matching series' raw samples inside the window, oldest first."""
        query = f"{metric}{{{self.matchers}}}[{round(self.window_s * 1000)}ms]"  # PromQL durations are whole numbers
        result: list[dict[str, Any]] = self.client.written_instant(query, self.end)
        return {
            tuple(sorted(series["metric"].items())): [(float(t), float(v)) for t, v in series["values"]]
            for series in result
        }

    def bucket_increases(self, histogram: str) -> dict[float, float]:
        """Each bucket's increase over the window (by its upper edge, +Inf included), every series summed."""
        buckets: dict[float, float] = defaultdict(float)
        for labels, points in self.samples(f"{histogram}_bucket").items():
            le = dict(labels).get("le", "")
            buckets[float(le)] += series_increase(points)  # float() reads "+Inf" and "1.0" alike
        return buckets

    def length_fit(self, histogram: str) -> LengthFit:
        buckets = self.bucket_increases(histogram)
        total = sum(series_increase(points) for points in self.samples(f"{histogram}_count").values())
        value_sum = sum(series_increase(points) for points in self.samples(f"{histogram}_sum").values())
        if not buckets:
            raise WorkloadError(f"no {histogram}_bucket series match {{{self.matchers}}}: is the server a vLLM?")
        edges = sorted(le for le in buckets if le != float("inf"))
        try:
            return fit_lognormal(edges, [buckets[e] for e in edges] + [buckets[float("inf")]], total, value_sum)
        except FitError as exc:
            raise WorkloadError(f"{histogram}: {exc}") from exc


def series_increase(points: Points) -> float:
    """From the first sample in the window: what a series counted before it is left out, even where the series
    began inside the window, since its first value may as well be days of traffic from before Prometheus's data."""
    return rise(points)


def replica_of(labels: Labels) -> str:
    """Which replica a series came from: its pod, else its scrape target."""
    found = dict(labels)
    return next((found[name] for name in REPLICA_LABELS if name in found), "")


def _counts_per_interval(series: dict[Labels, Points]) -> tuple[list[float], float]:
    """Requests finished in each scrape interval of the window, all series together: each series' increase
    between two samples falls in the interval of the later sample's time (intervals as long as the median gap
    between a series' samples, the scrape interval)."""
    gaps = sorted(b - a for points in series.values() for (a, _), (b, _) in pairwise(points))
    if not gaps:
        return [], 0.0
    interval = gaps[len(gaps) // 2]
    start = min(points[0][0] for points in series.values())
    counts: dict[int, float] = defaultdict(float)
    last = 0
    for points in series.values():
        for (_, a), (t, b) in pairwise(points):
            index = int((t - start - interval / 2) // interval)
            counts[index] += b - a if b >= a else b
            last = max(last, index)
    return [counts[i] for i in range(last + 1)], round(interval, 3)
