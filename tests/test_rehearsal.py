"""An autoscaler's rehearsal from what the API server recorded: the server pods' status (created, bound, running,
ready, deleted), the HorizontalPodAutoscaler's SuccessfulRescale events as its controller words them, and the
load generator's windows (requests, and those answered within the SLO). One scripted burst: one replica at the
start, the autoscaler asks for three 7 s in, the second is ready 5 s after and the third, bound 2 s late, 9 s
after; the requests that missed meanwhile, and what the three held."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.controllers.diagnosis import autoscaler_warnings, pod_timelines, rescales
from kaliper.profiling.plan import configurations
from kaliper.profiling.rehearsal import rehearse
from kaliper.profiling.trials import judge_trial
from kaliper.report import profile_plots
from kaliper.report.rehearsal_text import rehearsal_lines
from kaliper.report.schema import (
    LatencyFigures,
    Rehearsal,
    ReplicaCount,
    ScaleUp,
    StageResult,
    TrialReport,
    WindowResult,
)
from tests.support.sample_reports import SLO, chosen, report_with, succeeded
from tests.support.specs import spec


def at(second: int, minute: int = 0, hour: int = 12) -> str:
    return f"2026-12-05T{hour:02d}:{minute:02d}:{second:02d}Z"


def pod(name: str, created: str, scheduled: str | None, running: str | None, ready: str | None, **meta: str) -> dict:
    conditions = []
    if scheduled is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled})
    conditions.append(
        {"type": "Ready", "status": "True", "lastTransitionTime": ready}
        if ready is not None
        else {"type": "Ready", "status": "False", "lastTransitionTime": created}
    )
    state = {"running": {"startedAt": running}} if running else {"waiting": {"reason": "ContainerCreating"}}
    return {
        "metadata": {"name": name, "creationTimestamp": created, **meta},
        "status": {"conditions": conditions, "containerStatuses": [{"name": "server", "state": state}]},
    }


def rescale_event(first: str, size: int) -> dict:
    return {
        "reason": "SuccessfulRescale",
        "type": "Normal",
        "message": f"New size: {size}; reason: cpu resource utilization (percentage of request) above target",
        "firstTimestamp": first,
        "lastTimestamp": first,
        "count": 1,
    }


PODS = [
    pod("iris-a", at(0, 59, 11), at(0, 59, 11), at(2, 59, 11), at(5, 59, 11)),
    pod("iris-b", at(7), at(7), at(8), at(12)),
    pod("iris-c", at(7), at(9), at(11), at(16)),
    pod("iris-old", at(0, 50, 11), at(0, 50, 11), at(1, 50, 11), None, deletionTimestamp=at(30, 59, 11)),
]
EVENTS = [
    rescale_event(at(59, 58, 11), 1),
    rescale_event(at(7), 3),
    {"reason": "FailedGetResourceMetric", "type": "Warning", "message": "missing request for cpu",
     "firstTimestamp": at(5)},
]  # fmt: skip
# 2 s windows: a warm-up window, then ten measured; (requests, of them within the SLO).
MEASURED = [(20, 20), (20, 20), (20, 10), (20, 8), (20, 12), (20, 19), (20, 20), (20, 20), (20, 20), (20, 20)]


def stage() -> StageResult:
    windows = [WindowResult(index=0, start_s=0.0, requests=10, errors=0, throughput_rps=5.0, warmup=True, good=10)]
    windows += [
        WindowResult(index=i + 1, start_s=2.0 * (i + 1), requests=n, errors=0, throughput_rps=n / 2, warmup=False,
                     good=good)
        for i, (n, good) in enumerate(MEASURED)
    ]  # fmt: skip
    return StageResult(
        index=0,
        load_model="open",
        level=10.0,
        started_at=datetime(2026, 12, 5, 12, 0, 0, tzinfo=UTC),
        warmup_s=2.0,
        measured_s=20.0,
        requests=210,
        errors=0,
        error_rate=0.0,
        throughput_rps=10.0,
        latency=LatencyFigures(),
        service_time=LatencyFigures(),
        windows=windows,
        in_flight_at_end=2,
        first_answers={"iris-a": 0.1, "iris-b": 12.5, "iris-c": 16.25},
        stop_reason="maxDuration reached",
    )


def test_the_rehearsal_reads_the_replicas_each_scale_up_and_the_slo_window_by_window() -> None:
    rehearsal = rehearse("iris-hpa", stage(), pod_timelines(PODS), rescales(EVENTS))
    assert rehearsal.autoscaler == "iris-hpa"
    # Serving: iris-a from the start, iris-b from its first answer at 12.5 s, iris-c from 16.25 s.
    assert rehearsal.replicas == [
        ReplicaCount(at_s=0.0, desired=1, ready=1, serving=1),
        ReplicaCount(at_s=7.0, desired=3, ready=1, serving=1),
        ReplicaCount(at_s=12.0, desired=3, ready=2, serving=1),
        ReplicaCount(at_s=12.5, desired=3, ready=2, serving=2),
        ReplicaCount(at_s=16.0, desired=3, ready=3, serving=2),
        ReplicaCount(at_s=16.25, desired=3, ready=3, serving=3),
    ]
    assert rehearsal.scale_ups == [
        ScaleUp(replica="iris-b", decided_at_s=7.0, created_s=0.0, scheduled_s=0.0, started_s=1.0, ready_s=5.0,
                first_answer_s=5.5),
        ScaleUp(replica="iris-c", decided_at_s=7.0, created_s=0.0, scheduled_s=2.0, started_s=4.0, ready_s=9.0,
                first_answer_s=9.25),
    ]  # fmt: skip
    by_start = {w.start_s: (w.ready_replicas, w.scaling) for w in rehearsal.windows}
    assert by_start == {
        2.0: (1, False),
        4.0: (1, False),
        6.0: (1, True),  # the decision at 7 s
        8.0: (1, True),
        10.0: (1, True),
        12.0: (2, True),
        14.0: (2, True),  # the third replica ready at 16 s
        16.0: (3, False),
        18.0: (3, False),
        20.0: (3, False),
    }
    worst = rehearsal.windows[3]
    assert (worst.requests, worst.good, worst.attainment) == (20, 8, 0.4)
    assert (worst.attainment_ci_low, worst.attainment_ci_high) == (0.218804, 0.613422)
    # 169 of 200 measured requests within the SLO, and the 2 still in flight at the end counted as missed.
    assert (rehearsal.attainment, rehearsal.attainment_ci_low, rehearsal.attainment_ci_high) == (
        0.836634,
        0.779456,
        0.881246,
    )
    assert (rehearsal.scaling_requests, rehearsal.scaling_missed) == (100, 31)
    # Held over the 20 measured seconds (2 s to 22 s): iris-a all of them, iris-b from 7 s, iris-c from 9 s (bound
    # 2 s after its creation): 20 + 15 + 13.
    assert (rehearsal.replica_seconds, rehearsal.mean_replicas) == (48.0, 2.4)


def test_a_replica_not_ready_by_the_end_has_no_ready_time_and_scales_to_the_end() -> None:
    pods = [PODS[0], pod("iris-b", at(7), at(7), None, None)]
    unanswered = stage().model_copy(update={"first_answers": {"iris-a": 0.1}})
    rehearsal = rehearse("iris-hpa", unanswered, pod_timelines(pods), rescales([rescale_event(at(7), 2)]))
    assert rehearsal.scale_ups == [
        ScaleUp(replica="iris-b", decided_at_s=7.0, created_s=0.0, scheduled_s=0.0, started_s=None, ready_s=None)
    ]
    assert rehearsal.replicas == [
        ReplicaCount(at_s=0.0, desired=1, ready=1, serving=1),
        ReplicaCount(at_s=7.0, desired=2, ready=1, serving=1),
    ]
    assert [w.start_s for w in rehearsal.windows if w.scaling] == [6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0]
    assert rehearsal.replica_seconds == 35.0


def test_without_an_event_a_scale_up_counts_from_its_pods_creation() -> None:
    rehearsal = rehearse("iris-hpa", stage(), pod_timelines(PODS[:2]), [])
    assert rehearsal.scale_ups == [
        ScaleUp(replica="iris-b", decided_at_s=7.0, created_s=0.0, scheduled_s=0.0, started_s=1.0, ready_s=5.0,
                first_answer_s=5.5)
    ]  # fmt: skip
    assert rehearsal.replicas[0] == ReplicaCount(at_s=0.0, desired=1, ready=1, serving=1)
    unnamed = rehearse("iris-hpa", stage().model_copy(update={"first_answers": {}}), pod_timelines(PODS[:2]), [])
    assert unnamed.replicas[0] == ReplicaCount(at_s=0.0, desired=1, ready=1, serving=None)  # no server said


def test_the_rehearsal_in_words() -> None:
    warned = [
        "FailedGetResourceMetric: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics "
        "returned from resource metrics API"
    ]
    rehearsal = rehearse("iris-hpa", stage(), pod_timelines(PODS), rescales(EVENTS), warned)
    assert rehearsal_lines(rehearsal) == [
        "autoscaler iris-hpa: replicas 1 ready of 1 at 0 s, 1 ready of 3 at 7 s, 2 ready (1 serving) of 3 at 12 s, "
        "2 ready of 3 at 12.5 s, 3 ready (2 serving) of 3 at 16 s, 3 ready of 3 at 16.2 s",
        "scale-up iris-b: asked for at 7 s; created +0 s, scheduled +0 s, running +1 s, ready +5 s, first answer "
        "+5.5 s",
        "scale-up iris-c: asked for at 7 s; created +0 s, scheduled +2 s, running +4 s, ready +9 s, first answer "
        "+9.2 s",
        "SLO attainment 83.7% (95% CI 77.9%-88.1%); while scaling up, 31 of 100 requests missed it",
        "attainment by window from 2 s (* scaling up): 100% 100% 50%* 40%* 60%* 95%* 100%* 100% 100% 100%",
        "held 2.40 replicas on average (48 replica-seconds, ready or not, priced)",
        "autoscaler warned: FailedGetResourceMetric: failed to get cpu utilization: unable to get metrics for "
        "resource cpu: no metrics returned from resource metrics API",
    ]


def test_an_autoscaled_trial_is_priced_for_the_replicas_it_held() -> None:
    autoscaled = ModelDeploymentSpec.model_validate(
        {
            "model": {"file": "m.onnx"},
            "resources": {"limits": {"cpu": "1"}},
            "autoscaling": {"minReplicas": 1, "maxReplicas": 4, "cpuUtilization": 70},
        }
    )
    run = spec(cost={"perCoreHour": 0.5})
    config = configurations(run, autoscaled)[0]
    rehearsal = rehearse("iris-hpa", stage(), pod_timelines(PODS), rescales(EVENTS))
    trial = TrialReport(index=0, name="t0", parameters={"concurrency": "2"}, status="Succeeded", stage=stage())
    fixed = judge_trial(trial, run, config)
    # One core at 0.5 an hour: the autoscaler's minimum of one replica, unless the rehearsal says what it held.
    assert fixed.cost_per_hour == 0.5 and fixed.cost_per_million_requests == pytest.approx(13.888889)
    held = judge_trial(trial.model_copy(update={"rehearsal": rehearsal}), run, config)
    # 2.4 replicas on average at 10 requests a second: 1.2 an hour, 1e6 / 10 s of it.
    assert held.cost_per_hour == 1.2 and held.cost_per_million_requests == pytest.approx(33.333333)
    assert held.core_hours_per_million_requests == pytest.approx(66.666667)


def test_the_autoscalers_warnings_are_those_of_the_load_once_each() -> None:
    def warning(reason: str, message: str, last: str) -> dict:
        return {"type": "Warning", "reason": reason, "message": message, "firstTimestamp": at(50, 59, 11),
                "lastTimestamp": last}  # fmt: skip

    missing = "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned"
    events = [
        warning("FailedGetResourceMetric", "no metrics known for pod iris-a", at(55, 59, 11)),  # while it started
        warning("FailedGetResourceMetric", missing, at(20)),
        warning("FailedComputeMetricsReplicas", "invalid metrics (1 invalid out of 1)", at(20)),
        warning("FailedGetResourceMetric", missing, at(35)),
        rescale_event(at(7), 3),
    ]
    assert autoscaler_warnings(events, stage().started_at) == [
        f"FailedGetResourceMetric: {missing}",
        "FailedComputeMetricsReplicas: invalid metrics (1 invalid out of 1)",
    ]


def test_the_rehearsal_is_drawn_replicas_and_attainment_over_time_its_scale_ups_and_cost_against_attainment() -> None:
    rehearsal = rehearse("iris-hpa", stage(), pod_timelines(PODS), rescales(EVENTS))
    trials = [
        succeeded(index, "500m", 20.0).model_copy(
            update={"stage": stage(), "rehearsal": rehearsal, "cost_per_million_requests": cost}
        )
        for index, cost in ((0, 12.0), (1, 9.0))
    ]
    report = report_with(trials)
    report.best_trial = 0
    over_time, scale_ups, cost = [
        f for f in profile_plots.figures(report) if "autoscaler" in f.layout.title.text or "scale-up" in
        f.layout.title.text
    ]  # fmt: skip
    assert over_time.layout.title.text.startswith("The autoscaler under the load, trial 0: replicas")
    names = [(t.name, t.visible) for t in over_time.data]
    assert names[:5] == [
        ("t0 requests per window", True),
        ("t0 replicas desired", True),
        ("t0 replicas ready", True),
        ("t0 replicas serving", True),
        ("t0 within the SLO", True),
    ]
    assert names[5][1] == "legendonly"
    ready = over_time.data[2]
    assert (list(ready.x), list(ready.y)) == ([0.0, 7.0, 12.0, 12.5, 16.0, 16.25, 22.0], [1, 1, 2, 2, 3, 3, 3])
    assert list(over_time.data[3].y) == [1, 1, 1, 2, 2, 3, 3]
    assert list(over_time.data[4].y)[:4] == [100.0, 100.0, 50.0, 40.0]
    assert [t.name for t in scale_ups.data] == [
        "to created",
        "to scheduled",
        "to running",
        "to ready",
        "to first answer",
    ]
    assert list(scale_ups.data[0].y) == ["t0 iris-b", "t0 iris-c", "t1 iris-b", "t1 iris-c"]
    spans = [[bar.x[row] for bar in scale_ups.data] for row in (0, 1)]
    assert spans == [[0.0, 0.0, 1.0, 4.0, 0.5], [0.0, 2.0, 2.0, 5.0, 0.25]]
    assert [(t.x[0], round(t.y[0], 4), t.marker.symbol) for t in cost.data] == [
        (12.0, 83.6634, "star"),
        (9.0, 83.6634, "circle"),
    ]


def test_the_rows_say_what_held_each_other_setting_back_too_slow_to_scale_or_more_replicas_held() -> None:
    slow = rehearse("t0", stage(), pod_timelines(PODS), rescales(EVENTS))
    warm = rehearse("t1", stage(), pod_timelines([PODS[0], pod("iris-s", at(0, 58, 11), at(0, 58, 11),
                                                                at(1, 58, 11), at(3, 58, 11))]), [])  # fmt: skip
    eager = slow.model_copy(update={"mean_replicas": 2.6})

    def trial(index: int, setting: str, rehearsal: Rehearsal, cost: float, verdict: str) -> TrialReport:
        made = succeeded(index, "500m", 20.0, verdict=verdict, observed="4.20s (95% CI 3.9-4.5s)")
        return made.model_copy(
            update={"parameters": {"autoscaling": setting, "rate": "25"}, "rehearsal": rehearsal,
                    "cost_per_million_requests": cost}
        )  # fmt: skip

    report = report_with(
        [trial(0, "one", slow, 5.0, "NotMet"), trial(1, "warm-spare", warm, 8.0, "Met"),
         trial(2, "eager", eager, 11.0, "Met")],
        slo=SLO,
    )  # fmt: skip
    rows = {r.parameters["autoscaling"]: r.reason for r in chosen(report, 1).configurations}
    assert rows == {
        "one": "never met the SLO (p99 <= 25ms: 4.20s (95% CI 3.9-4.5s) at autoscaling=one, rate=25); too "
        "slow to scale: 31 of 100 requests missed it while replicas started, the first new replica ready 5 s after "
        "the autoscaler asked for it",
        "warm-spare": "the choice",
        "eager": "costs more than the cheapest configuration, beyond the noise (held 2.60 replicas on average "
        "against the choice's 2.00)",
    }
