"""Model servers as local processes: one per replica, each in its own cgroup (a replica is a container)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.units import parse_cpu, parse_duration, parse_quantity
from kaliper.local.cgroups import Cgroup, Limits, group_name
from kaliper.local.proxy import RoundRobinProxy
from kaliper.local.sockets import listens_on
from kaliper.netutil import free_port
from kaliper.processes import dies_with_this_process, wait_or_kill
from kaliper.runtimes import Launch, ServerCommand, grpc_problem, readiness_path, runtime_of

PROBE_TIMEOUT_S = 2.0  # one readiness probe; the deadline is the ModelDeployment's readyTimeout


class ServerError(RuntimeError):
    """A server that could not start or died; carries the tail of its log."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


_TELLING = re.compile(r"error|exception|killed|fatal|refus", re.IGNORECASE)


def telling_line(log_tail: str) -> str:
    """The line of a dead server's log that says why: the last that names an error (a Python traceback ends
    with its exception; pydantic's with a link to its documentation, skipped), else the last line."""
    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("For further information visit"):
            continue
        if _TELLING.search(line):
            return line
    return lines[-1] if lines else ""


def limits_of(spec: ModelDeploymentSpec) -> Limits:
    limits = spec.resources.limits if spec.resources and spec.resources.limits else None
    return Limits(
        cpu_cores=float(parse_cpu(limits.cpu)) if limits and limits.cpu else None,
        memory_bytes=int(parse_quantity(limits.memory)) if limits and limits.memory else None,
    )


def local_problem(spec: ModelDeploymentSpec) -> str | None:
    """Why `kaliper run` cannot start this deployment's servers here, or None."""
    if spec.autoscaling is not None:
        return (
            "autoscaling: a HorizontalPodAutoscaler scales pods on Kubernetes, and `kaliper run` has no autoscaler "
            "to rehearse; apply the manifests with kubectl to run it against the cluster's, or remove autoscaling "
            "(and set replicas) to measure fixed replicas here"
        )
    return runtime_of(spec).local_problem(spec)


def server_command(
    spec: ModelDeploymentSpec,
    model_path: Path,
    model_name: str,
    port: int,
    workdir: Path,
    grpc_port: int | None = None,
    cpus: set[int] | None = None,
    tmpdir: Path | None = None,
) -> ServerCommand:
    """The command of one replica, as its runtime writes it for a local process; the settings files it reads
    are written into `workdir`."""
    runtime = runtime_of(spec)
    problem = local_problem(spec)
    if problem:
        raise ServerError(problem)
    pinned = tuple(sorted(cpus)) if cpus else None
    temporary = str(tmpdir) if tmpdir else None
    launch = Launch(spec, "local", str(model_path), model_name, port, grpc_port, str(workdir), pinned, temporary)
    try:
        built = runtime.command(launch)
    except FileNotFoundError as missing:
        raise ServerError(f"the {spec.runtime.type} runtime needs {missing}") from None
    if built.files:
        workdir.mkdir(parents=True, exist_ok=True)
        for name, text in built.files.items():
            (workdir / name).write_text(text)
    return built


