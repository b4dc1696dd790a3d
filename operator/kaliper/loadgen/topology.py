"""Where a run's load comes from: this process alone (Locust's local runner), or a master and its workers
(pods, or processes on this machine), each worker a generator process of its own. Every topology runs every
protocol the same way: the protocol's user class is chosen once (kaliper.loadgen.users)."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import gevent
import locust
from locust.env import Environment
from locust.runners import WorkerRunner

from kaliper.loadgen.config import LoadGenConfig, LoadGenError
from kaliper.loadgen.controller import (
    COLLECT_INTERVAL_S,
    DRAIN_POLL_S,
    MESSAGE_DRAIN,
    MESSAGE_DRAINED,
    MESSAGE_READY,
    MESSAGE_STAGE,
    MESSAGE_WINDOWS,
    Controller,
)
from kaliper.loadgen.generator import Generator
from kaliper.loadgen.preflight import Preflight
from kaliper.loadgen.users import every_user_class, user_class_for
from kaliper.netutil import free_port
from kaliper.processes import dies_with_this_process, wait_or_kill
from kaliper.report.schema import GeneratorInfo, LoadTestResult


def preflight(config: LoadGenConfig) -> Preflight:
    """The target checked once before the run, as its protocol's user class checks it."""
    user_class = user_class_for(config)
    return user_class.preflight(Generator(config, user_class))


def failed_result(config: LoadGenConfig, error: str, processes: int, workers: int) -> LoadTestResult:
    now = datetime.now(UTC)
    return LoadTestResult(
        target=config.target,
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
    user_class = user_class_for(config)
    environment = Environment(user_classes=[user_class], catch_exceptions=False)
    generator = environment.kaliper_generator = Generator(config, user_class)  # type: ignore[attr-defined]
    try:
        generator.start()
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
    environment = Environment(user_classes=[user_class_for(config)], catch_exceptions=False)
    runner = environment.create_master_runner(bind_host, bind_port)
    ready: set[str] = set()  # workers whose stage handlers are registered
    runner.register_message(MESSAGE_READY, lambda environment, msg: ready.add(msg.node_id))
    deadline = time.monotonic() + join_timeout
    while len(ready) < expect_workers:
        if time.monotonic() > deadline:
            runner.quit()
            return failed_result(
                config,
                f"only {len(ready)} of {expect_workers} load-generator workers connected and ready "
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
    environment = Environment(user_classes=every_user_class(), catch_exceptions=False)
    runner: WorkerRunner = environment.create_worker_runner(master_host, master_port)
    state: dict[str, Any] = {"generator": None, "until": -1, "failure": None, "draining": None}

    def on_stage(environment: Environment, msg: Any) -> None:  # Locust passes these by keyword
        data = msg.data
        if state["failure"]:
            return
        if state["generator"] is None:
            config = LoadGenConfig.model_validate(data["config"])
            # The master numbers its workers 0..n-1 as they connect: this one's part of the schedule.
            part = (runner.worker_index % data["sources"], data["sources"])
            generator = Generator(config, user_class_for(config), part=part)
            try:
                generator.start()
            except LoadGenError as exc:
                state["failure"] = str(exc)
                return
            state["generator"] = environment.kaliper_generator = generator  # type: ignore[attr-defined]
        state["generator"].begin_stage(data["stage"], data["start"], data["level"])
        state["until"], state["draining"] = -1, None

    def on_drain(environment: Environment, msg: Any) -> None:
        generator: Generator | None = state["generator"]
        if generator is None or state["failure"]:
            return
        generator.windows.begin_drain(msg.data["edge"], msg.data["deadline"])
        state["draining"] = msg.data["stage"]
        gevent.spawn(send_drained, generator, msg.data["stage"])

    def send_drained(generator: Generator, stage: int) -> None:
        while state["draining"] == stage and not state["failure"]:
            try:
                drained = generator.windows.drained(time.time())
            except LoadGenError as exc:
                state["failure"] = str(exc)
                return
            if drained is not None:
                runner.send_message(MESSAGE_DRAINED, {"stage": stage, "window": drained.to_wire()})
                return
            gevent.sleep(DRAIN_POLL_S)

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
    runner.register_message(MESSAGE_DRAIN, on_drain)
    runner.send_message(MESSAGE_READY, None)
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
            preexec_fn=dies_with_this_process(),  # a killed master takes its workers with it
        )
        for _ in range(processes)
    ]
    try:
        return run_master(config, processes, "127.0.0.1", port)
    finally:
        for worker in workers:
            wait_or_kill(worker, 10)


def run(config: LoadGenConfig) -> LoadTestResult:
    """Run the load test as the config asks: in this process, or with worker processes."""
    if config.load.processes > 1:
        return run_processes(config, config.load.processes)
    return run_local(config)
