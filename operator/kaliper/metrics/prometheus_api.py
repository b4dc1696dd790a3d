"""Prometheus's HTTP query API (https://prometheus.io/docs/prometheus/latest/querying/api/) over httpx: an
instant query and a range query, each bounded in time and tried again only where that can help."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import httpx

from kaliper.log import redacted_url

# Tried again: a connection refused or reset (httpx's transport, before any byte was sent) and the statuses a
# proxy or a restarting server answers with. A query Prometheus rejects (400, 422) is final.
CONNECT_RETRIES = 2
STATUS_RETRIES = 2
RETRY_STATUSES = (502, 503, 504)
BACKOFF_S = 0.5


class PrometheusError(Exception):
    """Prometheus answered, but not with a result: its error type and message, or the HTTP status."""


class PrometheusAPI:
    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url.rstrip("/")
        self.shown = redacted_url(self.url)  # what messages say: a password in the URL never reaches a status
        self.timeout_s = timeout_s
        # The timeout bounds each request (connect, read): a Prometheus that accepts connections and never
        # answers must not hold a thread forever.
        self.client = httpx.Client(
            base_url=self.url, timeout=timeout_s, transport=httpx.HTTPTransport(retries=CONNECT_RETRIES)
        )

    def query(self, promql: str, at: float, timeout_s: float) -> list[dict[str, Any]]:
        """An instant query at unix time `at`: its result (vector, or matrix for a range selector)."""
        return self._get("/api/v1/query", {"query": promql, "time": at, "timeout": f"{timeout_s:g}s"})

    def query_range(self, promql: str, start: datetime, end: datetime, step: str) -> list[dict[str, Any]]:
        params = {"query": promql, "start": start.timestamp(), "end": end.timestamp(), "step": step}
        return self._get("/api/v1/query_range", params)

    def _get(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        for attempt in range(STATUS_RETRIES + 1):
            try:
                response = self.client.get(path, params=params)
            except httpx.TimeoutException as exc:
                # httpx says only "timed out": say which wait it was and how long it was allowed.
                wait = {httpx.ConnectTimeout: "connect", httpx.ReadTimeout: "read", httpx.WriteTimeout: "write"}
                kind = wait.get(type(exc), "pool")
                raise PrometheusError(f"{kind} timed out after {self.timeout_s:g}s ({self.shown}{path})") from exc
            if response.status_code not in RETRY_STATUSES or attempt == STATUS_RETRIES:
                break
            time.sleep(BACKOFF_S * 2**attempt)
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or body.get("status") != "success":
            detail = f"{body['errorType']}: {body.get('error', '')}" if "errorType" in body else response.reason_phrase
            raise PrometheusError(f"HTTP {response.status_code} from {self.shown}{path}: {detail}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result
