"""What every serving runtime says about itself, and the one shape of its command line.

A runtime is one module of this package holding one `Runtime`: its image and ports, its health and metrics
paths, the command line it starts with (built once from a `Launch`, rendered for a pod or for a local
process), what it refuses, what a swept setting means for it, and the gauges and counters its own
Prometheus metrics carry. Nothing outside this package asks for a runtime by name: it asks the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kaliper.api.model_shape import ModelShape
from kaliper.api.modeldeployment import (
    Batching,
    LlmServing,
    ModelDeploymentSpec,
    ModelDeploymentTemplate,
    RuntimeType,
)
from kaliper.runtimes.memory import MemoryNeed

Place = Literal["pod", "local"]
OIP_HEALTH_PATH = "/v2/health/ready"
MODEL_DIR = "/models/source"  # where a pod finds its model (a volume, or a folder an init container fills)


class BuildError(ValueError):
    """A spec that cannot become a running server (a local-only field on Kubernetes, a GPU server without a
    GPU, ...); the message names the field and the fix."""


@dataclass(frozen=True)
class Launch:
    """One replica's place: the values its command line needs, for a pod or for a local process."""

    spec: ModelDeploymentSpec
    place: Place
    model_path: str  # inside the container for a pod, on this machine locally
    served_name: str
    port: int
    grpc_port: int | None = None
    workdir: str | None = None  # local: where a runtime's settings files go
    cpus: tuple[int, ...] | None = None  # local: the CPUs the replica is pinned to, if it is
    tmpdir: str | None = None  # local: a temporary folder of its own, short enough for unix sockets' paths

    @property
    def host(self) -> str:
        return "0.0.0.0" if self.place == "pod" else "127.0.0.1"


