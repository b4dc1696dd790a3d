"""Measuring again where the choice is decided (spec.search.tieBreak), pure.

When every trial the search wanted has run and the two cheapest configurations that met the SLO tie because
their measurements are too noisy to tell them apart (the noise wider than recommendation.tieTolerance), both
are measured again; so are two of which one is cheaper beyond the noise but by less than twice it, each
measured once (one trial's windows do not see how a configuration moves between trials: a narrow lead is
confirmed before it is called clear). A round is one more trial of each, the first round the chosen one
first, the next the other first, so that a machine drifting over the rounds weighs on both alike.
decisions.best_trial then decides from every trial of each. The rounds stop when the choice is clear (a
narrow lead once confirmed by a round), when the noise has narrowed to the tolerance (a tie that says the two
are equal within it), or when the rounds or the budget are spent.

The extra trials take indexes after every listed trial and capacity probe, so the operator, replaying from
its status, and `kaliper run` number them alike."""

from __future__ import annotations

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_duration
from kaliper.profiling import decisions
from kaliper.profiling.plan import Configuration
from kaliper.report.schema import TrialReport


def first_index(spec: ProfileRunSpec, configurations: list[Configuration]) -> int:
    """The first tie-break trial's index: after every listed trial and every configuration's probes."""
    listed = len(configurations) * len(configurations[0].levels) if configurations else 0
    return listed + len(configurations) * spec.search.capacity_probes()


# A Clear choice by less than this many times the noise, each of the two measured once, is measured again.
CONFIRM_WITHIN = 2.0


def _pair(spec: ProfileRunSpec, trials: list[TrialReport]) -> tuple[TrialReport, TrialReport] | None:
    """The chosen and the runner-up when they tie on noise alone, or when a narrow Clear choice rests on one
    trial of each; None when the choice needs no more."""
    choice = decisions.best_trial(trials, spec.slo, spec.recommendation.tie_tolerance)
    if choice is None or choice.report.runner_up is None:
        return None
    by_index = {t.index: t for t in trials}
    chosen, runner_up = by_index[choice.best], by_index[choice.report.runner_up]
    noise, gap = choice.report.noise or 0.0, choice.report.cost_difference or 0.0
    if choice.report.certainty == "Tie":
        # Equal within the tolerance: more measurement would not change the answer.
        return (chosen, runner_up) if noise > spec.recommendation.tie_tolerance else None
    if choice.report.certainty == "Clear" and gap < CONFIRM_WITHIN * noise:
        # One trial's windows cannot see how a configuration moves from one trial to the next, which on a
        # busy-ish machine is as wide as their spread: a narrow lead from one trial each is confirmed once.
        measured = [sum(t.parameters == c.parameters for t in trials) for c in (chosen, runner_up)]
        return (chosen, runner_up) if measured == [1, 1] else None
    return None


def next_tie_break(spec: ProfileRunSpec, trials: list[TrialReport], first: int) -> dict[str, str] | None:
    """The parameters of the next tie-break trial, given every finished trial (the tie-break's among them,
    from index `first`); None when there is nothing more to measure."""
    budget = spec.search.tie_break.budget
    if budget is None:
        return None
    done = sorted((t for t in trials if t.index >= first), key=lambda t: t.index)
    rounds = len(done) // 2
    # A round's pair and order are decided at its start, from what was measured before it.
    before = [t for t in trials if t.index < first + 2 * rounds]
    if len(done) % 2 == 0 and (
        rounds >= spec.search.tie_break.rounds or sum(t.load_seconds() for t in done) >= parse_duration(budget)
    ):
        return None
    pair = _pair(spec, before)
    if pair is None:
        return None
    chosen, runner_up = pair if rounds % 2 == 0 else pair[::-1]
    return dict((runner_up if len(done) % 2 else chosen).parameters)


def tie_break_text(trials: list[TrialReport], first: int) -> str | None:
    """What the tie-break spent, for the choice's explanation; None when it measured nothing."""
    done = [t for t in trials if t.index >= first]
    if not done:
        return None
    return f"the tie-break measured {len(done)} more trials ({sum(t.load_seconds() for t in done):.0f} s of load)"
