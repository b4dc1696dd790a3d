"""gRPC calls off gevent: a process of grpc.aio users beside each Locust generator process that calls gRPC.

Locust patches its processes for gevent. There grpcio's blocking calls cost a hand-off to a thread and back
(0.29x ghz's calls per core, docs/benchmarks.md), and grpc.aio cannot run at all (its channels never connect).
So a generator process that calls gRPC (Locust's local runner, or a worker) starts this module as a child,
`python -m kaliper.loadgen.grpc_process`, which imports neither Locust nor gevent, and keeps the rest of its
job: its Locust users are placeholders, one per user here (an asyncio task), so spawning, stopping and the
spreading of users over workers stay Locust's, as for HTTP. The child records every call into the same
Recorder as an HTTP user would and hands its closed windows back; the parent passes them on as it would
its own (to the controller, or to the master).

Parent and child speak JSON lines. Down the child's stdin: {"config", "part"} first, then {"stage",
"start", "level"} as each stage begins, {"drain", "deadline"} when its measuring ends and {"users"} whenever
Locust's count changes; end of input stops it. Up its stdout: {"ready"} or {"error"} once, then {"stage",
"until", "windows"} as windows close, {"stage", "drained"} when a graceful stop is over, and {"error"} if it
must stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from kaliper.api.units import parse_duration
from kaliper.loadgen.backoff import Backoff
from kaliper.loadgen.config import LoadGenConfig, LoadGenError
from kaliper.loadgen.recorder import Recorder, Window
from kaliper.loadgen.schedule import Part, Slot
from kaliper.measure.cpu import CpuClock
from kaliper.processes import wait_or_kill

HOLD_POLL_S = 0.01  # how often a held user, or a graceful stop, looks again
COLLECT_INTERVAL_S = 0.25  # as often as the Locust processes collect their own windows
CONNECT_TIMEOUT_S = 20.0  # the preflight has just called the target: a connection takes milliseconds
READY_TIMEOUT_S = CONNECT_TIMEOUT_S + 10  # and starting Python and importing grpcio, seconds at most


# --- the parent's side (in the Locust process) -------------------------------------------------------


class GrpcClientProcess:
    """Starts the child, tells it the stages and how many users Locust runs, and collects its windows: it
    stands where an HTTP generator's Recorder stands (`stage`, `take_closed`)."""

    def __init__(self, config: LoadGenConfig, part: Part) -> None:
        from kaliper.processes import dies_with_this_process

        self.stage = -1
        self._window_s = config.window_s
        self._users = 0
        self._windows: list[Window] = []
        self._until = -1
        self._drained: Window | None = None
        self._failure: str | None = None
        self._cpu = CpuClock()  # this process's own part of the generator's CPU
        self._process = subprocess.Popen(
            [sys.executable, "-m", "kaliper.loadgen.grpc_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=dies_with_this_process(),  # its stderr is this process's: its messages land in the same log
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._stdin: IO[bytes] = self._process.stdin
        self._stdout: IO[bytes] = self._process.stdout
        self._send({"config": config.to_wire(), "part": list(part)})
        try:
            first = self._read_line(READY_TIMEOUT_S)
        except EOFError:  # it died before it was ready: its exit code, not a start that timed out
            first = {"error": self._exited()}
        if first is None or "ready" not in first:
            self.close()
            reason = first["error"] if first else f"it did not start within {READY_TIMEOUT_S:g}s"
            raise LoadGenError(f"the gRPC client process could not start: {reason}")
        # A thread here is a greenlet in Locust's patched process; it reads the child's messages as they come.
        threading.Thread(target=self._read_windows, name="grpc-client-windows", daemon=True).start()

    def begin_stage(self, stage: int, start_wall: float, level: float) -> None:
        self.stage, self._windows, self._until, self._drained = stage, [], -1, None
        self._send({"stage": stage, "start": start_wall, "level": level})

    def begin_drain(self, edge_wall: float, deadline_wall: float) -> None:
        self._send({"drain": edge_wall, "deadline": deadline_wall})

    def drained(self, now_wall: float) -> Window | None:
        if self._failure is not None:
            raise LoadGenError(self._failure)
        return self._drained

    def user_started(self) -> None:
        self._users += 1
        self._send({"users": self._users})

    def user_stopped(self) -> None:
        self._users -= 1
        self._send({"users": self._users})

    def take_closed(self, now_wall: float) -> tuple[list[Window], int]:
        """The windows the child closed since the last call, and the watermark they close. This process's CPU
        is added to theirs, as used and as available alike: the generator's CPU is both processes', while only
        the child can run out of it, so the share of its capacity the generator used stays the child's."""
        if self._failure is not None:
            raise LoadGenError(self._failure)
        windows, self._windows = self._windows, []
        if windows:
            cpu_s = self._cpu.cores_since_mark(now_wall) * self._window_s
            for window in windows:
                window.cpu_s += cpu_s
                window.capacity_s += cpu_s
        return windows, self._until

    def close(self) -> None:
        """End of input stops the child; it gets a few seconds to close its channels."""
        with contextlib.suppress(OSError):
            self._stdin.close()
        wait_or_kill(self._process, 5)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._stdin.write(json.dumps(message).encode() + b"\n")
            self._stdin.flush()
        except (BrokenPipeError, ValueError):
            self._failure = self._failure or self._exited()

    def _read_line(self, timeout_s: float) -> dict[str, Any] | None:
        """The child's next message; None when none came within `timeout_s`. EOFError: its output ended (it
        exited)."""
        result: list[bytes] = []
        reader = threading.Thread(target=lambda: result.append(self._stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not result:
            return None
        if not result[0]:
            raise EOFError
        return json.loads(result[0])

    def _read_windows(self) -> None:
        for line in self._stdout:
            message = json.loads(line)
            if "error" in message:
                self._failure = f"the gRPC client process stopped: {message['error']}"
            elif message["stage"] != self.stage:
                pass  # a straggler from the stage before is dropped
            elif "drained" in message:
                self._drained = Window.from_wire(message["drained"])
            else:
                self._windows += [Window.from_wire(w) for w in message["windows"]]
                self._until = max(self._until, message["until"])
        self._failure = self._failure or self._exited()

    def _exited(self) -> str:
        code = self._process.wait()
        return f"the gRPC client process exited with code {code}; its messages are on the generator's stderr"


# --- the child's side --------------------------------------------------------------------------------


class GrpcUsers:
    """The child's users: asyncio tasks calling ModelInfer on the run's channels, closed or open loop."""

    def __init__(self, config: LoadGenConfig, part: Part) -> None:
        from kaliper.loadgen.grpc_calls import GrpcTarget, grpc_requests, infer
        from kaliper.loadgen.payloads import build_bodies
        from kaliper.serving.oip_grpc import MODEL_INFER

        self.config, self.part = config, part
        self.target = GrpcTarget.for_config(config)
        self.requests = grpc_requests(build_bodies(config.payload, config.seed), config.request.model_name or "")
        self._infer, self._method = infer, MODEL_INFER
        self.recorder = Recorder(config.window_s, config.open_loop, warmup_s=config.warmup_s, bounds=config.bounds())
        self._request_cycle = itertools.cycle(self.requests)
        self._slots: Iterator[Slot] | None = None
        self._channels: list[Any] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.draining: asyncio.Task[None] | None = None  # the graceful stop under way (held: not collected)
        self.failure: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def connect(self) -> None:
        """One channel per connection the config asks for, each connected before the first stage."""
        self._channels = [self.target.aio_channel() for _ in range(self.config.grpc_channels.connections)]
        await asyncio.gather(*(channel.channel_ready() for channel in self._channels))

    def begin_stage(self, stage: int, start_wall: float, level: float) -> None:
        self.recorder.begin_stage(stage, start_wall)
        self._slots = self.config.send_times(level, stage, start_wall, self.part)

    async def drain(self, edge_wall: float, deadline_wall: float, emit: Any) -> None:
        """The graceful stop: hold every user, await what was sent before the edge, hand back the drain."""
        self._slots = None
        recorder, stage = self.recorder, self.recorder.stage
        recorder.begin_drain(edge_wall)
        while recorder.drain_pending(time.time())[0] and time.time() < deadline_wall:
            await asyncio.sleep(HOLD_POLL_S)
        if recorder.stage == stage:
            emit({"stage": stage, "drained": recorder.finish_drain(time.time()).to_wire()})

    def set_users(self, count: int) -> None:
        """As many users as Locust runs placeholders for: new ones are spread over the channels in turn, the
        newest stop first (as Locust stops its own)."""
        while len(self._tasks) < count:
            channel = self._channels[len(self._tasks) % len(self._channels)]
            task = asyncio.create_task(self._user(channel.unary_unary(self._method)))
            task.add_done_callback(self._user_ended)
            self._tasks.append(task)
        while len(self._tasks) > count:
            self._tasks.pop().cancel()

    def _user_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and not self.failure.done():
            self.failure.set_result(f"a user failed: {task.exception()!r}")

    async def _user(self, call: Any) -> None:
        if self.config.open_loop:
            await self._open_loop(call)
        else:
            await self._closed_loop(call)

    async def _closed_loop(self, call: Any) -> None:
        recorder, target = self.recorder, self.target
        closed_loop = self.config.load.closed_loop
        think_s = parse_duration(closed_loop.think_time) if closed_loop else 0.0
        clock, wall = time.perf_counter, time.time
        backoff, me, waited_s, waited_from = Backoff(), object(), 0.0, 0.0
        while True:
            while recorder.holding:  # measuring has ended: nothing starts until the next stage
                await asyncio.sleep(HOLD_POLL_S)
            if ahead_s := recorder.until_start(wall()):
                await asyncio.sleep(ahead_s)  # started before the stage begins: its first call is made at it
            raw = next(self._request_cycle)
            start = clock()
            recorder.sending(me)
            try:
                fault, received = await self._infer(call, raw, target.timeout_s, target.metadata)
            finally:  # answered, failed, or the user was cancelled mid-call: no longer in flight
                recorder.answered(me)
            recorder.record(wall(), clock() - start, None, fault, sent=len(raw), received=received)
            if waited_s and fault is None:
                recorder.record_recovered(waited_from, waited_s)
            waited_s = backoff.wait_s(fault is not None)
            if waited_s:
                waited_from = wall()
                recorder.record_wait(waited_s, retry_after=False, at_wall=waited_from)
            if max(waited_s, think_s):
                await asyncio.sleep(max(waited_s, think_s))

    async def _open_loop(self, call: Any) -> None:
        recorder, target = self.recorder, self.target
        clock, me = time.perf_counter, object()
        while True:
            while self._slots is None:
                await asyncio.sleep(0.01)
            slot, _ = next(self._slots)  # (a trace's place in the schedule: gRPC replays no trace)
            claimed = clock()
            if slot > claimed:
                await asyncio.sleep(slot - claimed)
            if recorder.holding:
                continue  # claimed before the stage's end, due after it
            raw = next(self._request_cycle)
            start = clock()
            recorder.sending(me)
            try:
                fault, received = await self._infer(call, raw, target.timeout_s, target.metadata)
            finally:
                recorder.answered(me)
            recorder.record_send(slot, claimed, start, clock(), fault, len(raw), received)

    async def push_windows(self, emit: Any) -> None:
        until = -1
        while True:
            await asyncio.sleep(COLLECT_INTERVAL_S)
            windows, closed = self.recorder.take_closed(time.time())
            if windows or closed != until:
                emit({"stage": self.recorder.stage, "until": closed, "windows": [w.to_wire() for w in windows]})
                until = closed

    async def close(self) -> None:
        self.set_users(0)
        await asyncio.gather(*(channel.close() for channel in self._channels))


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


async def _child() -> None:
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader(limit=1 << 28)  # the first line carries the config, datasets and all
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    first = json.loads(await commands.readline())
    try:
        index, count = first["part"]
        users = GrpcUsers(LoadGenConfig.model_validate(first["config"]), (index, count))
    except Exception as exc:  # whatever stops it is reported to the parent, which says it in the run's error
        _emit({"error": f"{type(exc).__name__}: {exc}"})
        return
    try:
        await asyncio.wait_for(users.connect(), CONNECT_TIMEOUT_S)
    except TimeoutError:
        _emit({"error": f"no HTTP/2 connection to {users.target.address} within {CONNECT_TIMEOUT_S:g}s"})
        return
    _emit({"ready": True})
    pusher = asyncio.create_task(users.push_windows(_emit))
    reading = asyncio.create_task(_obey(commands, users))
    done, _ = await asyncio.wait([reading, pusher, users.failure], return_when=asyncio.FIRST_COMPLETED)
    if users.failure in done:
        _emit({"error": users.failure.result()})
    for task in (reading, pusher):
        task.cancel()
    await users.close()


async def _obey(commands: asyncio.StreamReader, users: GrpcUsers) -> None:
    while line := await commands.readline():
        message = json.loads(line)
        if "users" in message:
            users.set_users(message["users"])
        elif "drain" in message:
            users.draining = asyncio.create_task(users.drain(message["drain"], message["deadline"], _emit))
        else:
            users.begin_stage(message["stage"], message["start"], message["level"])


if __name__ == "__main__":
    asyncio.run(_child())
