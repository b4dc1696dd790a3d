"""The load generator proper: Locust runners and users, and the controller that drives stages.

Importing this module imports Locust, which monkey-patches the standard library for gevent: import it only
in a process that generates load (`python -m kaliper.loadgen`, or a subprocess of the local runtime).

Users are Locust `User`s that own one keep-alive connection each (kaliper.loadgen.http: requests serialised
once, as wrk does) and run a tight loop instead of Locust's task scheduler: every request is recorded into
HDR histograms by completion window, and Locust's own rounded statistics are not used. Locust provides the
runners: spawning users, and the master/worker protocol of distributed runs.
"""

from __future__ import annotations

import itertools
import logging
import math
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import gevent
import locust
from locust import User
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from kaliper.api.units import parse_duration
from kaliper.loadgen.config import LoadGenConfig, LoadGenError, request_headers
from kaliper.loadgen.generation import ANSWERED_KINDS, GenerationSender, Session, classify
from kaliper.loadgen.grpc_calls import GrpcTarget, Preflight, grpc_requests, target_is_down
from kaliper.loadgen.grpc_calls import preflight as grpc_preflight
from kaliper.loadgen.grpc_process import GrpcClientProcess
from kaliper.loadgen.http import Connection, StreamingConnection, build_request
from kaliper.loadgen.payloads import build_bodies
from kaliper.loadgen.progress import StageProgress
from kaliper.loadgen.recorder import LATE_AFTER_S, Aggregator, Recorder, Window
from kaliper.loadgen.results import stage_result, stage_warnings
from kaliper.loadgen.schedule import stage_send_times
from kaliper.loadgen.server_metrics import Counters, scrape, server_check, server_load
from kaliper.loadgen.stopping import Decision, StoppingParameters, WindowFigures, decide, straddling
from kaliper.log import get_logger
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.statistics import estimate
from kaliper.netutil import free_port
from kaliper.processes import die_with_parent
from kaliper.report.schema import (
    GeneratorInfo,
    LoadTestResult,
    StageResult,
)
from kaliper.report.token_text import token_summary

log = get_logger("kaliper.loadgen")
# Users are spawned all at once on purpose (each is just a connection); Locust's warning about it is noise.
logging.getLogger("locust.runners").addFilter(lambda record: "spawn rate is very high" not in record.getMessage())

COLLECT_INTERVAL_S = 0.25
SPIN_S = 0.0015  # libev rounds its waits up to whole milliseconds: wake this early, then yield until due
MESSAGE_WINDOWS = "kaliper_windows"
MESSAGE_STAGE = "kaliper_stage"


# --- what every generator process shares -------------------------------------------------------------


