"""How long a trial's servers took to become ready, every run: on a cluster from each server pod's own status
(created, scheduled, its container running, ready), under `kaliper run` from the processes' start; and the
words the report gives it."""

from __future__ import annotations

from kaliper.controllers.diagnosis import server_startup
from kaliper.report.profile_text import startup_text
from kaliper.report.schema import ReplicaStartup, Startup


def pod(name: str, created: str, scheduled: str, running: str | None, ready: str | None) -> dict:
    conditions = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": ready})
    else:
        conditions.append({"type": "Ready", "status": "False", "lastTransitionTime": scheduled})
    state = {"running": {"startedAt": running}} if running else {"waiting": {"reason": "ContainerCreating"}}
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "status": {"conditions": conditions, "containerStatuses": [{"name": "server", "state": state}]},
    }


def test_each_pods_stages_are_read_from_its_status_and_the_slowest_decides() -> None:
    pods = [
        pod("t0-b", "2026-12-05T10:00:00Z", "2026-12-05T10:00:01Z", "2026-12-05T10:00:04Z", "2026-12-05T10:00:19Z"),
        pod("t0-a", "2026-12-05T10:00:00Z", "2026-12-05T10:00:00Z", "2026-12-05T10:00:02Z", "2026-12-05T10:00:09Z"),
    ]
    assert server_startup(pods) == Startup(
        ready_s=19.0,
        source="pods",
        replicas=[
            ReplicaStartup(replica="t0-a", scheduled_s=0.0, started_s=2.0, ready_s=9.0),
            ReplicaStartup(replica="t0-b", scheduled_s=1.0, started_s=4.0, ready_s=19.0),
        ],
    )
    startup = server_startup(pods)
    assert startup is not None
    assert startup_text(startup) == (
        "ready 19 s after the pods were created (the slowest of 2 pods: scheduled at 1 s, running at 4 s, "
        "ready at 19 s)"
    )


def test_pods_not_ready_have_no_startup_yet() -> None:
    waiting = pod("t0-a", "2026-12-05T10:00:00Z", "2026-12-05T10:00:00Z", None, None)
    assert server_startup([waiting]) is None
    assert server_startup([]) is None


def test_a_local_run_says_how_long_after_its_processes_started() -> None:
    assert startup_text(Startup(ready_s=2.34, source="processes")) == "ready 2.3 s after the servers started"
