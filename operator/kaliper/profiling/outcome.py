"""Whether a finished ProfileRun passes its gates (pure): spec.failIfNotMet and slo.failIfRegressed, decided
once for both paths. The operator shows a failed gate as the run's Stalled condition, `kaliper run` as its exit
code and a line on stderr; neither decides it again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kaliper.api.common import KStatus
from kaliper.api.profilerun import BaselineComparison, ProfileRunSpec, ProfileRunStatus


@dataclass(frozen=True)
class FailedGate:
    reason: Literal["SLONotMet", "Regressed"]
    message: str


def failed_gate(
    spec: ProfileRunSpec | None,
    verdict: str | None,
    baseline: BaselineComparison | None,
    *,
    fail_if_not_met: bool = False,
) -> FailedGate | None:
    """The gate a finished run fails, if any: a verdict other than Met under spec.failIfNotMet (or `kaliper
    run --fail-if-not-met`, `fail_if_not_met`), then a regression against spec.baseline under
    slo.failIfRegressed. The run's report is kept either way."""
    if (fail_if_not_met or (spec is not None and spec.fail_if_not_met)) and verdict != "Met":
        return FailedGate(
            "SLONotMet", f"verdict {verdict or 'Unknown'}: no configuration met the SLO (spec.failIfNotMet)"
        )
    gated = spec is not None and spec.slo is not None and spec.slo.fail_if_regressed is not None
    if gated and baseline is not None and baseline.regressions:
        regressions = baseline.regressions
        more = f" (and {len(regressions) - 1} more)" if len(regressions) > 1 else ""
        return FailedGate(
            "Regressed", f"regressed against {baseline.source}: {regressions[0]}{more} (slo.failIfRegressed)"
        )
    return None


def gated_readiness(spec: ProfileRunSpec | None, status: ProfileRunStatus) -> KStatus | None:
    """A Succeeded run that fails a gate is Stalled, with the gate's reason. None: the phase decides."""
    if status.phase != "Succeeded":
        return None
    found = failed_gate(spec, status.verdict, status.baseline)
    return KStatus("Stalled", found.reason, found.message) if found is not None else None
