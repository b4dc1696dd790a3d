"""The controller: drives a run's stages from the process that owns the Locust runner (the local runner, or
the master of a distributed run), merges the closed windows of every generator process, decides when a
stage has measured enough, and writes its results. Nothing here depends on the protocol."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import gevent
import locust
from locust.env import Environment
from locust.runners import MasterRunner

from kaliper.api.units import parse_duration
from kaliper.loadgen import quality
from kaliper.loadgen.config import LoadGenConfig, LoadGenError
from kaliper.loadgen.generator import Generator, StageWindows
from kaliper.loadgen.progress import StageProgress
from kaliper.loadgen.recorder import Aggregator, Window
from kaliper.loadgen.results import merged, stage_result, stage_warnings, token_figures
from kaliper.loadgen.server_metrics import Counters, read_server_at_edges, scrape, server_check, server_load
from kaliper.loadgen.stopping import (
    Decision,
    StoppingParameters,
    WindowFigures,
    decide,
    replay_done,
    target_down,
    undecided,
)
from kaliper.loadgen.tokens import TokenWindow
from kaliper.loadgen.users import user_class_for
from kaliper.log import get_logger
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.judgement import Bound
from kaliper.measure.statistics import estimate
from kaliper.report.schema import GeneratorInfo, LoadTestResult, StageResult, TokenFigures

log = get_logger("kaliper.loadgen")

COLLECT_INTERVAL_S = 0.25
MESSAGE_WINDOWS = "kaliper_windows"
MESSAGE_STAGE = "kaliper_stage"
MESSAGE_DRAIN = "kaliper_drain"
MESSAGE_DRAINED = "kaliper_drained"
# A worker's first message, once its handlers are registered: the master sends no stage before every worker has
# sent it (Locust counts a worker as connected before that, and a stage message it receives then is dropped).
MESSAGE_READY = "kaliper_ready"
DRAIN_POLL_S = 0.05
DRAINED_LATE_S = 10.0  # how much past the grace the master waits for a worker's drain window


class SpawnRateAdvice(logging.Filter):
    """Drops Locust's warning about a spawn rate over 100 users a second: Kaliper starts a stage's users at
    once on purpose (they are all sending before its warm-up ends), which no user asked to be warned about."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "spawn rate is very high" not in record.getMessage()


def quiet_spawn_rate_advice() -> None:
    runners = logging.getLogger("locust.runners")
    if not any(isinstance(f, SpawnRateAdvice) for f in runners.filters):
        runners.addFilter(SpawnRateAdvice())