class Generator:
    """One generator process's state, which its users read: target, bodies, headers, the recorder and the schedule."""

    def __init__(self, config: LoadGenConfig, share: float = 1.0) -> None:
        self.config = config
        self.share = share  # this process's part of an open-loop rate
        url = urlsplit(config.url)
        self.ssl = url.scheme == "https"
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if self.ssl else 80)
        self.path = url.path.rstrip("/") + config.path
        self.method = config.request.method
        self.timeout_s = parse_duration(config.request.timeout)
        self.think_s = parse_duration(config.load.closed_loop.think_time) if config.load.closed_loop else 0.0
        self.headers = request_headers(config)
        self.generation = GenerationSender.for_config(config) if config.streaming else None
        self.bodies = self.generation.bodies() if self.generation else build_bodies(config.payload, config.seed)
        # Each body becomes a complete request once, here, instead of on every send.
        self.grpc = GrpcTarget.for_config(config) if config.grpc else None
        if self.grpc is not None:
            self.requests = grpc_requests(self.bodies, config.request.model_name or "")
        else:
            self.requests = [
                build_request(self.method, self.host, self.port, self.path, self.headers, body) for body in self.bodies
            ]
        self._request_cycle = itertools.cycle(self.requests)
        self._index_cycle = itertools.cycle(range(len(self.requests)))
        self.recorder = Recorder(config.window_s, config.open_loop, streaming=config.streaming)
        self.grpc_clients: GrpcClientProcess | None = None
        self._slots: Iterator[float] | None = None

    def start_grpc_clients(self) -> None:
        """gRPC: the process that makes this process's calls (kaliper.loadgen.grpc_process), started and
        connected before the first stage; the users here stand in for its users."""
        if self.grpc is not None and self.grpc_clients is None:
            self.grpc_clients = GrpcClientProcess(self.config, self.share)

    @property
    def windows(self) -> Recorder | GrpcClientProcess:
        """Where this process's closed windows come from: its own recorder, or its gRPC client process."""
        return self.grpc_clients or self.recorder

    def close(self) -> None:
        if self.grpc_clients is not None:
            self.grpc_clients.close()

    def next_request(self) -> bytes:
        return next(self._request_cycle)

    def build(self, body: bytes) -> bytes:
        """A complete request for a body made during the run (a chat session's later turn)."""
        return build_request(self.method, self.host, self.port, self.path, self.headers, body)

    def next_index(self) -> int:
        return next(self._index_cycle)

    def begin_stage(self, stage: int, start_wall: float, level: float) -> None:
        if self.grpc_clients is not None:
            self.grpc_clients.begin_stage(stage, start_wall, level)
            return
        self.recorder.begin_stage(stage, start_wall)
        if self.config.load.open_loop is not None:
            arrival = self.config.load.open_loop.arrival
            self._slots = stage_send_times(level * self.share, arrival, self.config.seed, stage, start_wall)

    def claim_slot(self) -> float | None:
        """The next intended send time (open loop), shared by all users of this process."""
        return next(self._slots) if self._slots is not None else None


def _unused_task(user: User) -> None:  # pragma: no cover - run() replaces Locust's task loop
    raise NotImplementedError


