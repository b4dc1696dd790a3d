"""How a cluster trial moves from phase to phase: a pure function of the trial's phase, what the watch
streams show of its objects, how long it has run and its timeouts. It returns the next phase and the
actions to take; the ProfileRun controller only carries them out.

    from        what is seen                                      to          actions
    Pending     started by the search                             Deploying   apply the deployment
                started by the search, the target a URL           Running     start the load
    Deploying   no deployment (lost in a restart)                 Deploying   apply it again
                deployment Ready (a workload copy: every          Running     start the load
                replica of its template ready)
                deployment Failed (a workload copy: its           Failed      tear down
                rollout failed), a pod that cannot recover,
                or readyTimeout passed
    Running     no Job, results written (the trial was collected  Collecting  collect
                and torn down, its status lost with the API
                server or the operator)
                no Job (lost in a restart)                        Running     start the load again
                load ended, results written                       Collecting  collect
                load ended without results, or trialTimeout       Failed      tear down
    Collecting  results there                                     Collecting  collect (which finishes the trial,
                                                                              or waits for the final scrape)
                results gone                                      Failed      tear down

The search skips or fails Pending trials itself (profiling/schedule.py). The objects are plain dicts as the
API returns them; diagnosis.py reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_duration
from kaliper.controllers.diagnosis import job_complete, job_problem, pod_problem, restarts_and_oom_kills
from kaliper.manifests.profilerun import LABEL_ROLE, LABEL_TRIAL
from kaliper.manifests.workload import rollout_state


@dataclass(frozen=True)
class ApplyDeployment:
    """Apply the trial's ModelDeployment (again, if it was lost)."""


@dataclass(frozen=True)
class StartLoad:
    """Apply the load generator against `url` (None: the trial deployment's Service)."""

    url: str | None
    model_name: str | None = None  # None: the run's model name


@dataclass(frozen=True)
class Collect:
    """Read the results, query the resource figures and judge the trial (which finishes it, or waits for
    the final scrape)."""


@dataclass(frozen=True)
class TearDown:
    """Delete the trial's deployment and load generator (its results stay)."""


Action = ApplyDeployment | StartLoad | Collect | TearDown


@dataclass(frozen=True)
class Move:
    phase: str
    actions: tuple[Action, ...] = ()
    message: str | None = None  # why it failed, or what an in-flight trial waits on
    restarts_and_oom_kills: tuple[int, int] | None = None  # of a trial that failed before serving


@dataclass(frozen=True)
class TrialObjectsSeen:
    """What the watch streams show of one trial's objects."""

    deployment: dict[str, Any] | None = None  # its ModelDeployment
    workload: dict[str, Any] | None = None  # or its copy of a workload target (an apps/v1 Deployment)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)  # its server and load-generator pods
    results_written: bool = False  # the load generator's results document exists (read once the load ended)

    @classmethod
    def of_trial(cls, index: int, name: str, objects: dict[str, list[dict[str, Any]]]) -> TrialObjectsSeen:
        """One trial's share of its run's objects (by kind), by their trial label and its deployment's name."""

        def mine(kind: str) -> list[dict[str, Any]]:
            return [
                o for o in objects.get(kind, []) if (o["metadata"].get("labels") or {}).get(LABEL_TRIAL) == str(index)
            ]

        def named(kind: str) -> dict[str, Any] | None:
            return next((d for d in objects.get(kind, []) if d["metadata"]["name"] == name), None)

        return cls(
            deployment=named("ModelDeployment"), workload=named("Deployment"), jobs=mine("Job"), pods=mine("Pod")
        )

    def pods_of(self, role: str) -> list[dict[str, Any]]:
        return [p for p in self.pods if (p["metadata"].get("labels") or {}).get(LABEL_ROLE, "").startswith(role)]


@dataclass(frozen=True)
class Timeouts:
    ready_s: float
    ready: str  # as the spec writes it, for the message
    trial_s: float
    trial: str

    @classmethod
    def of(cls, spec: ProfileRunSpec) -> Timeouts:
        ready, trial = spec.ready_timeout, spec.trial_timeout
        return cls(parse_duration(ready), ready, parse_duration(trial), trial)