class Controller:
    """Drives the stages of a run from the process that owns the runner (local or Locust master)."""

    def __init__(self, config: LoadGenConfig, environment: Environment, processes: int, workers: int) -> None:
        quiet_spawn_rate_advice()
        self.config = config
        self.environment = environment
        self.runner = environment.runner
        self.distributed = isinstance(self.runner, MasterRunner)
        self.sources = max(processes, 1) if self.distributed else 1
        self.aggregator = Aggregator(self.sources)
        self.processes, self.workers = processes, workers
        self.window_s = config.window_s
        self.warmup_windows = config.warmup_windows
        stopping = config.stopping
        self.params = StoppingParameters(
            min_duration_s=parse_duration(config.load.min_duration),
            max_duration_s=parse_duration(config.load.max_duration),
            stable_windows=stopping.stable_windows if stopping else None,
            tolerance=stopping.tolerance if stopping else 0.1,
            max_relative_ci_width=stopping.max_relative_ci_width if stopping else 0.05,
        )
        self.replay_s = config.replay_measured_s()  # a trace replayed once: measured to its last send
        self.replay_wait_s = parse_duration(config.request.timeout)  # then its answers awaited this long at most
        self.grace_s = config.graceful_stop_s()
        self.drained: dict[tuple[str, int], Window] = {}  # (source, stage) -> its drain window
        self.worker_failure: str | None = None
        self.target_down: str | None = None  # why the last stage stopped early: the target answered nothing
        if self.distributed:
            self.runner.register_message(MESSAGE_WINDOWS, self._on_windows)
            self.runner.register_message(MESSAGE_DRAINED, self._on_drained)

    def _on_windows(self, environment: Environment, msg: Any) -> None:  # Locust passes these by keyword
        data = msg.data
        if "error" in data:
            self.worker_failure = f"load-generator worker {msg.node_id}: {data['error']}"
            return
        windows = [Window.from_wire(w) for w in data["windows"]]
        self.aggregator.add(msg.node_id, data["stage"], windows, data["until"])

    def _on_drained(self, environment: Environment, msg: Any) -> None:
        self.drained[(msg.node_id, msg.data["stage"])] = Window.from_wire(msg.data["window"])

    def _drain(self, stage: int, edge_wall: float) -> tuple[Window | None, float]:
        """The graceful stop: every source holds its users and awaits the requests it sent before `edge_wall`
        (up to the grace); their drain windows merged, and how long it took."""
        started = time.time()
        deadline = started + self.grace_s
        if not self.distributed:
            generator: Generator = self.environment.kaliper_generator  # type: ignore[attr-defined]
            return drain_here(generator.windows, edge_wall, deadline), time.time() - started
        self.runner.send_message(MESSAGE_DRAIN, {"stage": stage, "edge": edge_wall, "deadline": deadline})
        while len(got := [w for (_, s), w in self.drained.items() if s == stage]) < self.sources:
            if self.worker_failure is not None:
                raise LoadGenError(self.worker_failure)
            if time.time() > deadline + DRAINED_LATE_S:
                raise LoadGenError(
                    f"stage {stage}: {self.sources - len(got)} load generator(s) did not finish their graceful "
                    f"stop within {self.grace_s + DRAINED_LATE_S:g}s; a worker may have died"
                )
            gevent.sleep(DRAIN_POLL_S)
        return merged(got, self.config.open_loop), time.time() - started

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
                    "sources": self.sources,
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
                log.info("stage starting", stage=index, level=level, model=self.config.load_model)
                self.progress.started(
                    index,
                    level,
                    self.config.load_model,
                    self.config.warmup_s,
                    self.params.min_duration_s,
                    self.params.max_duration_s,
                    self.replay_s,
                )
                start_wall = self._begin_stage(index, level)
                stages.append(self._measure(index, level, start_wall))
                log.info("stage done", stage=index, reason=stages[-1].stop_reason)
                self.progress.done(index, stages[-1].stop_reason)
                if self.target_down:
                    raise LoadGenError(f"stage {index} stopped early: {self.target_down}")
        except LoadGenError as exc:
            error = str(exc)
            self.progress.stopped(error)
        finally:
            self.runner.stop()
        answers = None
        if self.config.quality is not None and error is None:  # no load running: scoring shares no clock
            log.info("asking the quality dataset", rows=self.config.quality.rows)
            try:
                answers = quality.ask(self.config)
            except LoadGenError as exc:
                error = str(exc)
        return LoadTestResult(
            target=self.config.target,
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
            quality=answers,
            warnings=[
                *([first_warning] if first_warning else []),
                *(w for stage in stages for w in stage_warnings(stage)),
            ],
        )

    def _connections(self) -> int | None:
        """Connections each generator process kept, as its protocol keeps them."""
        return user_class_for(self.config).connections(self.config)

    def _measure(self, stage: int, level: float, start_wall: float) -> StageResult:
        deadline = start_wall + self.config.warmup_s + self.params.max_duration_s + 30
        watched = (self.config.watched_metric, True)
        bounds = self.config.bounds()  # parsed once
        # One cumulative histogram per distribution watched (by the stopping rule or an objective).
        cumulative = {key: LatencyHistogram() for key in [watched, *((b.metric, b.corrected) for b in bounds)]}
        server_readings: dict[int, Counters | str] = {}
        url, first = self.config.server_metrics_url, self.warmup_windows
        reader = gevent.spawn(read_server_at_edges, url, start_wall, self.window_s, first, server_readings)
        ramp = gevent.spawn(ramp_users, self.runner, start_wall, self.config.user_steps(level) or [])
        try:
            windows, decision = self._measure_windows(stage, start_wall, deadline, bounds, cumulative, watched)
            ramp.kill()
            edge_wall = start_wall + len(windows) * self.window_s  # the end of the last measured window
            drain, drain_s = (None, 0.0) if self.target_down else self._drain(stage, edge_wall)
        finally:
            reader.kill()
            ramp.kill()
        result = stage_result(
            self.config, stage, level, start_wall, windows, self.warmup_windows, decision.reason, drain, drain_s
        )
        if self.config.server_metrics_url and result.tokens is not None:
            check_with_server(self.config, result.tokens, windows, self.warmup_windows, server_readings)
        return result

    def _measure_windows(
        self,
        stage: int,
        start_wall: float,
        deadline: float,
        bounds: list[Bound],
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
                    figures.append(window_figures(self.config, window))
                seen = until
                self.target_down = target_down(windows[self.warmup_windows :], self.window_s)
                if self.target_down:
                    decision = Decision(True, self.target_down)
                    break
                if figures:
                    measured_s = len(figures) * self.window_s
                    objectives = [(b, cumulative[(b.metric, b.corrected)]) for b in bounds]
                    decision = decide(
                        measured_s,
                        figures,
                        estimate(cumulative[watched], self.config.percentile),
                        self.params,
                        undecided(objectives, windows[self.warmup_windows :]),
                    )
                    if self.replay_s is not None and not decision.stop:
                        replayed = windows[self.warmup_windows :]
                        done = replay_done(measured_s, self.replay_s, self.window_s, self.replay_wait_s, replayed)
                        decision = done or decision
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


def ramp_users(runner: Any, start_wall: float, steps: list[tuple[float, int]]) -> None:
    """A closed-loop ramp: the users changed at each step's time (Locust stops the newest first)."""
    for at_s, users in steps:
        gevent.sleep(max(0.0, start_wall + at_s - time.time()))
        runner.start(users, spawn_rate=max(users, 1) * 10)


def drain_here(windows: StageWindows, edge_wall: float, deadline_wall: float) -> Window:
    """A graceful stop in this process: its users held, what they sent before the edge awaited."""
    windows.begin_drain(edge_wall, deadline_wall)
    while (drained := windows.drained(time.time())) is None:
        gevent.sleep(DRAIN_POLL_S)
    return drained


def window_figures(config: LoadGenConfig, window: Window) -> WindowFigures:
    errors = sum(window.errors.values())
    watched = window.histogram(config.watched_metric)
    latency = watched.value_at_percentile(config.percentile) if watched.count else None
    return WindowFigures((window.requests - errors) / config.window_s, latency)


def check_with_server(
    config: LoadGenConfig,
    tokens: TokenFigures,
    windows: list[Window],
    first: int,
    readings: dict[int, Counters | str],
) -> None:
    """The server's own counters over the measured windows beside the generator's over the same time (the
    graceful stop's requests are not in them), and the server's load at each window's edge."""
    url = config.server_metrics_url
    assert url is not None
    last = len(windows)
    before = readings.get(first, f"{url}: not read when measuring began")
    after = readings.get(last) or scrape(url)
    measured = merged(windows[first:], config.open_loop)
    own = token_figures(measured.tokens or TokenWindow(), (last - first) * config.window_s, measured.requests, False)
    tokens.server_check = server_check(url, before, after, own)
    edges = [readings.get(edge, "not read") for edge in range(first, last)] + [after]
    tokens.server_load = server_load(edges, config.window_s)
