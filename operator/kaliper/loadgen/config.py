"""What one load-generator run is told: the target, the request, the payload and the load levels.

Built from the same API models as a ProfileRun (RequestSpec, Payload, LoadSpec), so a setting that is
nonsense there is refused here too, before anything starts.
"""

from __future__ import annotations

import os
from typing import Annotated, Any
from urllib.parse import urlsplit

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
from kaliper.api.profilerun.rules import (
    GENERATION_NEEDS_PROMPTS,
    PROMPTS_NEED_GENERATION,
    SESSIONS_NEED_CHAT,
    TOKEN_FIGURES_NEED_GENERATION,
    streaming_metrics_used,
)
from kaliper.api.units import parse_duration
from kaliper.measure.figures import token_names_text

OIP_INFER_PATH = "/v2/models/{model}/infer"
DEFAULT_PATHS = {"openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions"}


class LoadGenConfig(KaliperModel):
    """One load test: a target URL and a ProfileRun's request, payload and load settings."""

    # The ProfileRun's own rules about its requests and payload, stated once (kaliper.api.profilerun.rules).
    cross_field_rules = (
        GENERATION_NEEDS_PROMPTS,
        PROMPTS_NEED_GENERATION,
        SESSIONS_NEED_CHAT,
        TOKEN_FIGURES_NEED_GENERATION,
    )

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

    @model_validator(mode="after")
    def _levels_fit_the_load_model(self) -> LoadGenConfig:
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
        return self.load.open_loop is not None

    @property
    def stage_levels(self) -> list[float]:
        """Every stage's level, each repeated load.repetitions times in a row."""
        if self.levels:
            levels = list(self.levels)
        elif self.load.closed_loop is not None:
            levels = [float(self.load.closed_loop.concurrency)]
        else:
            assert self.load.open_loop is not None
            levels = [self.load.open_loop.rate]
        return [level for level in levels for _ in range(self.load.repetitions)]

    @property
    def target(self) -> str:
        """The URL each request goes to: the base URL's own path, then the request's path."""
        url = urlsplit(self.url)
        return f"{url.scheme}://{url.netloc}{url.path.rstrip('/')}{self.path}"

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
        assert self.load.open_loop is not None
        if self.grpc:
            return self.grpc_channels.connections * self.grpc_channels.streams_per_connection
        if self.load.open_loop.max_connections:
            return self.load.open_loop.max_connections
        peak = max(self.stage_levels)
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