class KaliperUser(User):
    """One connection; closed loop (send, wait for the answer, repeat) or open loop (send at the intended
    times it claims from the process's schedule). A gRPC user stands in for one of the gRPC client
    process's users, which makes the calls."""

    tasks = [_unused_task]  # Locust insists on a task; run() below never schedules it

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.generator: Generator = environment.kaliper_generator  # type: ignore[attr-defined]
        generator = self.generator
        kind = StreamingConnection if generator.generation else Connection
        # It connects on its first request: a gRPC stand-in's never does.
        self.connection = kind(generator.host, generator.port, generator.timeout_s, generator.ssl)

    def send(self) -> tuple[str | None, int, int]:
        """One request: the error kind (None on success), bytes sent and bytes received."""
        raw = self.generator.next_request()
        try:
            status = self.connection.request(raw)
        except gevent.GreenletExit:
            raise
        except Exception as exc:  # every failure is counted, with its kind
            return classify(exc), len(raw), 0
        return (None if status < 400 else f"HTTP {status}"), len(raw), self.connection.last_response_bytes

    def run(self) -> None:  # Locust calls this in the user's greenlet
        if self.generator.grpc_clients is not None:
            self._stand_in(self.generator.grpc_clients)
            return
        try:
            if self.generator.generation is not None:
                self._generation_loop(self.generator.generation)
            elif self.generator.config.open_loop:
                self._open_loop()
            else:
                self._closed_loop()
        finally:
            self.connection.close()

    @staticmethod
    def _stand_in(clients: GrpcClientProcess) -> None:
        """One user of the gRPC client process for as long as Locust runs this one."""
        clients.user_started()
        try:
            while True:
                gevent.sleep(3600)
        finally:
            clients.user_stopped()

    def _closed_loop(self) -> None:
        generator, recorder = self.generator, self.generator.recorder
        clock, wall = time.perf_counter, time.time
        while True:
            start = clock()
            error, sent, received = self.send()
            recorder.record(wall(), clock() - start, None, error, sent=sent, received=received)
            if generator.think_s:
                gevent.sleep(generator.think_s)
            elif error is not None:
                gevent.sleep(0.001)  # do not spin on a refusing target

    def _open_loop(self) -> None:
        recorder = self.generator.recorder
        clock = time.perf_counter
        while True:
            slot, claimed = self._wait_for_slot()
            start = clock()
            error, sent, received = self.send()
            recorder.record_scheduled(slot, claimed, start, clock(), error, sent, received)

    def _wait_for_slot(self, precise: bool = False) -> tuple[float, float]:
        """Open loop: claim the next intended send time and sleep until it; returns it and when it was claimed
        (a claim after the slot was due means no connection was free in time).

        gevent's timers wake about 0.6 ms late (libev waits in whole milliseconds); `precise` sleeps until
        SPIN_S before the slot and yields to the other users until it is due. Generation requests ask for it:
        their rates are low, so the spin costs little, and a time to first token of tens of milliseconds
        would otherwise read 1-2% high from the intended send."""
        clock = time.perf_counter
        while (slot := self.generator.claim_slot()) is None:
            gevent.sleep(0.01)
        claimed = clock()
        if slot > claimed:
            gevent.sleep(max(0.0, slot - claimed - SPIN_S) if precise else slot - claimed)
            while precise and clock() < slot:
                gevent.sleep(0)
        return slot, claimed

    def _generation_loop(self, sender: GenerationSender) -> None:
        """Generation requests, closed or open loop: each answer read as it arrives, its tokens timed."""
        generator, recorder = self.generator, self.generator.recorder
        connection = self.connection
        assert isinstance(connection, StreamingConnection)
        clock, wall = time.perf_counter, time.time
        open_loop = generator.config.open_loop
        session = Session(sender.turns) if sender.turns > 1 and sender.session_body else None
        while True:
            slot, claimed = self._wait_for_slot(precise=True) if open_loop else (None, None)
            index = generator.next_index()
            in_session = session is not None and bool(session.messages)
            if session is not None and in_session:
                assert sender.session_body is not None
                raw = generator.build(sender.session_body(session.messages, index))
            else:
                raw = generator.requests[index]
            resent_before = connection.resent
            outcome = sender.send(connection, raw, index, slot, clock, in_session)
            if session is not None:
                answer = outcome.answer if outcome.error is None else None
                session.advance(sender.requests[index].messages or [], answer)
            end = outcome.ended
            late = slot is not None and outcome.sent - slot > LATE_AFTER_S
            recorder.record(
                wall(),
                end - outcome.sent,
                end - slot if slot is not None else None,
                outcome.error,
                late_no_connection=late and claimed is not None and claimed > slot + LATE_AFTER_S,
                late_generator=late,
                sent=len(raw),
                received=connection.last_response_bytes,
                resent=connection.resent - resent_before,
                tokens=outcome.tokens,
                good=outcome.good,
            )
            if outcome.error is not None and not open_loop:
                gevent.sleep(0.001)  # do not spin on a refusing target
            elif generator.think_s:
                gevent.sleep(generator.think_s)


# --- the controller ----------------------------------------------------------------------------------


