"""The operator: `kopf run -m kaliper.controllers.main` (what the chart's Deployment runs)."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterator
from typing import Any

import kopf

# Importing a controller registers its handlers.
from kaliper.controllers import (  # noqa: F401
    cleanup,
    expiry,
    kube,
    metrics,
    modeldeployment,
    modeloptimization,
    profilerun,
    run_network,
)
from kaliper.controllers.api_health import API_SERVER, WatchFailures
from kaliper.controllers.pacer import HANDLER_WORKERS, PACER
from kaliper.controllers.settings import SETTINGS
from kaliper.controllers.store import STORE
from kaliper.log import configure_logging


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # JSON lines in a pod (the chart sets the level), readable lines on a terminal.
    configure_logging(os.environ.get("KALIPER_LOG_LEVEL", "info"))
    # Every handler of Kaliper's is a watch-event handler, which writes no bookkeeping on the objects (no
    # finalizer, no annotations); should kopf ever write any, it is under Kaliper's names.
    settings.persistence.finalizer = "kaliper.dev/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kaliper.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="kaliper.dev", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 60
    # kopf's own requests (its watches, the events it posts) retry failures with backoff; during an API server
    # outage the default's 1-21 s steps kept every watch retrying every few seconds. Doubling to 60 s and
    # never giving up: a watch is back within a minute of the API server.
    settings.networking.error_backoffs = WatchBackoffs()
    # Without a connect timeout, a watch reconnecting to a frozen API server (connections accepted, never
    # answered) waited forever and the operator saw no event again; a request is bounded as kube's calls are.
    settings.networking.connect_timeout = settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 60
    settings.watching.client_timeout = settings.watching.server_timeout + 30
    # Handlers only store what an event shows and hurry the pacer, whose pool does the work.
    settings.execution.max_workers = HANDLER_WORKERS
    watching = logging.getLogger("kopf._cogs.clients.watching")  # the logger kopf's watches fail on
    if not any(isinstance(f, WatchFailures) for f in watching.filters):
        watching.addFilter(WatchFailures(API_SERVER))
    if port := os.environ.get("KALIPER_METRICS_PORT"):
        metrics.serve(int(port))
    SETTINGS.load()  # the environment as it is now, not as it was when the modules were imported
    kube.RATE.rate, kube.RATE.burst = SETTINGS.api_qps, SETTINGS.api_burst
    PACER.retry_cap_s = SETTINGS.retry_cap_s
    PACER.set_interval(profilerun.STEPPER.work, SETTINGS.step_interval_s)
    for work in expiry.WORKS:
        PACER.set_interval(work, SETTINGS.expiry_interval_s)
    forget_everything()  # an operator started again in the same process (tests) starts with nothing in memory
    PACER.start()


class WatchBackoffs:
    """1, 2, 4 ... 60, 60, ... seconds: iterable again for every request (kopf iterates it per request)."""

    def __iter__(self) -> Iterator[float]:
        return itertools.chain((1.0, 2.0, 4.0, 8.0, 16.0, 32.0), itertools.repeat(60.0))


@kopf.on.cleanup()
def stop_pacer(**_: Any) -> None:
    PACER.stop()
    API_SERVER.stop()
    forget_everything()


def forget_everything() -> None:
    STORE.clear()
    run_network.forget_addresses()
    modeldeployment.forget_all()
    profilerun.forget_all()
    modeloptimization.forget_all()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod, the service account; elsewhere the kubeconfig that $KUBECONFIG names (read now, not at
    import time as the kubernetes client library does)."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)
