"""Each configuration as the choice weighed it (pure): qualified or why not, its cost and how it compares with
the choice, and why the choice won a tie. The report carries these rows (ProfileReport.configurations); the
answer page, the terminal and `kaliper report` print them and decide nothing again."""

from __future__ import annotations

from kaliper.api.profilerun import SloSpec
from kaliper.profiling.decisions import TIE_WORDS, Choice, Measured, measured_configurations, qualifies
from kaliper.profiling.plan import ParametersKey, describe, parameters_key
from kaliper.report.schema import ConfigurationRow, QualityScore, TrialReport


def _cost(level: Measured) -> float | None:
    """A load level's cost as the choice weighs it: the mean of its trials' (None when one has no price)."""
    costs = [t.unit_cost() for t in level.trials]
    return None if any(c is None for c in costs) else sum(costs) / len(costs)  # type: ignore[arg-type,misc]


def _why_not(trials: list[TrialReport], slo: SloSpec | None) -> str:
    """Why no load level of a configuration qualified, in a line."""
    ran = [t for t in trials if t.status != "Skipped"]
    if not any(t.status == "Succeeded" for t in ran):
        first = next((t for t in trials if t.message), trials[0])
        return f"{first.status.lower()}: {first.message or 'no trial ran'}"
    levels: dict[tuple[tuple[str, str], ...], list[TrialReport]] = {}
    for trial in ran:
        levels.setdefault(parameters_key(trial.parameters), []).append(trial)
    for group in levels.values():
        failed = [t.name for t in group if not qualifies(t, slo)]
        if failed and len(failed) < len(group):
            return f"measured again without qualifying ({', '.join(failed)} failed or missed the SLO)"
    lowest = min((t for t in ran if t.stage is not None), key=lambda t: t.stage.level)  # type: ignore[union-attr]
    missed = next((c for c in lowest.slo if c.verdict != "Met"), None)
    if missed is None:
        return "no trial met the SLO"
    slow = _slow_to_scale(lowest)
    return f"never met the SLO ({missed.objective}: {missed.observed} at {describe(lowest.parameters)}){slow}"


def _slow_to_scale(trial: TrialReport) -> str:
    """An autoscaled trial that missed while replicas started: what users lost, and how long the first took."""
    rehearsal = trial.rehearsal
    if rehearsal is None or rehearsal.scaling_missed == 0:
        return ""
    ready = [s.ready_s for s in rehearsal.scale_ups if s.ready_s is not None]
    first = (
        f"the first new replica ready {min(ready):.0f} s after the autoscaler asked for it"
        if ready
        else "no new replica ready before the load ended"
    )
    return (
        f"; too slow to scale: {rehearsal.scaling_missed} of {rehearsal.scaling_requests} requests missed it while "
        f"replicas started, {first}"
    )


def _idle_headroom(level: Measured, chosen: Measured) -> str:
    """Two autoscaler settings that both held: what the costlier one held more of."""
    mine, theirs = level.first.rehearsal, chosen.first.rehearsal
    if mine is None or theirs is None:
        return ""
    return f" (held {mine.mean_replicas:.2f} replicas on average against the choice's {theirs.mean_replicas:.2f})"


def configuration_rows(
    trials: list[TrialReport],
    slo: SloSpec | None,
    choice: Choice | None,
    qualities: dict[ParametersKey, QualityScore] | None = None,
) -> list[ConfigurationRow]:
    """One row per configuration, in the order of their first trials, with its quality score where the run
    scored quality (one scored Below is held back whatever its cost)."""
    qualities = qualities or {}
    grouped: dict[tuple[tuple[str, str], ...], list[TrialReport]] = {}
    for trial in sorted(trials, key=lambda t: t.index):
        grouped.setdefault(parameters_key(trial.configuration()), []).append(trial)
    qualified: dict[tuple[tuple[str, str], ...], list[Measured]] = {}
    for level in measured_configurations(trials, slo):  # cheapest first
        qualified.setdefault(parameters_key(level.first.configuration()), []).append(level)
    best = choice.best if choice is not None else None
    chosen = next((m for levels in qualified.values() for m in levels if m.first.index == best), None)
    chosen_cost = _cost(chosen) if chosen is not None else None
    rows = []
    for key, members in grouped.items():
        levels = qualified.get(key, [])
        row = ConfigurationRow(
            parameters=members[0].configuration(),
            trials=[t.index for t in members],
            qualified=bool(levels),
            quality=qualities.get(key),
            reason="",
        )
        if not levels:
            row.reason = _why_not(members, slo)
            rows.append(row)
            continue
        tied = [m for m in levels if choice is not None and m.first.index in choice.won_by]
        row.chosen = any(m is chosen for m in levels)
        row.tied = bool(tied) and not row.chosen
        stands_for = chosen if row.chosen and chosen is not None else (tied or levels)[0]
        row.cost, row.cost_trial = _cost(stands_for), stands_for.first.index
        if row.chosen:
            row.reason = "the choice"
            rows.append(row)
            continue
        if row.cost is not None and chosen_cost:
            row.cost_change = round(row.cost / chosen_cost - 1, 4)
        if row.quality is not None and row.quality.verdict == "Below":
            row.reason = f"held back by quality: {row.quality.observed}"
            rows.append(row)
            continue
        assert chosen is not None  # a configuration qualified and not held back: the choice is among those that did
        if row.tied:
            assert choice is not None
            row.decided_by = choice.won_by[stands_for.first.index]
            row.reason = f"a tie within the noise, which the choice {TIE_WORDS[row.decided_by][1]}"
        else:
            row.reason = "costs more than the cheapest configuration, beyond the noise" + _idle_headroom(
                stands_for, chosen
            )
        rows.append(row)
    return rows