class Controller:
    """Drives the stages of a run from the process that owns the runner (local or Locust master)."""

    def __init__(self, config: LoadGenConfig, environment: Environment, processes: int, workers: int) -> None:
        self.config = config
        self.environment = environment
        self.runner = environment.runner
        self.distributed = isinstance(self.runner, MasterRunner)
        self.sources = max(processes, 1) if self.distributed else 1
        self.aggregator = Aggregator(self.sources)
        self.processes, self.workers = processes, workers
        self.window_s = config.window_s
        self.warmup_windows = math.ceil(parse_duration(config.load.warmup) / self.window_s)
        stopping = config.stopping
        self.params = StoppingParameters(
            min_duration_s=parse_duration(config.load.min_duration),
            max_duration_s=parse_duration(config.load.max_duration),
            stable_windows=stopping.stable_windows if stopping else None,
            tolerance=stopping.tolerance if stopping else 0.1,
            max_relative_ci_width=stopping.max_relative_ci_width if stopping else 0.05,
        )
        self.worker_failure: str | None = None
        if self.distributed:
            self.runner.register_message(MESSAGE_WINDOWS, self._on_windows)

    def _on_windows(self, environment: Environment, msg: Any) -> None:  # Locust passes these by keyword
        data = msg.data
        if "error" in data:
            self.worker_failure = f"load-generator worker {msg.node_id}: {data['error']}"
            return
        windows = [Window.from_wire(w) for w in data["windows"]]
        self.aggregator.add(msg.node_id, data["stage"], windows, data["until"])

    def _collect_local(self) -> None:
        generator: Generator = self.environment.kaliper_generator  # type: ignore[attr-defined]
        windows, until = generator.windows.take_closed(time.time())
        self.aggregator.add("local", generator.windows.stage, windows, until)

    def _begin_stage(self, stage: int, level: float) -> float:
        lead = 1.0 if self.distributed else 0.1
        start_wall = time.time() + lead
        if self.distributed:
            self.runner.send_message(
                MESSAGE_STAGE,
                {
                    "stage": stage,
                    "start": start_wall,
                    "level": level,
                    "share": 1.0 / self.sources,
                    "config": self.config.to_wire(),
                },
            )
        else:
            self.environment.kaliper_generator.begin_stage(stage, start_wall, level)  # type: ignore[attr-defined]
        users = int(level) if not self.config.open_loop else self.config.connections()
        if stage == 0 or not self.config.open_loop:
            self.runner.start(users, spawn_rate=max(users, 1) * 10)
        return start_wall

    def run(self, first_warning: str | None = None) -> LoadTestResult:
        """Every stage in turn; `first_warning` (what the preflight's first request met) leads the warnings."""
        started = datetime.now(UTC)
        stages: list[StageResult] = []
        error = None
        # Progress lines on stderr (stdout may carry the results document), from whichever process drives the
        # stages: `run` here, or the master of a distributed run.
        self.progress = StageProgress()
        try:
            for index, level in enumerate(self.config.stage_levels):
                log.info(
                    "stage starting", stage=index, level=level, model="open" if self.config.open_loop else "closed"
                )
                self.progress.started(
                    index,
                    level,
                    self.config.open_loop,
                    self.warmup_windows * self.window_s,
                    self.params.min_duration_s,
                    self.params.max_duration_s,
                )
                start_wall = self._begin_stage(index, level)
                stages.append(self._measure(index, level, start_wall))
                log.info("stage done", stage=index, reason=stages[-1].stop_reason)
                self.progress.done(index, stages[-1].stop_reason)
        except LoadGenError as exc:
            error = str(exc)
            self.progress.stopped(error)
        finally:
            self.runner.stop()
        return LoadTestResult(
            target=self.config.url + self.config.path,
            started_at=started,
            finished_at=datetime.now(UTC),
            generator=GeneratorInfo(
                processes=self.processes,
                workers=self.workers,
                connections=self._connections(),
                protocol=self.config.request.protocol,
                locust_version=locust.__version__,
            ),
            stages=stages,
            error=error,
            warnings=[
                *([first_warning] if first_warning else []),
                *(w for stage in stages for w in stage_warnings(stage)),
            ],
        )

    def _connections(self) -> int | None:
        """Connections each generator process kept: gRPC's HTTP/2 connections, or the open loop's HTTP ones."""
        if self.config.grpc:
            return self.config.grpc_channels.connections
        return self.config.connections() if self.config.open_loop else None

    def _measure(self, stage: int, level: float, start_wall: float) -> StageResult:
        deadline = start_wall + (self.warmup_windows * self.window_s) + self.params.max_duration_s + 30
        watched = (self.config.watched_metric, True)
        # The SLO's latency objectives: (metric, corrected or not, percentile, bound in seconds).
        bounds = [
            (o.metric, o.measure == "corrected", o.percentile, parse_duration(o.max)) for o in self.config.objectives
        ]
        # One cumulative histogram per distribution watched (by the stopping rule or an objective).
        cumulative = {key: LatencyHistogram() for key in [watched, *((m, c) for m, c, _, _ in bounds)]}
        server_readings: dict[int, Counters | str] = {}
        reader = gevent.spawn(self._read_server_at_edges, start_wall, server_readings)
        try:
            windows, decision = self._measure_windows(stage, start_wall, deadline, bounds, cumulative, watched)
        finally:
            reader.kill()
        result = stage_result(self.config, stage, level, start_wall, windows, self.warmup_windows, decision.reason)
        url = self.config.server_metrics_url
        if url and result.tokens is not None:
            first, last = self.warmup_windows, len(windows)
            before = server_readings.get(first, f"{url}: not read when measuring began")
            after = server_readings.get(last) or scrape(url)
            result.tokens.server_check = server_check(url, before, after, result.tokens)
            edges = [server_readings.get(edge, "not read") for edge in range(first, last)] + [after]
            result.tokens.server_load = server_load(edges)
        return result

    def _read_server_at_edges(self, start_wall: float, readings: dict[int, Counters | str]) -> None:
        """The server's counters at every window edge from the end of the warm-up on, so that the
        self-check covers exactly the measured windows, whichever the last one turns out to be."""
        url = self.config.server_metrics_url
        if url is None:
            return
        edge = self.warmup_windows
        while True:
            gevent.sleep(max(0.0, start_wall + edge * self.window_s - time.time()))
            readings[edge] = scrape(url)
            edge += 1

    def _measure_windows(
        self,
        stage: int,
        start_wall: float,
        deadline: float,
        bounds: list[tuple[str, bool, float, float]],
        cumulative: dict[tuple[str, bool], LatencyHistogram],
        watched: tuple[str, bool],
    ) -> tuple[list[Window], Decision]:
        decision = Decision(False, "measuring")
        figures: list[WindowFigures] = []
        windows: list[Window] = []
        seen = -1
        while True:
            gevent.sleep(COLLECT_INTERVAL_S)
            if not self.distributed:
                self._collect_local()
            elif self.worker_failure is not None:
                raise LoadGenError(self.worker_failure)
            until = self.aggregator.complete_until(stage)
            if until > seen:
                # The statistics run once per completed window, not on every poll: in a single-process run
                # this loop shares the event loop with the users, and every millisecond here delays responses.
                windows = self.aggregator.stage_windows(stage, until)
                for window in windows[max(seen + 1, self.warmup_windows) :]:
                    for (metric, corrected), histogram in cumulative.items():
                        histogram.add(window.histogram(metric, corrected))
                    figures.append(self._figures(window))
                self._fail_fast(windows[self.warmup_windows :])
                seen = until
                if figures:
                    measured_s = len(figures) * self.window_s
                    objectives = [
                        (estimate(cumulative[(metric, corrected)], percentile), bound_s)
                        for metric, corrected, percentile, bound_s in bounds
                    ]
                    decision = decide(
                        measured_s,
                        figures,
                        estimate(cumulative[watched], self.config.percentile),
                        self.params,
                        straddling(objectives),
                    )
                self._progress_window(stage, start_wall, windows, cumulative[watched], decision.reason)
                if decision.stop:
                    break
            if time.time() > deadline:
                raise LoadGenError(
                    f"stage {stage}: windows stopped arriving from the load generators "
                    f"(have {until + 1}, {self.sources} source(s)); a worker may have died"
                )
        return windows, decision

    def _progress_window(
        self, stage: int, start_wall: float, windows: list[Window], cumulative: LatencyHistogram, reason: str
    ) -> None:
        measured = windows[self.warmup_windows :]
        self.progress.window(
            stage,
            time.time() - start_wall,
            measured,
            self.window_s,
            cumulative,
            self.config.percentile,
            reason,
            self.config.watched_metric,
        )

    def _figures(self, window: Window) -> WindowFigures:
        errors = sum(window.errors.values())
        watched = window.histogram(self.config.watched_metric)
        latency = watched.value_at_percentile(self.config.percentile) if watched.count else None
        return WindowFigures((window.requests - errors) / self.window_s, latency)

    def _fail_fast(self, measured: list[Window]) -> None:
        """A target that refuses every request of a whole window is down: stop now, not at maxDuration.
        (Timeouts and HTTP errors are answers of a kind; the stage measures them.)"""
        if not measured:
            return
        window = measured[-1]
        connection_errors = sum(n for kind, n in window.errors.items() if _unanswered(kind))
        if window.requests and connection_errors == window.requests:
            kinds = ", ".join(f"{k} x{n}" for k, n in window.errors.most_common(3))
            raise LoadGenError(f"every request of a measured window failed ({kinds}); is the target down?")