class ServerGroup:
    """The replicas of one configuration: started in cgroups, waited for, stopped, accounted."""

    def __init__(
        self,
        spec: ModelDeploymentSpec,
        model_path: Path,
        model_name: str,
        port: int,
        log_dir: Path,
        limits: bool = True,
        cpus: set[int] | None = None,
    ) -> None:
        self.spec, self.model_path, self.model_name, self.port = spec, model_path, model_name, port
        self.log_dir, self.use_limits, self.cpus = log_dir, limits, cpus
        self.processes: list[subprocess.Popen] = []
        self.groups: list[Cgroup] = []
        self.logs: list[Path] = []
        self.proxy: RoundRobinProxy | None = None
        self.grpc_proxy: RoundRobinProxy | None = None
        self.ports: list[int] = [port]
        self.tmpdirs: list[Path] = []
        """Each replica's temporary folder (short paths under the system's), removed when it stops."""
        self.derived: dict[str, str] = {}
        """Settings the runtime derived from the limits (the first replica's; every replica's are alike)."""
        self.started_at = 0.0
        """When start() began (time.monotonic()): a trial's startup counts from here."""
        # The protocol's gRPC service, for the runtimes that serve it here.
        self.runtime = runtime_of(spec)
        self.grpc_port = free_port() if self.runtime.serves_grpc_locally else None

    def _preexec(self, group: Cgroup | None) -> Callable[[], None]:
        tie_to_this_process = dies_with_this_process()

        def prepare() -> None:
            # First: a server seen in its cgroup is one that a `kaliper run` killed outright takes with it.
            tie_to_this_process()
            if group is not None:
                group.join_in_child()
            if self.cpus:
                os.sched_setaffinity(0, self.cpus)
            os.setsid()

        return prepare

    def start(self) -> ServerGroup:
        self.started_at = time.monotonic()
        problem = self.runtime.local_model_problem(str(self.model_path))
        if problem:
            raise ServerError(problem)
        # Built-in servers share the port (SO_REUSEPORT); other replicas get ports of their own behind a proxy.
        shared = self.runtime.replicas_share_port or self.spec.replicas == 1
        ports = [self.port] * self.spec.replicas if shared else [free_port() for _ in range(self.spec.replicas)]
        self.ports = sorted(set(ports))
        grpc_ports: list[int | None] = [self.grpc_port] * self.spec.replicas
        if not shared:
            self.proxy = RoundRobinProxy(self.port, ports).start()
            if self.grpc_port is not None:
                own = [free_port() for _ in range(self.spec.replicas)]
                self.grpc_proxy = RoundRobinProxy(self.grpc_port, own).start()
                grpc_ports = list(own)
        env = {
            **os.environ,
            "KALIPER_PORT": str(self.port),
            "KALIPER_MODEL_PATH": str(self.model_path),
            "KALIPER_MODEL_NAME": self.model_name,
            "PYTHONUNBUFFERED": "1",
        }
        env.update({e.name: e.value for e in self.spec.env or [] if e.value is not None})
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for replica, port in enumerate(ports):
            self.tmpdirs.append(Path(tempfile.mkdtemp(prefix=f"kaliper-{replica}-")))
            command = server_command(
                self.spec,
                self.model_path,
                self.model_name,
                port,
                self.log_dir / f"workdir-{replica}",
                grpc_ports[replica],
                self.cpus,
                self.tmpdirs[-1],
            )
            self.derived = self.derived or command.derived
            group = None
            if self.use_limits:
                group = Cgroup(group_name(self.model_name, replica), limits_of(self.spec)).create()
                self.groups.append(group)
            log = self.log_dir / f"server-{replica}.log"
            self.logs.append(log)
            with log.open("wb") as out:
                self.processes.append(
                    subprocess.Popen(
                        command.argv(),
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        env={**env, **command.env, "KALIPER_PORT": str(port)},
                        preexec_fn=self._preexec(group),
                    )
                )
        return self

    def _every_replica_listens(self) -> bool:
        """Replicas sharing one port: the port answers once the first listens, so ask the kernel about each
        (its own process, or with cgroups every process of its group: workers it forked)."""
        if len(self.processes) == 1 or len(self.ports) > 1:
            return True
        if self.groups:
            return all(listens_on(group.pids(), self.port) for group in self.groups)
        return all(listens_on([process.pid], self.port) for process in self.processes)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url_for(self, protocol: str) -> str:
        """Where the load goes: the gRPC port for oip-v2-grpc, else the HTTP one."""
        if protocol != "oip-v2-grpc":
            return self.url
        if (problem := grpc_problem(self.spec, "local")) is not None:
            raise ServerError(problem)
        assert self.grpc_port is not None  # the runtime serves gRPC here: a port was chosen for it
        return f"http://127.0.0.1:{self.grpc_port}"

    def wait_ready(self, timeout_s: float | None = None, setting: str = "readiness.readyTimeout") -> float:
        """Seconds from start() until every replica answered its readiness probe; ServerError if one died or
        time ran out (the ModelDeployment's readiness.readyTimeout, unless the caller names its own setting)."""
        timeout_s = timeout_s or parse_duration(self.spec.readiness.ready_timeout)
        started = time.monotonic()
        deadline = started + timeout_s
        path = readiness_path(self.spec)
        waiting = set(self.ports)  # each replica's own port (they share one with SO_REUSEPORT)
        # No retries inside a probe: the loop is the retry, and it checks the processes between probes.
        with httpx.Client(timeout=PROBE_TIMEOUT_S, trust_env=False) as client:  # loopback: never a proxy
            while time.monotonic() < deadline:
                self.check_alive()
                for port in sorted(waiting):
                    try:
                        if client.get(f"http://127.0.0.1:{port}{path}").status_code == 200:
                            waiting.discard(port)
                    except httpx.TransportError:
                        pass  # not listening yet, or busy loading the model
                if not waiting and self._every_replica_listens():
                    return time.monotonic() - self.started_at
                # Every 10 ms at first, up to every 100 ms after 2 s: the startup a trial reports is within a
                # poll of the truth, a small share of it however fast the server (bench/startup.py).
                time.sleep(min(0.1, 0.01 + (time.monotonic() - started) / 20))
        raise ServerError(f"the server was not ready within {timeout_s:g}s ({setting})", self.log_tail())

    def oom_kills(self) -> int:
        return sum(g.sample().oom_kills for g in self.groups)

    def check_alive(self) -> None:
        for replica, process in enumerate(self.processes):
            code = process.poll()
            if code is not None:
                last_line = telling_line(self.log_tail(replica, lines=20))[:400]
                reason = (
                    "OOMKilled: the memory limit is too small for the model"
                    if self.oom_kills()
                    else f"exited with code {code}" + (f": {last_line}" if last_line else "")
                )
                raise ServerError(f"server replica {replica} {reason}", self.log_tail(replica))

    def log_tail(self, replica: int = 0, lines: int = 20) -> str:
        with contextlib.suppress(OSError, IndexError):
            return "\n".join(self.logs[replica].read_text(errors="replace").splitlines()[-lines:])
        return ""

    def stop(self) -> None:
        # Each replica leads its own process group (setsid): the signal reaches the processes it started too
        # (vLLM's engine and workers, MLServer's), as a container's stop does.
        for process in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            wait_or_kill(process, 10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # whatever it started and left behind
        for group in self.groups:
            group.remove()
        for folder in self.tmpdirs:
            shutil.rmtree(folder, ignore_errors=True)  # what the servers left there (vLLM's sockets)
        for proxy in (self.proxy, self.grpc_proxy):
            if proxy is not None:
                proxy.stop()