def start(target_url: str | None) -> Move:
    """A trial the search wants started: deploy its configuration, or load the target URL at once."""
    if target_url is not None:
        return Move("Running", (StartLoad(target_url),))
    return Move("Deploying", (ApplyDeployment(),))


def _load_problems(seen: TrialObjectsSeen) -> list[str]:
    return [p for p in (job_problem(job, seen.pods_of("loadgen")) for job in seen.jobs) if p is not None]


def load_ended(seen: TrialObjectsSeen) -> bool:
    """Whether the load generator has ended: then, and only then, its results are worth reading."""
    return any(job_complete(j) for j in seen.jobs) or bool(_load_problems(seen))


def results_due(seen: TrialObjectsSeen) -> bool:
    """Whether a Running trial's results are worth reading: its load generator ended, or is gone (torn down
    after its results were read, before its status was written)."""
    return load_ended(seen) or not seen.jobs


def _failed(message: str, restarts_and_oom_kills: tuple[int, int] | None = None) -> Move:
    return Move("Failed", (TearDown(),), message[:2048], restarts_and_oom_kills)


def next_move(phase: str, seen: TrialObjectsSeen, elapsed_s: float, timeouts: Timeouts, target_url: str | None) -> Move:
    """The trial's next phase and what to do to get there. `target_url` is set when the run loads a URL
    instead of deploying configurations."""
    if phase == "Deploying":
        return _deploying(seen, elapsed_s, timeouts)
    if phase == "Running":
        return _running(seen, elapsed_s, timeouts, target_url)
    if phase == "Collecting":
        return (
            Move("Collecting", (Collect(),))
            if seen.results_written
            else _failed("its results ConfigMap holds no results document")
        )
    return Move(phase)


def _serving_state(seen: TrialObjectsSeen) -> tuple[bool, str | None, str | None, str | None]:
    """(ready, why it failed, the model name it serves, what its status says) of the trial's deployment."""
    if seen.workload is not None:
        ready, failure = rollout_state(seen.workload)
        return ready, failure, None, failure
    status = (seen.deployment or {}).get("status") or {}
    failed = status.get("phase") == "Failed"
    failure = f"the trial's ModelDeployment failed: {status.get('message')}" if failed else None
    return status.get("phase") == "Ready", failure, status.get("modelName"), status.get("message")


def _deploying(seen: TrialObjectsSeen, elapsed_s: float, timeouts: Timeouts) -> Move:
    if seen.deployment is None and seen.workload is None:  # created before a restart and lost, or never created
        return Move("Deploying", (ApplyDeployment(),))
    ready, failure, model_name, message = _serving_state(seen)
    if ready:
        return Move("Running", (StartLoad(None, model_name),))
    if failure is not None:
        return _failed(failure)
    servers = seen.pods_of("server")
    problem = pod_problem(servers)
    if problem is not None and problem.definitive:
        return _failed(str(problem), restarts_and_oom_kills(servers))
    if elapsed_s > timeouts.ready_s:
        why = str(problem) if problem else message or "no pod became ready"
        return _failed(f"not ready after readyTimeout ({timeouts.ready}): {why}")
    return Move("Deploying")


def _running(seen: TrialObjectsSeen, elapsed_s: float, timeouts: Timeouts, target_url: str | None) -> Move:
    # The results are read once the load generator has ended (its Job's event steps the run at once), not
    # polled while it runs.
    if load_ended(seen):
        if seen.results_written:
            return Move("Collecting", (Collect(),))
        problems = _load_problems(seen)
        return _failed(problems[0] if problems else "the load generator finished without writing its results")
    if not seen.jobs:
        if seen.results_written:  # measured and torn down, but the status saying so never reached the API
            return Move("Collecting", (Collect(),))
        return Move("Running", (StartLoad(target_url),))  # applied before a restart and lost: apply again
    # A load generator that cannot start (no node for it, an image it cannot pull) is said while the trial waits,
    # and in its failure when trialTimeout ends the wait.
    waiting = pod_problem(seen.pods_of("loadgen"))
    why = f"the load generator: {waiting}" if waiting is not None else None
    if elapsed_s > timeouts.trial_s:
        return _failed(f"no results within trialTimeout ({timeouts.trial})" + (f"; {why}" if why else ""))
    return Move("Running", message=f"waiting for {why}" if why else None)
