"""One generator process's state, shared by its users whatever their protocol: the target's address, the
stages it runs (its own recorder and open-loop schedule, or a child process that makes the calls), and what
the protocol's user class prepared once (`prepared`). Imports neither Locust nor gevent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from kaliper.api.units import parse_duration
from kaliper.loadgen.config import LoadGenConfig, request_headers
from kaliper.loadgen.http import build_request
from kaliper.loadgen.recorder import Recorder, Window
from kaliper.loadgen.schedule import Part, Slot


class StageWindows(Protocol):
    """Where a generator process's stages run and its closed windows come from."""

    stage: int

    def begin_stage(self, stage: int, start_wall: float, level: float) -> None: ...

    def take_closed(self, now_wall: float) -> tuple[list[Window], int]: ...

    def begin_drain(self, edge_wall: float, deadline_wall: float) -> None:
        """Measuring ended at `edge_wall`: hold the users, await what was sent before it until `deadline_wall`."""

    def drained(self, now_wall: float) -> Window | None:
        """The drain window once nothing sent before the edge is in flight, or the deadline has passed."""

    def close(self) -> None: ...


class UserClass(Protocol):
    """What a protocol's user class (kaliper.loadgen.pacing.KaliperUser) does once per generator process."""

    records_tokens: bool

    def prepare(self, generator: Generator) -> Any: ...

    def stage_windows(self, generator: Generator) -> StageWindows: ...


class InProcess:
    """Stages run by this process's own users: the recorder they record into and the open-loop schedule
    whose intended send times they claim."""

    def __init__(self, config: LoadGenConfig, part: Part, tokens: bool) -> None:
        self.config, self.part = config, part
        self.recorder = Recorder(
            config.window_s, config.open_loop, tokens=tokens, warmup_s=config.warmup_s, bounds=config.bounds()
        )
        self._slots: Iterator[Slot] | None = None
        self._drain_deadline = 0.0

    @property
    def stage(self) -> int:
        return self.recorder.stage

    def begin_stage(self, stage: int, start_wall: float, level: float) -> None:
        self.recorder.begin_stage(stage, start_wall)
        self._slots = self.config.send_times(level, stage, start_wall, self.part)

    def claim_slot(self) -> Slot | None:
        """The next intended send time (open loop), shared by all users of this process; None once a trace
        replayed once has sent its last request."""
        return next(self._slots, None) if self._slots is not None else None

    def take_closed(self, now_wall: float) -> tuple[list[Window], int]:
        return self.recorder.take_closed(now_wall)

    def begin_drain(self, edge_wall: float, deadline_wall: float) -> None:
        self._slots = None  # an open loop's schedule stops: nothing more is due
        self._drain_deadline = deadline_wall
        self.recorder.begin_drain(edge_wall)

    def drained(self, now_wall: float) -> Window | None:
        pending, _ = self.recorder.drain_pending(now_wall)
        return self.recorder.finish_drain(now_wall) if not pending or now_wall >= self._drain_deadline else None

    def close(self) -> None:
        pass


class Generator:
    """A generator process: its target, its stages, and its protocol's user class with what it prepared."""

    def __init__(self, config: LoadGenConfig, user_class: UserClass, part: Part = (0, 1)) -> None:
        self.config = config
        self.part = part  # this process's part of an open-loop schedule
        where = config.destination
        self.ssl = where.scheme == "https"
        self.host, self.port = where.connect_host, where.port  # what the socket connects to
        self.authority = where.authority  # what the Host header says
        self.path = where.path.rstrip("/") + config.path
        self.timeout_s = parse_duration(config.request.timeout)
        self.think_s = parse_duration(config.load.closed_loop.think_time) if config.load.closed_loop else 0.0
        self.headers = request_headers(config)
        self.in_process = InProcess(config, part, tokens=user_class.records_tokens)
        self.windows: StageWindows = self.in_process
        self.user_class = user_class
        self.prepared: Any = user_class.prepare(self)

    @property
    def recorder(self) -> Recorder:
        return self.in_process.recorder

    def start(self) -> None:
        """Start what the protocol runs beside this process before the first stage (LoadGenError: it could not)."""
        self.windows = self.user_class.stage_windows(self)

    def close(self) -> None:
        self.windows.close()

    def http_request(self, body: bytes) -> bytes:
        """A complete HTTP request for a body, ready to send again and again."""
        return build_request(self.config.request.method, self.authority, self.path, self.headers, body)

    def begin_stage(self, stage: int, start_wall: float, level: float) -> None:
        self.windows.begin_stage(stage, start_wall, level)

    def claim_slot(self) -> Slot | None:
        return self.in_process.claim_slot()
