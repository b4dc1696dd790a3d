"""`kaliper run`: a ProfileRun on this machine. For each trial the search asks for (a configuration of the
sweep at one load level): start the model server replicas under cgroup limits, wait until ready, run the
load generator while sampling the cgroups, stop the servers; then judge, price, pick the best and recommend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import FittedWorkload, ProfileRunSpec, ReportReference
from kaliper.api.resources import Cleanup, ModelDeployment, ModelOptimization, ProfileRun
from kaliper.api.units import parse_duration
from kaliper.local.baseline import local_baseline
from kaliper.local.sampler import Sampler, summarize
from kaliper.local.servers import ServerError, ServerGroup, local_problem
from kaliper.local.sources import NotOnThisMachine, deployment_model, local_path, model_shapes
from kaliper.log import get_logger
from kaliper.manifests.profilerun import TrialLoad, payload_file
from kaliper.manifests.profilerun import loadgen_config as build_loadgen_config
from kaliper.metrics.nvml import Nvml
from kaliper.metrics.workload_query import WorkloadError, fit_for_run
from kaliper.netutil import free_port
from kaliper.profiling.plan import Configuration, describe, file_sources, trial_protocol
from kaliper.profiling.run_plan import DONE, RunPlan
from kaliper.profiling.schedule import PlannedTrial
from kaliper.profiling.trials import (
    OTHER_WORK_CORES,
    allocated,
    from_load_test,
    judge_trial,
    target_model_name,
    with_resources,
)
from kaliper.report.schema import LoadTestResult, ProfileReport, Startup, TrialReport, TrialResources
from kaliper.report.status import status_from_report

log = get_logger("kaliper.local")


@dataclass(frozen=True)
class RunOptions:
    base_dir: Path  # where relative model and dataset paths are resolved (the manifest's folder)
    output_dir: Path
    limits: bool = True  # False: run without cgroups (only when the user asked)
    volumes: dict[str, Path] = field(default_factory=dict)  # PVC claim name -> the folder standing in for it
    # Cores of other work on the machine that flag a trial; None: not checked (--ignore-other-work)
    other_work_cores: float | None = OTHER_WORK_CORES


ProgressCallback = Callable[[str, int, int], None]  # (what is happening, trials done, trials planned)


def split_cpus(server_cores: float | None) -> tuple[set[int] | None, set[int] | None]:
    """Pin the load generator away from the server when there are cores enough for both (an unlimited
    server is not pinned: it may use every core, as an unlimited container may)."""
    if server_cores is None:
        return None, None
    available = sorted(os.sched_getaffinity(0))
    need = max(1, int(-(-server_cores // 1)))
    if len(available) < need + 1:
        return None, None
    return set(available[-need:]), set(available[:-need])


def ready_limit(spec: ProfileRunSpec, deployment: ModelDeploymentSpec) -> tuple[float, str]:
    """How long a trial's servers may take to become ready, and the setting that says so: the sooner of the
    ProfileRun's readyTimeout and the deployment's readiness.readyTimeout, as on Kubernetes (where the
    ModelDeployment fails at its own timeout and the run gives up on the trial at its own)."""
    run = parse_duration(spec.ready_timeout)
    own = parse_duration(deployment.readiness.ready_timeout)
    if run <= own:
        return run, f"the ProfileRun's readyTimeout, {spec.ready_timeout}"
    return own, f"the ModelDeployment's readiness.readyTimeout, {deployment.readiness.ready_timeout}"


def cluster_only(spec: ProfileRunSpec) -> list[str]:
    """Settings that only mean something on Kubernetes, refused by `kaliper run` rather than ignored."""
    problems = []
    if spec.target.workload_ref is not None:
        problems.append(
            f"spec.target.workloadRef: {spec.target.workload_ref.kind} {spec.target.workload_ref.name} is a workload "
            "on Kubernetes, whose pod template the operator copies; `kaliper run` has no cluster. Apply the "
            "ProfileRun with kubectl, or profile a ModelDeployment of the same model here (target.deploymentRef)"
        )
    if spec.metrics.custom_queries:
        problems.append(
            "spec.metrics.customQueries: PromQL over a trial's pods runs on Kubernetes; `kaliper run` measures the "
            "servers' cgroups and has no pods to query. Remove customQueries for a local run"
        )
    if spec.metrics.dcgm is not None and spec.metrics.dcgm.profiling_metrics:
        problems.append(
            "spec.metrics.dcgm.profilingMetrics: DCGM's profiling fields come from dcgm-exporter on Kubernetes; "
            "locally GPU figures come from NVML, which has none. Remove profilingMetrics for a local run"
        )
    for name, source in file_sources(spec):
        if source.config_map is not None:
            problems.append(
                f"spec.{name}.configMap is read inside the cluster (mounted into the load generator's pod); for "
                f"`kaliper run` give the file on this machine as {name}.file"
            )
    return problems


def secret_variable(secret: str, key: str) -> str:
    """The environment variable that stands in for a Secret key locally: scoring-key/authorization ->
    SCORING_KEY_AUTHORIZATION."""
    return "".join(c if c.isalnum() else "_" for c in f"{secret}_{key}").upper()


def deployment_target(spec: ProfileRunSpec, deployments: dict[str, ModelDeployment]) -> ModelDeploymentSpec | None:
    """The ModelDeployment spec.target.deploymentRef names, among the files given (None: a URL target)."""
    if spec.target.deployment_ref is None:
        return None
    name = spec.target.deployment_ref.name
    if name not in deployments:
        raise NotOnThisMachine(
            f"spec.target.deploymentRef names ModelDeployment {name!r}, which is not among the files given; "
            "pass its manifest to `kaliper run` too"
        )
    return deployments[name].spec


def runnable_here(spec: ProfileRunSpec, configs: list[Configuration]) -> str | None:
    """Why a configuration cannot run on this machine (a model source or setting only Kubernetes has), or None."""
    return next((p for c in configs if c.deployment is not None and (p := local_problem(c.deployment))), None)


def _now() -> datetime:
    return datetime.now(UTC)


def loadgen_config(spec: ProfileRunSpec, trial: TrialLoad, base_dir: Path) -> dict:
    # Locally there is no Secret to read: a header from secret S, key K comes from the variable S_K.
    headers = {
        h.name: secret_variable(h.secret_key_ref.name, h.secret_key_ref.key) for h in spec.request.headers_from or []
    }
    dataset = payload_file(spec)
    dataset_file = str(local_path(dataset.file, base_dir)) if dataset is not None and dataset.file is not None else None
    tokenizer = spec.payload.prompts.tokenizer if spec.payload.prompts else None
    tokenizer_file = str(local_path(tokenizer.file, base_dir)) if tokenizer and tokenizer.file else None
    quality = spec.quality.dataset if spec.quality is not None else None
    quality_file = str(local_path(quality.file, base_dir)) if quality and quality.file else None
    return build_loadgen_config(spec, trial, headers, dataset_file, tokenizer_file, quality_file)


class LocalExecutor:
    def __init__(self, options: RunOptions, progress: ProgressCallback | None = None, nvml: Nvml | None = None) -> None:
        self.options = options
        self.progress = progress or (lambda what, done, total: None)
        self._nvml = nvml

    def nvml(self) -> Nvml:
        """NVML, opened on the first trial that asks for a GPU."""
        if self._nvml is None:
            self._nvml = Nvml()
        return self._nvml

    def run(self, run: ProfileRun, deployments: dict[str, ModelDeployment]) -> ProfileReport:
        """Carry out the run's plan (profiling.run_plan, as the operator does) one trial at a time; each trial
        joins the run as soon as it is done, so an interrupted run keeps it."""
        started = _now()
        problems = cluster_only(run.spec)
        if problems:
            raise NotOnThisMachine("; ".join(problems))
        baseline = local_baseline(run.spec, self.options.base_dir)
        base = deployment_target(run.spec, deployments)
        fitted = self.fitted(run.spec)
        shapes = model_shapes(self.options.base_dir, self.options.volumes)
        plan = RunPlan.admit(run.spec, base, fitted, (run.metadata.name or "profilerun", "t"), runnable_here, shapes)
        model_name = target_model_name(plan.spec, base)
        trials, measured = plan.listed(), dict[int, TrialReport]()
        try:
            while not (step := plan.next(trials, lambda t: measured.get(t.index), _now(), 1)).finished:
                trials = step.trials
                for planned in step.start:
                    finished = sum(t.phase in DONE for t in trials)
                    self.progress(f"trial {planned.index}: {describe(planned.parameters)}", finished, len(trials))
                    began = _now()
                    scores = next(t.scores_quality for t in trials if t.index == planned.index)
                    report, served = self.run_trial(plan.spec, planned, model_name, scores)
                    if served:  # as on Kubernetes: a trial whose servers never came up is not priced or judged
                        report = judge_trial(report, plan.spec, planned.configuration, self.options.other_work_cores)
                    measured[planned.index] = report
                    ended = plan.ended(report, began, _now(), served)
                    trials = [ended if t.index == ended.index else t for t in trials]
            trials, interrupted = step.trials, False
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: the trial under way has stopped its servers and removed its cgroups (its
            # `finally`); what finished is kept and reported.
            interrupted = True
        warnings = []
        if interrupted:
            warnings.append(f"interrupted after {len(measured)} of {len(trials)} trials; the rest were not run")
        if self.options.other_work_cores is None:
            warnings.append(
                "other work on this machine was not checked (--ignore-other-work): a busy machine's trials are "
                "not flagged"
            )
        return plan.conclusion(
            run.metadata.namespace,
            started,
            _now(),
            trials,
            lambda t: measured.get(t.index),
            baseline,
            fitted,
            warnings,
            interrupted,
        )

    def fitted(self, spec: ProfileRunSpec) -> FittedWorkload | None:
        """payload.prompts.fromPrometheus's fit, made once before any trial runs."""
        if spec.payload.prompts is None or spec.payload.prompts.from_prometheus is None:
            return None
        self.progress("fitting the workload from Prometheus", 0, 0)
        try:
            return fit_for_run(spec, time.time())
        except WorkloadError as exc:
            raise ValueError(str(exc)) from exc

    def run_trial(
        self, spec: ProfileRunSpec, planned: PlannedTrial, model_name: str, scores_quality: bool = False
    ) -> tuple[TrialReport, bool]:
        """Start the servers, measure one level, stop them: every trial gets freshly started servers, so
        nothing (a warm cache, a memory peak) carries over from one to the next. Also says whether the
        servers came up."""
        config, index, parameters = planned.configuration, planned.index, planned.parameters
        cores = allocated(config)[0]
        server_cpus, loadgen_cpus = split_cpus(cores or None)
        workdir = self.options.output_dir / f"t{index}"
        servers = None
        up = False
        try:
            if config.deployment is not None:
                servers = ServerGroup(
                    config.deployment,
                    deployment_model(config.deployment, self.options.base_dir, self.options.volumes),
                    model_name,
                    free_port(),
                    workdir,
                    self.options.limits,
                    server_cpus,
                )
                servers.start()
                ready_s = servers.wait_ready(*ready_limit(spec, config.deployment))
                log.debug("server ready", trial=index, seconds=round(ready_s, 2))
                url = servers.url_for(trial_protocol(spec, planned.configuration.parameters))
            else:
                url = str(spec.target.url)
            up = True
            trial = self._run_level(spec, url, model_name, planned, servers, workdir, loadgen_cpus, scores_quality)
            if servers is not None:
                startup = Startup(ready_s=round(ready_s, 2), source="processes")
                trial = trial.model_copy(update={"server_settings": servers.derived, "startup": startup})
            if servers is not None and trial.status == "Succeeded":
                try:
                    servers.check_alive()
                except ServerError as error:  # it died under the load: keep what was measured
                    trial = trial.model_copy(
                        update={"status": "Failed", "message": str(error), "server_log_tail": error.log_tail}
                    )
            return trial, up
        except (ServerError, NotOnThisMachine) as error:
            oom = servers.oom_kills() if servers is not None and servers.groups else 0
            log.warning("trial failed", trial=index, error=str(error))
            trial = TrialReport(
                index=index,
                name=f"t{index}",
                parameters=parameters,
                status="Failed",
                message=str(error),
                server_log_tail=error.log_tail if isinstance(error, ServerError) else None,
                server_settings=servers.derived if servers is not None else {},
                resources=TrialResources(source="cgroup", oom_kills=oom, unavailable=["the server was OOM-killed"])
                if oom
                else None,
            )
            return trial, up
        finally:
            if servers is not None:
                servers.stop()

    def _run_level(
        self,
        spec: ProfileRunSpec,
        url: str,
        model_name: str,
        planned: PlannedTrial,
        servers: ServerGroup | None,
        workdir: Path,
        cpus: set[int] | None,
        scores_quality: bool = False,
    ) -> TrialReport:
        index = planned.index
        replicas = servers.spec.replicas if servers is not None else 1
        protocol = trial_protocol(spec, planned.configuration.parameters)
        trial = TrialLoad(url, model_name, planned.level, replicas, protocol, scores_quality)
        config = loadgen_config(spec, trial, self.options.base_dir)
        workdir.mkdir(parents=True, exist_ok=True)
        config_path = workdir / f"loadgen-{index}.yaml"
        config_path.write_text(yaml.safe_dump(config))
        result_path = workdir / f"loadgen-{index}.json"
        wants_gpu = bool(
            servers and servers.spec.resources and servers.spec.resources.gpu and servers.spec.resources.gpu.count
        )
        nvml = self.nvml() if wants_gpu else None
        gpu_unavailable = nvml.reason if nvml is not None and not nvml.available else ""
        sampler = (
            Sampler(
                servers.groups, parse_duration(spec.metrics.sample_interval), nvml if gpu_unavailable == "" else None
            ).start()
            if servers and servers.groups
            else None
        )
        origin = time.time()
        command = [sys.executable, "-m", "kaliper.loadgen", "run", str(config_path), "-o", str(result_path)]
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        try:
            # An interrupt kills the load generator (subprocess.run does) and stops the sampler; trialTimeout
            # bounds it as the operator bounds its Job.
            process = subprocess.run(
                command, capture_output=True, text=True, preexec_fn=pin, timeout=parse_duration(spec.trial_timeout)
            )
        except subprocess.TimeoutExpired as exc:
            raise ServerError(f"no results within trialTimeout ({spec.trial_timeout})") from exc
        finally:
            points = sampler.stop() if sampler else []
        if not result_path.exists():
            raise ServerError(f"the load generator failed: {process.stderr.strip()[-2000:]}")
        result = LoadTestResult.model_validate_json(result_path.read_text())
        trial = from_load_test(index, f"t{index}", planned.parameters, result, spec.slo)
        if trial.stage is None:
            trial.server_log_tail = servers.log_tail() if servers else None
            return trial
        stage = trial.stage
        start = stage.started_at.timestamp() + stage.warmup_s
        resources = summarize(points, start, start + stage.measured_s, origin, gpu_unavailable) if points else None
        if resources is not None:
            # The server's traffic is the load generator's, counted by it per request on loopback.
            resources.network_receive_bytes = stage.bytes_sent
            resources.network_transmit_bytes = stage.bytes_received
        trial = with_resources(trial, resources)
        if trial.status == "Failed":
            trial.server_log_tail = servers.log_tail() if servers else None
        return trial


