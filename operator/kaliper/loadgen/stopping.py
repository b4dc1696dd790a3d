"""When to stop measuring: a pure decision over the windows measured so far.

Like perf_analyzer, a measurement is stable when the last k windows agree within a tolerance (throughput
and the SLO percentile's latency); unlike it, Kaliper also waits until the confidence interval of that
percentile is narrow enough, and until the interval of every latency objective lies wholly on one side of
its bound (so the SLO verdict can be decided), read as the verdict reads it: the failures and the requests in
flight count as slower than any answer. The minimum and maximum durations always hold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from kaliper.loadgen.recorder import Window
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.judgement import Bound, Samples, judge
from kaliper.measure.statistics import PercentileEstimate, estimate

# A target that answered no request at all for this long (refused or lost connections, every request of the
# windows in a row) is down: its stage stops there, kept with what it measured, and the run ends. An outage
# shorter than this is measured through, as the errors it is.
DOWN_AFTER_S = 10.0


@dataclass(frozen=True)
class StoppingParameters:
    min_duration_s: float
    max_duration_s: float
    stable_windows: int | None = None  # None: no early stop, measure for max_duration_s
    tolerance: float = 0.1
    max_relative_ci_width: float = 0.05


@dataclass(frozen=True)
class WindowFigures:
    """What the rule looks at in one window."""

    throughput_rps: float
    latency_s: float | None  # the SLO percentile within this window


@dataclass(frozen=True)
class Decision:
    stop: bool
    reason: str


def spread(values: list[float]) -> float:
    """(max - min) / mean: how far apart a set of figures is, as a fraction."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean > 0 else float("inf")


def unanswered_so_far(measured: list[Window]) -> tuple[int, int]:
    """(answered, unanswered) requests of the windows measured so far, as the SLO verdict will count them at
    the stage's end: the failures, and the requests in flight at the last window's edge."""
    requests = sum(w.requests for w in measured)
    errors = sum(sum(w.errors.values()) for w in measured)
    in_flight = measured[-1].in_flight if measured else 0
    return requests - errors, errors + in_flight


def straddling(objectives: list[tuple[PercentileEstimate, float]]) -> str | None:
    """Why the SLO cannot be decided yet: the first objective (estimate, bound in seconds) whose confidence
    interval contains the bound, or cannot be bounded from above; None when every one is decided."""
    for found, bound_s in objectives:
        if found.value_s is None:
            return f"no samples yet for p{found.percentile:g}"
        if found.ci_low_s is not None and found.ci_low_s > bound_s:
            continue
        if found.ci_high_s is not None and found.ci_high_s <= bound_s:
            continue
        high = "open" if found.ci_high_s is None else f"{found.ci_high_s * 1000:.2f}ms"
        low = "?" if found.ci_low_s is None else f"{found.ci_low_s * 1000:.2f}"
        return (
            f"p{found.percentile:g} {found.confidence:.0%} interval {low}-{high} straddles the objective "
            f"{bound_s * 1000:g}ms"
        )
    return None


def undecided(objectives: list[tuple[Bound, LatencyHistogram]], measured: list[Window]) -> str | None:
    """Why an objective cannot be decided yet: the judgement the verdict will make
    (kaliper.measure.judgement), on the windows measured so far (each objective with the cumulative histogram of
    its answered requests' figure) and the requests in flight at the last window's edge; None when every one is
    decided. A miss that rests on requests in flight not yet past the
    bound measures on: more answers dilute them."""
    answered, unanswered = unanswered_so_far(measured)
    in_flight, oldest_s = (measured[-1].in_flight, measured[-1].in_flight_oldest_s) if measured else (0, 0.0)
    for bound, histogram in objectives:
        samples = Samples(answered, lambda p, h=histogram: estimate(h, p), unanswered - in_flight, in_flight, oldest_s)
        judged = judge(bound, samples)
        if judged.verdict != "Inconclusive":
            continue
        if judged.best is not None:
            p, bound_ms = bound.percentile, bound.bound_s * 1000
            return f"p{p:g} waits on {in_flight} requests in flight, not yet past its {bound_ms:g}ms bound"
        assert judged.found is not None
        return straddling([(judged.found, bound.bound_s)])
    return None