def _unanswered(kind: str) -> bool:
    """A failure in which the target did not answer at all (refused or lost connections)."""
    if kind.startswith("gRPC "):
        return target_is_down(kind)
    return not kind.startswith("HTTP") and kind != "timeout" and kind not in ANSWERED_KINDS


# --- preflight and entry points ----------------------------------------------------------------------


def preflight(config: LoadGenConfig) -> Preflight:
    """An unreachable target fails in seconds, not after maxDuration: connect once with a short timeout, then
    send one request (a slow or failing answer only warns: the run measures exactly that). gRPC targets are
    asked more (kaliper.loadgen.grpc_calls.preflight)."""
    generator = Generator(config)
    try:
        socket.create_connection((generator.host, generator.port), timeout=min(generator.timeout_s, 3.0)).close()
    except OSError as exc:
        return Preflight(f"target {config.url} is unreachable: {classify(exc)}: {exc}")
    if generator.generation is not None:
        mismatch = generator.generation.tokenizer_mismatch(config.url, config.request.model_name or "")
        if mismatch:
            return Preflight(mismatch)
    if generator.grpc is not None:
        return grpc_preflight(generator.grpc, config.request.model_name or "", generator.requests[0])
    connection = Connection(generator.host, generator.port, generator.timeout_s, generator.ssl)
    try:
        status = connection.request(generator.requests[0])
        if status >= 400:
            log.warning("the first request failed", status=status, url=config.url + generator.path)
    except Exception as exc:
        log.warning("the first request failed", error=classify(exc), url=config.url + generator.path)
    finally:
        connection.close()
    return Preflight()


