"""A finished run's gates (kaliper.profiling.outcome): what the operator's Stalled condition and `kaliper run`'s
exit code both read."""

from __future__ import annotations

from kaliper.api.common import KStatus
from kaliper.api.profilerun import BaselineComparison, ProfileRunSpec, ProfileRunStatus
from kaliper.profiling.outcome import FailedGate, failed_gate, gated_readiness

TARGET = {
    "target": {"url": "http://127.0.0.1:9"},
    "payload": {"inline": "{}"},
    "load": {"closedLoop": {"concurrency": 1}},
}
REGRESSED = BaselineComparison(
    source="ProfileRun serve-v1",
    figures=8,
    worse=2,
    better=0,
    regressions=["concurrency=2: latency p50 4.21 ms -> 20.40 ms (+384.6%): worse", "concurrency=2: throughput"],
)


def spec(**fields: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(TARGET | fields)


def test_a_verdict_other_than_met_fails_the_run_only_when_asked() -> None:
    assert failed_gate(spec(), "NotMet", None) is None
    assert failed_gate(spec(failIfNotMet=True), "Met", None) is None
    assert failed_gate(spec(failIfNotMet=True), "Inconclusive", None) == FailedGate(
        "SLONotMet", "verdict Inconclusive: no configuration met the SLO (spec.failIfNotMet)"
    )
    # `kaliper run --fail-if-not-met` asks for the same on a spec that does not
    assert failed_gate(spec(), None, None, fail_if_not_met=True) == FailedGate(
        "SLONotMet", "verdict Unknown: no configuration met the SLO (spec.failIfNotMet)"
    )


def test_a_regression_fails_the_run_only_under_fail_if_regressed() -> None:
    ungated = spec(slo={"maxErrorRate": 0.01}, baseline={"run": "serve-v1"})
    gated = spec(slo={"maxErrorRate": 0.01, "failIfRegressed": {}}, baseline={"run": "serve-v1"})
    assert failed_gate(ungated, "Met", REGRESSED) is None
    assert failed_gate(gated, "Met", REGRESSED.model_copy(update={"regressions": []})) is None
    assert failed_gate(gated, "Met", REGRESSED) == FailedGate(
        "Regressed",
        "regressed against ProfileRun serve-v1: concurrency=2: latency p50 4.21 ms -> 20.40 ms (+384.6%): worse "
        "(and 1 more) (slo.failIfRegressed)",
    )


def test_the_operator_shows_a_failed_gate_of_a_succeeded_run_as_stalled() -> None:
    asked = spec(failIfNotMet=True)
    assert gated_readiness(asked, ProfileRunStatus(phase="Succeeded", verdict="NotMet")) == KStatus(
        "Stalled", "SLONotMet", "verdict NotMet: no configuration met the SLO (spec.failIfNotMet)"
    )
    assert gated_readiness(asked, ProfileRunStatus(phase="Running", verdict="NotMet")) is None
    assert gated_readiness(None, ProfileRunStatus(phase="Succeeded", verdict="NotMet")) is None
