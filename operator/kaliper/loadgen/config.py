"""What one load-generator run is told: the target, the request, the payload and the load levels.

Built from the same API models as a ProfileRun (RequestSpec, Payload, LoadSpec), so a setting that is
nonsense there is refused here too, before anything starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, model_validator

from kaliper.api.base import KaliperModel
from kaliper.api.common import HttpUrl
from kaliper.api.profilerun import (
    LLM_PROTOCOLS,
    GenerationSpec,
    GrpcChannels,
    LatencyObjective,
    LoadSpec,
    Payload,
    RequestSpec,
    SloSpec,
    StoppingRule,
)
from kaliper.api.profilerun.rules import LOAD, rules_of, streaming_metrics_used
from kaliper.api.units import parse_duration
from kaliper.destination import Destination, destination
from kaliper.loadgen.payloads import PayloadError
from kaliper.loadgen.schedule import Part, RampSchedule, Slot, stage_send_times, user_steps
from kaliper.loadgen.traces import PlayedTrace, Replay, played_trace, trace_send_times
from kaliper.measure.figures import token_names_text
from kaliper.measure.judgement import Bound

OIP_INFER_PATH = "/v2/models/{model}/infer"
# A stage's end awaits its requests in flight at most this long by default (k6's gracefulStop default), however
# long the request timeout: an LLM's timeout of minutes would otherwise hold every stage that long.
GRACEFUL_STOP_CAP_S = 30.0
DEFAULT_PATHS = {"openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions"}


class _HasLoadAndRequest(Protocol):
    load: LoadSpec
    request: RequestSpec


def graceful_stop_s(run: _HasLoadAndRequest) -> float:
    """How long a stage's end awaits the requests in flight (load.gracefulStop; default the request timeout, at
    most GRACEFUL_STOP_CAP_S): of a load test, or of a ProfileRun's every trial."""
    if run.load.graceful_stop is not None:
        return parse_duration(run.load.graceful_stop)
    return min(parse_duration(run.request.timeout), GRACEFUL_STOP_CAP_S)


class QualityAsk(KaliperModel):
    """The quality dataset to ask after the stages (a ProfileRun's spec.quality, on the trial the plan names)."""

    file: Annotated[str, Field(min_length=1)]
    """JSON lines: {"prompt": "...", "expected": "..."}."""
    rows: Annotated[int, Field(ge=1, le=1000)] = 100
    max_tokens: Annotated[int, Field(ge=1, le=4096)] = 32


