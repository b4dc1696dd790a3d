"""A ProfileRun's admission on the operator (kaliper.controllers.admission): a malformed input, foreseen or not,
ends in a message naming it, never in an exception the operator would retry forever. Every refusal through a
running operator: tests/cluster/test_tenancy.py."""

from __future__ import annotations

import pytest

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.controllers import admission
from kaliper.profiling.tenancy import TenancyPolicy

ADMIN = TenancyPolicy(prometheus_url="http://prometheus.monitoring:9090")


def run(**spec: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {
            "target": {"deploymentRef": {"name": "iris"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 1}},
            **spec,
        }
    )


def test_a_malformed_prometheus_url_is_refused_naming_the_field() -> None:
    """Before, the port's ValueError raised out of the check and the step was retried without end."""
    assert admission.admission_problem(run(metrics={"prometheus": {"url": "http://prom:99999"}}), "a", ADMIN) == (
        "spec.metrics.prometheus.url: a Prometheus URL: 'http://prom:99999' is not a URL (Port out of range "
        "0-65535); write it as http://host:port/path"
    )


def test_a_check_that_raises_on_input_it_did_not_foresee_refuses_the_run_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unforeseen(*_: object) -> None:
        raise RuntimeError("a shape nobody wrote a check for")

    monkeypatch.setattr(admission, "tenancy_problem", unforeseen)
    assert admission.admission_problem(run(), "a", ADMIN) == (
        "the run's spec could not be checked: RuntimeError: a shape nobody wrote a check for"
    )
