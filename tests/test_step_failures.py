"""Which failed steps are told as events, and in whose words (pure)."""

from __future__ import annotations

import json

from kubernetes.client import ApiException

from kaliper.controllers.step_failures import StepFailures, describe


def test_the_first_failure_a_new_reason_and_every_tenth_are_told() -> None:
    failures = StepFailures()
    key = ("ml", "run")
    told = [failures.failed(key, "quota") for _ in range(12)]
    assert told == [1, None, None, None, None, None, None, None, None, 10, None, None]
    assert failures.failed(key, "forbidden") == 13  # the reason changed
    assert failures.failed(("ml", "other"), "quota") == 1  # each object has its own streak
    assert failures.succeeded(key) == 13
    assert failures.succeeded(key) == 0  # the streak ended with the success
    assert failures.failed(key, "forbidden") == 1


def test_api_errors_are_described_in_the_api_servers_words() -> None:
    refused = ApiException(status=403, reason="Forbidden")
    refused.body = json.dumps(
        {
            "kind": "Status",
            "message": 'configmaps "r-target" is forbidden: exceeded quota: none, requested: configmaps=1',
        }
    )
    assert describe(refused) == (
        'HTTP 403 from the API server: configmaps "r-target" is forbidden: exceeded quota: none, requested: '
        "configmaps=1"
    )
    assert describe(ApiException(status=500, reason="Internal Server Error")) == (
        "HTTP 500 from the API server: Internal Server Error"
    )
    assert describe(TimeoutError("read timed out")) == "TimeoutError: read timed out"
    assert len(describe(RuntimeError("x" * 5000))) == 1024
