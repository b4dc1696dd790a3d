"""The operator's own Prometheus metrics, served on KALIPER_METRICS_PORT (the chart's metrics.port): its work
for every kind (reconcile steps, their errors and time, what finished and how) and the objects it sees by
kind and phase, read from its watch streams when scraped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import REGISTRY, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kaliper.controllers.store import STORE

KINDS = ("ProfileRun", "ModelOptimization", "ModelDeployment", "Cleanup")

RECONCILES = Counter("kaliper_reconciles_total", "Reconcile steps taken, by kind.", ["kind"])
RECONCILE_ERRORS = Counter(
    "kaliper_reconcile_errors_total",
    "Reconcile steps that raised (the next event or timer retries), by kind.",
    ["kind"],
)
RECONCILE_SECONDS = Histogram(
    "kaliper_reconcile_seconds",
    "Time one reconcile step takes, API calls and Prometheus queries included, by kind.",
    ["kind"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
FINISHED = Counter(
    "kaliper_finished_total",
    "ProfileRuns and ModelOptimizations finished, and Cleanup passes done, by kind and phase.",
    ["kind", "phase"],
)
TRIALS = Counter("kaliper_trials_total", "ProfileRun trials finished, by outcome.", ["outcome"])


@contextmanager
def reconciling(kind: str) -> Iterator[None]:
    """Count and time one reconcile step of `kind`, and its error if it raises."""
    RECONCILES.labels(kind).inc()
    started = time.perf_counter()
    try:
        yield
    except Exception:
        RECONCILE_ERRORS.labels(kind).inc()
        raise
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - started)


class ObjectsByPhase(Collector):
    """kaliper_objects{kind,phase}: what the watch streams show now (phase "" before the first status)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "kaliper_objects", "Kaliper objects the operator sees, by kind and phase.", labels=["kind", "phase"]
        )
        for kind in KINDS:
            for phase, count in sorted(STORE.phases(kind).items()):
                family.add_metric([kind, phase], count)
        yield family


class Predictions(Collector):
    """Each ModelDeployment's latest check of its profile's prediction (spec.prediction), read from its status as
    the watch streams show it: what to alert on."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        reasons = GaugeMetricFamily(
            "kaliper_prediction",
            "1 for the reason of a ModelDeployment's latest prediction check (Holds, SlowerThanProfiled, ...).",
            labels=["namespace", "name", "reason"],
        )
        errors = GaugeMetricFamily(
            "kaliper_prediction_error",
            "A figure of production against the profile's at that load: (observed - predicted) / predicted.",
            labels=["namespace", "name", "figure"],
        )
        for body in STORE.every("ModelDeployment"):
            production = (body.get("status") or {}).get("production")
            if not production:
                continue
            where = [body["metadata"]["namespace"], body["metadata"]["name"]]
            reasons.add_metric([*where, production.get("reason", "")], 1)
            for figure in production.get("figures") or []:
                errors.add_metric([*where, figure["figure"]], figure["error"])
        yield reasons
        yield errors


REGISTRY.register(ObjectsByPhase())
REGISTRY.register(Predictions())


def exported() -> tuple[object, ...]:
    """What the operator exports, in the order docs/reference/metrics.md lists it (`kaliper crds generate`)."""
    families = (*ObjectsByPhase().collect(), *Predictions().collect())
    return (RECONCILES, RECONCILE_ERRORS, RECONCILE_SECONDS, FINISHED, TRIALS, *families)


def serve(port: int) -> None:
    start_http_server(port)