def failed_result(config: LoadGenConfig, error: str, processes: int, workers: int) -> LoadTestResult:
    now = datetime.now(UTC)
    return LoadTestResult(
        target=config.url + config.path,
        started_at=now,
        finished_at=now,
        generator=GeneratorInfo(processes=processes, workers=workers, locust_version=locust.__version__),
        error=error,
    )


def run_local(config: LoadGenConfig) -> LoadTestResult:
    """The whole run in this process (one Locust LocalRunner)."""
    checked = preflight(config)
    if checked.problem:
        return failed_result(config, checked.problem, 1, 0)
    environment = Environment(user_classes=[KaliperUser], catch_exceptions=False)
    generator = environment.kaliper_generator = Generator(config)  # type: ignore[attr-defined]
    try:
        generator.start_grpc_clients()
    except LoadGenError as exc:
        return failed_result(config, str(exc), 1, 0)
    environment.create_local_runner()
    try:
        return Controller(config, environment, processes=1, workers=0).run(checked.warning)
    finally:
        generator.close()


def run_master(
    config: LoadGenConfig, expect_workers: int, bind_host: str = "*", bind_port: int = 5557, join_timeout: float = 60
) -> LoadTestResult:
    """Drive `expect_workers` Locust workers (pods or local processes) and merge their windows."""
    checked = preflight(config)
    if checked.problem:
        return failed_result(config, checked.problem, expect_workers, expect_workers)
    environment = Environment(user_classes=[KaliperUser], catch_exceptions=False)
    runner = environment.create_master_runner(bind_host, bind_port)
    deadline = time.monotonic() + join_timeout
    while runner.worker_count < expect_workers:
        if time.monotonic() > deadline:
            runner.quit()
            return failed_result(
                config,
                f"only {runner.worker_count} of {expect_workers} load-generator workers connected "
                f"within {join_timeout:g}s",
                expect_workers,
                expect_workers,
            )
        gevent.sleep(0.1)
    try:
        return Controller(config, environment, processes=expect_workers, workers=expect_workers).run(checked.warning)
    finally:
        runner.quit()