def write_report(report: ProfileReport, directory: Path) -> Path:
    """report.json, and status.yaml: the status the operator would write for the same run."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "report.json"
    path.write_text(json.dumps(report.model_dump(by_alias=True, mode="json", exclude_none=True), indent=2) + "\n")
    status = status_from_report(report, ReportReference(path=str(path)))
    (directory / "status.yaml").write_text(yaml.safe_dump(status.to_manifest(), sort_keys=False))
    return path


@dataclass
class Manifests:
    """The documents of the files given to `kaliper run`, by kind, in file order."""

    optimizations: list[ModelOptimization] = field(default_factory=list)
    deployments: dict[str, ModelDeployment] = field(default_factory=dict)
    runs: list[ProfileRun] = field(default_factory=list)
    cleanups: list[str] = field(default_factory=list)  # names: Cleanup acts on cluster objects only
    base_dir: Path = field(default_factory=Path.cwd)


def load_manifests(paths: list[Path]) -> Manifests:
    from kaliper.api.loader import ManifestError, check_document, manifest_files, read_documents

    found = Manifests()
    files = manifest_files(paths)
    for document in (check_document(d) for f in files for d in read_documents(f)):
        if document.problems:
            raise ManifestError(document.label, document.problems)
        resource = document.resource
        if isinstance(resource, ProfileRun):
            found.runs.append(resource)
        elif isinstance(resource, ModelDeployment):
            found.deployments[resource.metadata.name or ""] = resource
        elif isinstance(resource, ModelOptimization):
            found.optimizations.append(resource)
        elif isinstance(resource, Cleanup):
            found.cleanups.append(resource.metadata.name or "")
    if files:
        found.base_dir = files[0].parent
    return found