def decide(
    measured_s: float,
    windows: list[WindowFigures],
    cumulative: PercentileEstimate,
    params: StoppingParameters,
    undecided: str | None = None,
) -> Decision:
    """undecided: why an SLO objective cannot be decided yet (see straddling); a stable measurement goes on
    while it is set, up to maxDuration."""
    if measured_s >= params.max_duration_s:
        still = f"; {undecided}" if undecided else ""
        return Decision(True, f"reached maxDuration ({params.max_duration_s:g}s){still}")
    if params.stable_windows is None or measured_s < params.min_duration_s:
        return Decision(False, "measuring")
    k = params.stable_windows
    recent = windows[-k:]
    if len(recent) < k:
        return Decision(False, f"waiting for {k} windows")
    throughput_spread = spread([w.throughput_rps for w in recent])
    if throughput_spread > params.tolerance:
        return Decision(False, f"throughput of the last {k} windows differs by {throughput_spread:.0%}")
    latencies = [w.latency_s for w in recent if w.latency_s is not None]
    if len(latencies) < k:
        return Decision(False, "a recent window has no latency")
    latency_spread = spread(latencies)
    if latency_spread > params.tolerance:
        return Decision(False, f"p{cumulative.percentile:g} of the last {k} windows differs by {latency_spread:.0%}")
    width = cumulative.relative_ci_width
    if width is None or width > params.max_relative_ci_width:
        shown = "open" if width is None else f"{width:.1%}"
        return Decision(False, f"p{cumulative.percentile:g} confidence interval is {shown} wide")
    if undecided is not None:
        return Decision(False, undecided)
    return Decision(
        True,
        f"stable: last {k} windows within {params.tolerance:.0%} (throughput {throughput_spread:.1%}, "
        f"p{cumulative.percentile:g} {latency_spread:.1%}) and the p{cumulative.percentile:g} "
        f"{cumulative.confidence:.0%} confidence interval is {width:.1%} wide",
    )


def replay_done(
    measured_s: float, replay_s: float, window_s: float, drain_s: float, measured: list[Window]
) -> Decision | None:
    """A trace replayed once ends one window after the first window edge, from its last send on, with no
    request in flight: a window's in-flight count is read when it is collected, a little after its edge, and
    the answers that came in between are in the next window, which the stage keeps. Or `drain_s` (the
    request timeout) after the last send, what is still in flight counted as unanswered. None before the
    last send."""
    if measured_s < replay_s:
        return None
    in_flight = measured[-1].in_flight if measured else 0
    settled = measured_s - window_s >= replay_s and len(measured) >= 2 and not measured[-2].in_flight
    if settled or (measured_s >= replay_s + drain_s and not in_flight):
        return Decision(True, f"replayed the trace ({replay_s:g}s) and none is left in flight")
    if measured_s >= replay_s + drain_s:
        return Decision(
            True, f"replayed the trace; {in_flight} requests still in flight {drain_s:g}s after its last send"
        )
    if not in_flight:
        return Decision(False, "replayed the trace; a window more for the answers that came at its edge")
    return Decision(False, f"replayed the trace; waiting for {in_flight} answers")


def target_down(measured: list[Window], window_s: float) -> str | None:
    """Why the target counts as down, if it answered no request for DOWN_AFTER_S: every request of the last
    windows refused or lost (timeouts and HTTP errors are answers of a kind; the stage measures them).
    Windows in which no request ended (users backing off, long requests) neither break nor make the span."""
    silent: Counter[str] = Counter()
    failing = span = 0
    for offset, window in enumerate(reversed(measured)):
        if not window.requests:
            continue
        if window.unanswered < window.requests:
            break
        silent.update(window.errors)
        failing, span = failing + 1, offset + 1
    if failing < 2 or span * window_s < DOWN_AFTER_S:
        return None
    kinds = ", ".join(f"{k} x{n}" for k, n in silent.most_common(3))
    return (
        f"the target answered nothing for {span * window_s:g} s: every request of the last {span} windows "
        f"failed ({kinds}); is it down?"
    )