class LoadGenConfig(KaliperModel):
    """One load test: a target URL and a ProfileRun's request, payload and load settings."""

    # The ProfileRun's own rules about its requests and payload, stated once (kaliper.api.profilerun.rules).
    cross_field_rules = rules_of(LOAD)

    url: HttpUrl
    """Base URL of the target, such as http://127.0.0.1:8080."""
    request: RequestSpec = Field(default_factory=RequestSpec)
    payload: Payload
    load: LoadSpec
    levels: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1, max_length=64)] | None = None
    """Load levels run one after another in this run (concurrency or rate); default: the level in load."""
    env_headers: dict[str, str] = Field(default_factory=dict)
    """Header name -> environment variable holding its value (how Secret-backed headers reach the pod)."""
    slo_percentile: Annotated[float, Field(gt=0, lt=100)] | None = None
    """The percentile the stopping rule watches; default: load.stopping.percentile, else 99."""
    seed: int | None = None
    """Seed for Poisson arrivals, generated tensors and dataset order."""
    objectives: Annotated[list[LatencyObjective], Field(max_length=8)] = Field(default_factory=list)
    """The SLO's latency objectives: a stable measurement goes on (up to maxDuration) while one's confidence
    interval straddles its bound, so the verdict can be decided."""
    quality: QualityAsk | None = None
    """Ask these rows, one at a time, once the stages are over (kaliper.loadgen.quality)."""

    @model_validator(mode="after")
    def _levels_fit_the_load_model(self) -> LoadGenConfig:
        destination(str(self.url))  # BadUrl (a ValueError): a host no connection could be made to
        if self.levels and self.load.closed_loop is not None and any(v != int(v) for v in self.levels):
            raise ValueError("levels are concurrent users under closedLoop; use whole numbers")
        if self.request.protocol == "oip-v2" and self.request.path is None and not self.request.model_name:
            raise ValueError("oip-v2 requests need request.modelName (or an explicit request.path)")
        if self.grpc and not self.request.model_name:
            raise ValueError("oip-v2-grpc calls name their model: set request.modelName")
        generation = self.request.protocol in LLM_PROTOCOLS
        if generation and not self.request.model_name:
            raise ValueError(f"{self.request.protocol} requests need request.modelName (the body's model field)")
        # The rules a ProfileRun's spec states (cross_field_rules) ask for generation; token figures also need
        # its answers streamed.
        unstreamed = generation and self.request.generation is not None and not self.request.generation.stream
        if unstreamed and streaming_metrics_used(self):
            raise ValueError(
                f"{token_names_text()} are measured on streamed answers: set request.generation.stream true, or "
                "use metric latency"
            )
        return self

    def bounds(self) -> list[Bound]:
        """The SLO's latency objectives, parsed."""
        return [objective.bound() for objective in self.objectives]

    @property
    def slo(self) -> SloSpec | None:
        """The objectives the generator watches, as the ProfileRun's rules read an SLO."""
        return SloSpec(latency=self.objectives) if self.objectives else None

    @property
    def streaming(self) -> bool:
        """Generation requests: each answer is read as it arrives, its tokens timed and counted."""
        return self.request.protocol in LLM_PROTOCOLS

    @property
    def grpc(self) -> bool:
        """Open Inference Protocol calls over gRPC instead of HTTP requests."""
        return self.request.protocol == "oip-v2-grpc"

    @property
    def grpc_channels(self) -> GrpcChannels:
        return self.request.grpc or GrpcChannels()

    @property
    def server_metrics_url(self) -> str | None:
        """The target's metrics endpoint for the self-check (generation requests only)."""
        if not self.streaming:
            return None
        path = (self.request.generation or GenerationSpec()).server_metrics_path
        return f"{str(self.url).rstrip('/')}{path}" if path else None

    @property
    def watched_metric(self) -> str:
        return self.stopping.metric if self.stopping else "latency"

    @property
    def open_loop(self) -> bool:
        """Requests sent on a schedule, a rate's or a trace's (latency from the intended send time)."""
        return self.load.open_loop is not None or self.load.trace is not None

    @property
    def load_model(self) -> Literal["closed", "open", "trace"]:
        if self.load.trace is not None:
            return "trace"
        return "open" if self.load.open_loop is not None else "closed"

    def send_times(self, level: float, stage: int, start_wall: float, part: Part) -> Iterator[Slot] | None:
        """Open loop: this process's part of a stage's intended send times, each with its place in the whole
        schedule (a trace's request); closed loop: None."""
        if self.load.trace is not None:
            return trace_send_times(self.played_trace(), start_wall, part)
        open_loop = self.load.open_loop
        if open_loop is None:
            return None
        burstiness = open_loop.burstiness or 1.0
        ramp = self.ramp_schedule
        times = stage_send_times(level, open_loop.arrival, self.seed, stage, start_wall, burstiness, part, ramp)
        return ((at, None) for at in times)

    def played_trace(self) -> PlayedTrace:
        """The part of payload.prompts.trace that load.trace replays, read once per process."""
        source, replay = self.payload.prompts.trace if self.payload.prompts else None, self.load.trace
        assert source is not None and replay is not None  # the ProfileRun's rules ask for both together
        if source.file is None:
            raise PayloadError("prompts.trace.configMap is read inside the cluster; locally, use file")
        duration = parse_duration(replay.duration) if replay.duration else None
        window = Replay(replay.speedup, parse_duration(replay.start), duration, replay.loop, replay.conversations)
        return played_trace(source.file, source.format, window)

    def graceful_stop_s(self) -> float:
        return graceful_stop_s(self)

    def replay_measured_s(self) -> float | None:
        """A trace replayed once: its measurement up to its last send, in whole windows (at least one); None
        for any other load. (The stage then waits for those answers: stopping.replay_done.)"""
        if self.load.trace is None or self.load.trace.loop:
            return None
        replay_s = self.played_trace().length_s - self.warmup_s
        return max(self.window_s, math.ceil(replay_s / self.window_s - 1e-9) * self.window_s)

    @property
    def ramp_schedule(self) -> RampSchedule | None:
        """The open or closed loop's ramp, in seconds from the stage's start."""
        ramp = self.load.ramp
        if ramp is None:
            return None
        return RampSchedule(
            to=ramp.to,
            length_s=parse_duration(self.load.max_duration),
            warmup_s=self.warmup_s,
            stepped=ramp.shape == "stepped",
            segments=ramp.segments,
        )

    def user_steps(self, level: float) -> list[tuple[float, int]] | None:
        """A closed-loop ramp from `level` users: when the users change, and to how many (schedule.py)."""
        ramp = self.ramp_schedule
        return user_steps(int(level), ramp) if ramp is not None and self.load.closed_loop is not None else None

    @property
    def warmup_s(self) -> float:
        """The warm-up as the stages run it: whole measurement windows."""
        return self.warmup_windows * self.window_s

    @property
    def warmup_windows(self) -> int:
        """The warm-up, in whole measurement windows."""
        return math.ceil(parse_duration(self.load.warmup) / self.window_s)

    @property
    def stage_levels(self) -> list[float]:
        """Every stage's level, each repeated load.repetitions times in a row."""
        if self.levels:
            levels = list(self.levels)
        elif self.load.closed_loop is not None:
            levels = [float(self.load.closed_loop.concurrency)]
        elif self.load.trace is not None:
            levels = [self.load.trace.speedup]
        else:
            assert self.load.open_loop is not None
            levels = [self.load.open_loop.rate]
        return [level for level in levels for _ in range(self.load.repetitions)]

    @property
    def destination(self) -> Destination:
        """Where the requests go, the host read as the socket will read it (kaliper.destination)."""
        return destination(str(self.url))

    @property
    def target(self) -> str:
        """The URL each request goes to: the base URL's own path, then the request's path."""
        where = self.destination
        return where.url().removesuffix(where.path) + where.path.rstrip("/") + self.path

    @property
    def path(self) -> str:
        if self.grpc:
            from kaliper.serving.oip_grpc import MODEL_INFER  # the stubs load only where gRPC is spoken

            return MODEL_INFER  # the method's path on the HTTP/2 connection
        if self.request.path:
            return self.request.path
        if self.request.protocol == "oip-v2":
            return OIP_INFER_PATH.format(model=self.request.model_name)
        return DEFAULT_PATHS.get(self.request.protocol, "/")

    @property
    def stopping(self) -> StoppingRule | None:
        return self.load.stopping

    @property
    def window_s(self) -> float:
        return parse_duration(self.load.stopping.window) if self.load.stopping else 1.0

    @property
    def percentile(self) -> float:
        if self.slo_percentile is not None:
            return self.slo_percentile
        return self.load.stopping.percentile if self.load.stopping else 99.0

    def connections(self) -> int:
        """Open loop: requests that may be in flight at once (each user has one). HTTP: connections to keep,
        by default one per request per second of the highest level (so sends stay on schedule through a
        one-second stall), at least 16 and at most 2000. gRPC: connections x streams per connection."""
        if self.grpc:
            return self.grpc_channels.connections * self.grpc_channels.streams_per_connection
        if self.load.trace is not None:
            # A trace's highest level: the most sends in any one second of it, and with conversations a user
            # for each conversation under way (it holds its connection from its first turn to its last).
            played = self.played_trace()
            wanted = played.peak_per_second() + played.open_sessions_peak()
            return self.load.trace.max_connections or int(min(max(wanted, 16), 2000))
        assert self.load.open_loop is not None
        if self.load.open_loop.max_connections:
            return self.load.open_loop.max_connections
        ramp = self.load.open_loop.ramp
        peak = max([*self.stage_levels, ramp.to if ramp else 0.0])
        return int(min(max(peak, 16), 2000))

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class LoadGenError(RuntimeError):
    """The run cannot go on (unreachable target, lost workers); the message says why."""


def request_headers(config: LoadGenConfig) -> dict[str, str]:
    headers = {"Content-Type": config.payload.content_type, "User-Agent": "kaliper-loadgen"}
    headers.update(config.request.headers or {})
    for header, variable in config.env_headers.items():
        value = os.environ.get(variable)
        if value is None:
            raise LoadGenError(f"header {header} comes from environment variable {variable}, which is not set")
        headers[header] = value
    return headers
