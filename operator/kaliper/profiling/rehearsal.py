"""An autoscaler's rehearsal, made from what the cluster recorded: the replicas over the load, each scale-up's way
to serving, the SLO's attainment window by window and the replica-seconds held (pure: the operator reads the
pods and the autoscaler's events, this module works out what they say).

Every instant is the API server's (whole seconds): a pod's creation, its PodScheduled and Ready transitions, its
container's start, the HorizontalPodAutoscaler's SuccessfulRescale events. The load generator's windows are on
its own clock from the stage's start; the two meet on the stage's start, a wall-clock instant."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from kaliper.measure.statistics import share_interval
from kaliper.report.schema import Rehearsal, ReplicaCount, ScaleUp, StageResult, WindowAttainment


@dataclass(frozen=True)
class PodTimeline:
    """One server pod's instants, as its status records them."""

    name: str
    created: datetime
    scheduled: datetime | None = None
    started: datetime | None = None
    ready: datetime | None = None
    """When its readiness probe last passed; None while it is not ready."""
    deleted: datetime | None = None


@dataclass(frozen=True)
class Rescale:
    """The autoscaler set the replicas to `size` at `at` (its SuccessfulRescale event)."""

    at: datetime
    size: int


def rehearse(
    autoscaler: str,
    stage: StageResult,
    pods: list[PodTimeline],
    rescales: list[Rescale],
    warnings: list[str] | None = None,
) -> Rehearsal:
    """What the autoscaler `autoscaler` did over `stage` (and what it warned of), what its users saw meanwhile and
    the replicas it held."""
    start = stage.started_at

    def offset(moment: datetime) -> float:
        return (moment - start).total_seconds()

    measured_from = stage.warmup_s
    end = stage.warmup_s + stage.measured_s
    present = [p for p in pods if p.deleted is None or offset(p.deleted) > 0]
    before = sorted((r for r in rescales if offset(r.at) <= 0), key=lambda r: r.at)
    during = sorted((r for r in rescales if 0 < offset(r.at) <= end), key=lambda r: r.at)
    ready_at_start = [p for p in present if p.ready is not None and offset(p.ready) <= 0]
    initial = before[-1].size if before else len(ready_at_start)
    added = sorted((p for p in present if p not in ready_at_start), key=lambda p: (p.created, p.name))
    scale_ups = [
        _scale_up(pod, during, offset, end, stage.first_answers.get(pod.name))
        for pod in added
        if offset(pod.created) <= end
    ]

    def desired(at: float) -> int:
        return next((r.size for r in reversed(during) if offset(r.at) <= at), initial)

    def ready(at: float) -> int:
        return sum(
            1
            for p in present
            if p.ready is not None and offset(p.ready) <= at and (p.deleted is None or offset(p.deleted) > at)
        )

    # When each pod began serving: its first answer (a replica ready at the start that answered, from the start).
    answered = {p.name: 0.0 if p in ready_at_start else stage.first_answers[p.name]
                for p in present if p.name in stage.first_answers}  # fmt: skip

    def serving(at: float) -> int | None:
        if not stage.first_answers:
            return None
        return sum(
            1 for p in present if answered.get(p.name, end + 1) <= at and (p.deleted is None or offset(p.deleted) > at)
        )

    changes = {0.0} | {offset(r.at) for r in during} | {a for a in answered.values() if 0 < a <= end}
    changes |= {offset(m) for p in present for m in (p.ready, p.deleted) if m is not None and 0 < offset(m) <= end}
    counts: list[ReplicaCount] = []
    for at in sorted(changes):
        count = ReplicaCount(at_s=at, desired=desired(at), ready=ready(at), serving=serving(at))
        if not counts or counts[-1].model_dump(exclude={"at_s"}) != count.model_dump(exclude={"at_s"}):
            counts.append(count)

    scaling = [(s.decided_at_s, s.decided_at_s + s.ready_s if s.ready_s is not None else end) for s in scale_ups]
    measured = [w for w in stage.windows if not w.warmup and w.good is not None]
    window_s = measured[1].start_s - measured[0].start_s if len(measured) > 1 else stage.measured_s
    windows = []
    for window in measured:
        if window.requests == 0:
            continue
        assert window.good is not None
        low, high = share_interval(window.good / window.requests, window.requests)
        windows.append(
            WindowAttainment(
                start_s=window.start_s,
                requests=window.requests,
                good=window.good,
                attainment=round(window.good / window.requests, 6),
                attainment_ci_low=round(low, 6),
                attainment_ci_high=round(high, 6),
                ready_replicas=ready(window.start_s),
                scaling=any(a < window.start_s + window_s and window.start_s < b for a, b in scaling),
            )
        )
    requests = sum(w.requests for w in windows) + stage.in_flight_at_end
    good = sum(w.good for w in windows)
    low, high = share_interval(good / requests, requests) if requests else (None, None)
    held = sum(_held_s(p, offset, measured_from, end) for p in present)
    return Rehearsal(
        autoscaler=autoscaler,
        warnings=warnings or [],
        replicas=counts,
        scale_ups=scale_ups,
        windows=windows,
        attainment=round(good / requests, 6) if requests else None,
        attainment_ci_low=round(low, 6) if low is not None else None,
        attainment_ci_high=round(high, 6) if high is not None else None,
        scaling_requests=sum(w.requests for w in windows if w.scaling),
        scaling_missed=sum(w.requests - w.good for w in windows if w.scaling),
        replica_seconds=round(held, 3),
        mean_replicas=round(held / stage.measured_s, 4) if stage.measured_s > 0 else 0.0,
    )


def _scale_up(
    pod: PodTimeline,
    rescales: list[Rescale],
    offset: Callable[[datetime], float],
    end: float,
    first_answer: float | None,
) -> ScaleUp:
    """A replica added under the load: its stages from the last rescale at or before its creation (the decision
    that asked for it), or from its creation where no event says so."""
    decision = next((r.at for r in reversed(rescales) if r.at <= pod.created), pod.created)

    def since(moment: datetime | None) -> float | None:
        return (moment - decision).total_seconds() if moment is not None else None

    ready = pod.ready if pod.ready is not None and offset(pod.ready) <= end else None
    return ScaleUp(
        replica=pod.name,
        decided_at_s=offset(decision),
        created_s=(pod.created - decision).total_seconds(),
        scheduled_s=since(pod.scheduled),
        started_s=since(pod.started),
        ready_s=since(ready),
        first_answer_s=round(first_answer - offset(decision), 3) if first_answer is not None else None,
    )


def _held_s(pod: PodTimeline, offset: Callable[[datetime], float], measured_from: float, end: float) -> float:
    """Seconds of the measured time the pod held its node's resources: from being bound to a node to its deletion
    or the load's end."""
    if pod.scheduled is None:
        return 0.0
    until = min(offset(pod.deleted), end) if pod.deleted is not None else end
    return max(0.0, until - max(offset(pod.scheduled), measured_from))