@dataclass(frozen=True)
class ServerCommand:
    """A server's command line: the program (None: the image's entrypoint), its arguments, its environment and,
    locally, the settings files it reads from its working folder (name -> text) and the settings the runtime
    derived from the replica's limits (name -> value, said in the trial's report)."""

    program: list[str] | None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    derived: dict[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        """The whole command line of a local process."""
        return [*(self.program or []), *self.args]


@dataclass(frozen=True)
class LoadGauges:
    """A server's gauges of how busy it is (first name found wins, for metrics renamed across versions)."""

    marker: str  # a metric only this server exports
    running: tuple[str, ...]
    waiting: tuple[str, ...]
    kv_cache: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()  # a counter
    # (running average of busy slots per decode call, decode calls): llama.cpp's, averaged since it started.
    busy_slots: tuple[str, str] | None = None
    # (prompt tokens looked up in the prefix cache, of them found there): counters, vLLM's.
    prefix_cache: tuple[str, str] | None = None
    # (seconds requests spent running, seconds they spent queued), each summed over the requests that
    # finished: the _sum of the server's own histograms, whose rise over an interval divided by its length is
    # the time-weighted mean of requests running or queued (Little's law). vLLM's.
    seconds_in_state: tuple[str, str] | None = None


@dataclass(frozen=True)
class WorkloadSeries:
    """A server's series from which the workload it served is fitted (kaliper.metrics.workload_query)."""

    prompt_tokens: str  # a histogram of prompt tokens per finished request
    generation_tokens: str  # a histogram of generated tokens per finished request
    finished_requests: str  # a counter of finished requests
    prefix_cache: tuple[str, str]  # (prompt tokens looked up in the prefix cache, of them found there): counters


@dataclass(frozen=True)
class TokenCounters:
    """A server's counters of the tokens it served, set beside what the generator measured."""

    output_tokens: str  # also the marker: the counter only this server exports
    input_tokens: tuple[str, ...]  # summed; the first must be present
    input_definition: str
    generation_seconds: str | None = None  # seconds from first to last token, summed over requests
    ttft_histogram: str | None = None
    itl_histograms: tuple[str, ...] = ()  # first found wins (renamed across versions)


class Runtime:
    """A serving runtime. Subclasses set the attributes and override the methods that differ."""

    type: RuntimeType
    display_name: str
    version: str = ""  # the pinned server's version, where Kaliper pins one
    image: str | None = None  # its upstream image, pinned; None: Kaliper's own image, or none (custom)
    in_kaliper_image: bool = False  # Kaliper's image carries the server
    http_port: int = 8080
    grpc_port: int | None = None  # the Open Inference Protocol's gRPC service
    serves_grpc_locally: bool = False
    generative: bool = False  # OpenAI-compatible, streaming
    metrics_path: str | None = None  # its own Prometheus metrics on the serving port
    # Its own histogram of each answered request's time in the server, in seconds (the name before _bucket):
    # production's latency, read from Prometheus (kaliper.metrics.production).
    latency_histogram: str | None = None
    shared_memory: bool = False  # needs a /dev/shm larger than a container's 64 MiB
    replicas_share_port: bool = False  # local replicas listen on one port (SO_REUSEPORT)
    onnx_session_threads: bool = False  # runs ONNX sessions with the measured intraOp/interOp settings
    load_gauges: LoadGauges | None = None
    token_counters: TokenCounters | None = None
    # Every flag the pinned server accepts (None: not known here, and passed on as written), and the flags
    # Kaliper writes itself, each with the field that sets it.
    flags: frozenset[str] | None = None
    owned_flags: dict[str, str] = {}

    def health_path(self, spec: ModelDeploymentTemplate) -> str:
        """The readiness probe's path when the spec names none."""
        return OIP_HEALTH_PATH if (spec.runtime.protocol or "oip-v2") == "oip-v2" else "/"

    def command(self, launch: Launch) -> ServerCommand:
        """The command line with the spec's own command and args applied (they replace the program and are
        appended to the arguments, on both paths)."""
        built = self.server_command(launch)
        runtime = launch.spec.runtime
        program = runtime.command or built.program
        return ServerCommand(program, [*built.args, *(runtime.args or [])], built.env, built.files, built.derived)

    def server_command(self, launch: Launch) -> ServerCommand:
        raise NotImplementedError

    def cluster_problem(self, spec: ModelDeploymentSpec, name: str) -> str | None:
        """Why this runtime cannot serve the spec on Kubernetes, or None."""
        return None

    def local_problem(self, spec: ModelDeploymentSpec) -> str | None:
        """Why `kaliper run` cannot start this runtime on this machine, or None."""
        return None

    def local_model_problem(self, path: str) -> str | None:
        """Why the model file on this machine cannot be served, read before a server starts, or None."""
        return None

    def model_shape(self, path: str) -> ModelShape | None:
        """The model's dimensions from its file on this machine (its header), where this runtime estimates
        its memory; None where it does not."""
        return None

    def estimates_memory(self, spec: ModelDeploymentTemplate) -> bool:
        """Whether memory_need estimates this spec's server: only then is its model's header worth reading (the
        operator reads it in a Job)."""
        return False

    def memory_need(self, spec: ModelDeploymentTemplate, shape: ModelShape) -> MemoryNeed | None:
        """The server's memory at its peak, part by part, for the spec's settings (runtime.args included);
        None where this runtime has no estimate."""
        return None

    def args_problem(self, args: list[str]) -> str | None:
        """Why extra command-line arguments (runtime.args, a sweep's engineArgs) cannot go to this server: a flag
        Kaliper sets itself from a field, or one the server does not accept, named; None when they may."""
        for arg in args:
            if not arg.startswith("-") or _number(arg):  # a value, such as q8_0 or -1
                continue
            flag = self.canonical_flag(arg.split("=", 1)[0])
            if flag in self.owned_flags:
                return (
                    f"runtime.args: {flag} is set by Kaliper from {self.owned_flags[flag]}; set (or sweep) that instead"
                )
            if self.flags is not None and flag not in self.flags:
                return f"runtime.args: {flag} is not a flag of {self.display_name} as Kaliper runs it ({self.version})"
        return None

    def canonical_flag(self, flag: str) -> str:
        """A flag as the server's parser reads it (vLLM's takes --max_num_seqs for --max-num-seqs)."""
        return flag

    def request_fit_problem(self, spec: ModelDeploymentTemplate, needed_tokens: int, source: str) -> str | None:
        """Why a generation request of `needed_tokens` (prompt and output; `source` says where that comes from)
        cannot fit the server as configured, or None."""
        return None

    def with_context_size(self, spec: ModelDeploymentTemplate, size: int) -> ModelDeploymentTemplate:
        """The spec with a swept context size (llm.contextSize; the GPU servers' longest sequence)."""
        llm = (spec.llm or LlmServing()).model_copy(update={"context_size": size})
        return spec.model_copy(update={"llm": llm})

    def with_batch_size(self, spec: ModelDeploymentTemplate, size: int) -> ModelDeploymentTemplate:
        """The spec with a swept batch size: requests batched together (1: no batching)."""
        batching = None
        if size > 1:
            batching = (spec.batching or Batching(max_batch_size=size)).model_copy(update={"max_batch_size": size})
        return spec.model_copy(update={"batching": batching})


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