def run_worker(master_host: str, master_port: int) -> None:
    """A Locust worker: gets its generator from the master's stage messages, sends closed windows back."""
    environment = Environment(user_classes=[KaliperUser], catch_exceptions=False)
    runner: WorkerRunner = environment.create_worker_runner(master_host, master_port)
    state: dict[str, Any] = {"generator": None, "until": -1, "failure": None}

    def on_stage(environment: Environment, msg: Any) -> None:  # Locust passes these by keyword
        data = msg.data
        if state["failure"]:
            return
        if state["generator"] is None:
            generator = Generator(LoadGenConfig.model_validate(data["config"]), share=data["share"])
            try:
                generator.start_grpc_clients()
            except LoadGenError as exc:
                state["failure"] = str(exc)
                return
            state["generator"] = environment.kaliper_generator = generator  # type: ignore[attr-defined]
        state["generator"].begin_stage(data["stage"], data["start"], data["level"])
        state["until"] = -1

    def push_windows() -> None:
        while True:
            gevent.sleep(COLLECT_INTERVAL_S)
            generator: Generator | None = state["generator"]
            if state["failure"]:
                # The master ends the run with this worker's reason rather than waiting for its windows.
                runner.send_message(MESSAGE_WINDOWS, {"error": state["failure"]})
                return
            if generator is None:
                continue
            try:
                windows, until = generator.windows.take_closed(time.time())
            except LoadGenError as exc:
                state["failure"] = str(exc)
                continue
            if windows or until != state["until"]:
                runner.send_message(
                    MESSAGE_WINDOWS,
                    {"stage": generator.windows.stage, "until": until, "windows": [w.to_wire() for w in windows]},
                )
                state["until"] = until

    runner.register_message(MESSAGE_STAGE, on_stage)
    pusher = gevent.spawn(push_windows)
    try:
        runner.greenlet.join()
    finally:
        pusher.kill()
        if state["generator"] is not None:
            state["generator"].close()


def run_processes(config: LoadGenConfig, processes: int) -> LoadTestResult:
    """A master here and `processes` worker processes on this machine (Locust's distributed mode)."""
    port = free_port()
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "kaliper.loadgen", "worker", "--master", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # a killed master takes its workers with it
        )
        for _ in range(processes)
    ]
    try:
        return run_master(config, processes, "127.0.0.1", port)
    finally:
        for worker in workers:
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def run(config: LoadGenConfig) -> LoadTestResult:
    """Run the load test as the config asks: in this process, or with worker processes."""
    if config.load.processes > 1:
        return run_processes(config, config.load.processes)
    return run_local(config)


def summarize(result: LoadTestResult) -> str:
    """A short human summary of a results document."""
    lines = [f"target {result.target}"]
    if result.error:
        lines.append(f"ERROR: {result.error}")
    for stage in result.stages:
        unit = "users" if stage.load_model == "closed" else "req/s"
        p = {f.percentile: f for f in stage.latency.percentiles}
        figures = "  ".join(
            f"p{k:g} {p[k].value_ms:.2f}ms" for k in (50, 90, 99) if k in p and p[k].value_ms is not None
        )
        lines.append(
            f"stage {stage.index}: {stage.level:g} {unit}  {stage.requests} requests in {stage.measured_s:g}s  "
            f"{stage.throughput_rps:.1f} ok/s  errors {stage.error_rate:.2%}  {figures}"
        )
        if stage.tokens is not None:
            lines.append("  " + token_summary(stage.tokens))
        lines.append(f"  stopped: {stage.stop_reason}")
        if stage.errors_by_kind:
            lines.append("  errors: " + ", ".join(f"{k} x{n}" for k, n in Counter(stage.errors_by_kind).most_common()))
        if stage.late_sends and stage.late_sends.flagged:
            lines.append(f"  WARNING: {stage.late_sends.reason}")
    return "\n".join(lines)
