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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from kaliper.api.profilerun import ProfileRunSpec, ReportReference
from kaliper.api.resources import ModelDeployment, ProfileRun
from kaliper.api.units import parse_duration
from kaliper.local.sampler import Sampler, summarize
from kaliper.local.servers import ServerError, ServerGroup, model_file
from kaliper.log import get_logger
from kaliper.manifests.profilerun import loadgen_config as build_loadgen_config
from kaliper.metrics.nvml import Nvml
from kaliper.netutil import free_port
from kaliper.profiling.plan import Configuration, configurations
from kaliper.profiling.search import Outcome, Step, order_for_search
from kaliper.profiling.trials import allocated, conclude, hourly_cost, judge
from kaliper.report.schema import LoadTestResult, ProfileReport, StageResult, TrialReport, TrialResources
from kaliper.report.status import status_from_report

log = get_logger("kaliper.local")


@dataclass(frozen=True)
class RunOptions:
    base_dir: Path  # where relative model and dataset paths are resolved (the manifest's folder)
    output_dir: Path
    limits: bool = True  # False: run without cgroups (only when the user asked)


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


def secret_variable(secret: str, key: str) -> str:
    """The environment variable that stands in for a Secret key locally: scoring-key/authorization ->
    SCORING_KEY_AUTHORIZATION."""
    return "".join(c if c.isalnum() else "_" for c in f"{secret}_{key}").upper()


def loadgen_config(spec: ProfileRunSpec, url: str, model_name: str, level: float, base_dir: Path) -> dict:
    # Locally there is no Secret to read: a header from secret S, key K comes from the variable S_K.
    headers = {
        h.name: secret_variable(h.secret_key_ref.name, h.secret_key_ref.key) for h in spec.request.headers_from or []
    }
    dataset = spec.payload.dataset
    dataset_file = None
    if dataset is not None and dataset.file is not None:
        path = Path(dataset.file)
        dataset_file = str(path if path.is_absolute() else base_dir / path)
    return build_loadgen_config(spec, url, model_name, level, headers, dataset_file)


class LocalRuntime:
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
        spec = run.spec
        base = None
        model_name = "model"
        if spec.target.deployment_ref is not None:
            name = spec.target.deployment_ref.name
            if name not in deployments:
                raise ServerError(
                    f"spec.target.deploymentRef names ModelDeployment {name!r}, which is not among the files given; "
                    "pass its manifest to `kaliper run` too"
                )
            base = deployments[name].spec
            model_name = base.model.name or name
        report = ProfileReport(
            name=run.metadata.name or "profilerun",
            namespace=run.metadata.namespace,
            started_at=datetime.now(UTC),
            target=f"ModelDeployment/{spec.target.deployment_ref.name}" if base else str(spec.target.url),
            strategy=spec.search.strategy,
            currency=spec.cost.currency,
        )
        planned = configurations(spec, base)
        total = sum(len(c.levels) for c in planned)
        if spec.search.strategy == "grid" and total > spec.search.max_trials:
            raise ServerError(
                f"the sweep has {total} trials, more than search.maxTrials ({spec.search.max_trials}); "
                "narrow the sweep or raise maxTrials"
            )
        try:
            for step in order_for_search(spec, planned, lambda c: hourly_cost(spec, c)):
                config = step.configuration
                if not step.run:
                    report.trials += [self._skipped(config, level, step.reason) for level in config.levels]
                    continue
                self._run_configuration(spec, step, model_name, report, total)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: the trial under way has stopped its servers and removed its cgroups (its
            # `finally`); what finished is kept and reported.
            report.interrupted = True
            finished = sum(t.status != "Skipped" for t in report.trials)
            report.warnings.append(f"interrupted after {finished} of {total} trials; the rest were not run")
        # Trials the search never reached (optuna explores a sample, or the run was stopped) are reported too.
        done = {t.index for t in report.trials}
        why = "not run: the run was interrupted" if report.interrupted else "not explored by the search"
        for config in planned:
            for level in config.levels:
                if self._trial_index(config, config.levels.index(level)) not in done:
                    report.trials.append(self._skipped(config, level, why))
        report.trials.sort(key=lambda t: t.index)
        conclude(spec, report)
        report.finished_at = datetime.now(UTC)
        return report

    def _trial_index(self, config: Configuration, level_index: int) -> int:
        return config.index * len(config.levels) + level_index

    def _skipped(self, config: Configuration, level: float, reason: str) -> TrialReport:
        index = self._trial_index(config, config.levels.index(level))
        return TrialReport(
            index=index, name=f"t{index}", parameters=self._parameters(config, level), status="Skipped", message=reason
        )

    @staticmethod
    def _parameters(config: Configuration, level: float) -> dict[str, str]:
        return {**config.parameters, config.level_name: f"{level:g}"}

    def _run_configuration(
        self, spec: ProfileRunSpec, step: Step, model_name: str, report: ProfileReport, total: int
    ) -> None:
        """Measure the levels the search asks for; every trial gets a freshly started server, so nothing (a
        warm cache, a memory peak) carries over from one trial to the next. Each trial joins the report as
        soon as it is done, so an interrupted run keeps it."""
        config = step.configuration
        trials: list[TrialReport] = []

        def keep(*done: TrialReport) -> None:
            trials.extend(done)
            report.trials.extend(done)

        verdicts: dict[float, bool] = {}
        label = ", ".join(f"{k}={v}" for k, v in config.parameters.items()) or "the target as it is"
        while (level := step.next_level(verdicts)) is not None:
            index = self._trial_index(config, config.levels.index(level))
            parameters = self._parameters(config, level)
            self.progress(f"trial {index}: {label}, {config.level_name} {level:g}", len(report.trials), total)
            trial = judge(self._run_trial(spec, config, model_name, level, index, parameters), spec, config)
            report.load_generation_s += (trial.stage.warmup_s + trial.stage.measured_s) if trial.stage else 0
            keep(trial)
            verdicts[level] = Outcome.of(trial).passed
            if trial.status == "Failed" and trial.stage is None:
                # The server did not come up: it will not at the other levels either.
                keep(
                    *[
                        replace_index(
                            trial,
                            self._trial_index(config, config.levels.index(other)),
                            self._parameters(config, other),
                        )
                        for other in step.levels
                        if other not in verdicts and other != level
                    ]
                )
                break
        done = {t.index for t in trials}
        keep(
            *[
                self._skipped(config, level, step.skip_reason(level, verdicts))
                for level in step.levels
                if self._trial_index(config, config.levels.index(level)) not in done
            ]
        )
        step.on_done(verdicts, [Outcome.of(t) for t in trials])

    def _run_trial(
        self,
        spec: ProfileRunSpec,
        config: Configuration,
        model_name: str,
        level: float,
        index: int,
        parameters: dict[str, str],
    ) -> TrialReport:
        """Start the servers, measure one level, stop them."""
        cores = allocated(config)[0]
        server_cpus, loadgen_cpus = split_cpus(cores or None)
        workdir = self.options.output_dir / f"t{index}"
        servers = None
        try:
            if config.deployment is not None:
                servers = ServerGroup(
                    config.deployment,
                    model_file(config.deployment, self.options.base_dir),
                    model_name,
                    free_port(),
                    workdir,
                    self.options.limits,
                    server_cpus,
                )
                servers.start()
                ready_s = servers.wait_ready()
                log.debug("server ready", trial=index, seconds=round(ready_s, 2))
                url = servers.url
            else:
                url = str(spec.target.url)
            trial = self._run_level(spec, url, model_name, level, index, parameters, servers, workdir, loadgen_cpus)
            if servers is not None and trial.status == "Succeeded":
                try:
                    servers.check_alive()
                except ServerError as error:  # it died under the load: keep what was measured
                    trial = trial.model_copy(
                        update={"status": "Failed", "message": str(error), "server_log_tail": error.log_tail}
                    )
            return trial
        except ServerError as error:
            oom = servers.oom_kills() if servers is not None and servers.groups else 0
            log.warning("trial failed", trial=index, error=str(error))
            return TrialReport(
                index=index,
                name=f"t{index}",
                parameters=parameters,
                status="Failed",
                message=str(error),
                server_log_tail=error.log_tail,
                resources=TrialResources(source="cgroup", oom_kills=oom, unavailable=["the server was OOM-killed"])
                if oom
                else None,
            )
        finally:
            if servers is not None:
                servers.stop()

    def _run_level(
        self,
        spec: ProfileRunSpec,
        url: str,
        model_name: str,
        level: float,
        index: int,
        parameters: dict[str, str],
        servers: ServerGroup | None,
        workdir: Path,
        cpus: set[int] | None,
    ) -> TrialReport:
        config = loadgen_config(spec, url, model_name, level, self.options.base_dir)
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
            # An interrupt kills the load generator (subprocess.run does) and stops the sampler.
            process = subprocess.run(command, capture_output=True, text=True, preexec_fn=pin)
        finally:
            points = sampler.stop() if sampler else []
        if not result_path.exists():
            raise ServerError(f"the load generator failed: {process.stderr.strip()[-2000:]}")
        result = LoadTestResult.model_validate_json(result_path.read_text())
        name = f"t{index}"
        if result.error or not result.stages:
            return TrialReport(
                index=index,
                name=name,
                parameters=parameters,
                status="Failed",
                message=result.error or "the load generator measured nothing",
                server_log_tail=servers.log_tail() if servers else None,
            )
        stage: StageResult = result.stages[0]
        start = stage.started_at.timestamp() + stage.warmup_s
        resources = summarize(points, start, start + stage.measured_s, origin, gpu_unavailable) if points else None
        if resources is not None:
            # The server's traffic is the load generator's, counted by it per request on loopback.
            resources.network_receive_bytes = stage.bytes_sent
            resources.network_transmit_bytes = stage.bytes_received
        if resources is not None and resources.oom_kills:
            return TrialReport(
                index=index,
                name=name,
                parameters=parameters,
                status="Failed",
                stage=stage,
                resources=resources,
                message="OOMKilled: a replica exceeded its memory limit",
                server_log_tail=servers.log_tail() if servers else None,
            )
        return TrialReport(
            index=index, name=name, parameters=parameters, status="Succeeded", stage=stage, resources=resources
        )


def write_report(report: ProfileReport, directory: Path) -> Path:
    """report.json, and status.yaml: the status the operator would write for the same run."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "report.json"
    path.write_text(json.dumps(report.model_dump(by_alias=True, mode="json", exclude_none=True), indent=2) + "\n")
    status = status_from_report(report, ReportReference(path=str(path)))
    (directory / "status.yaml").write_text(yaml.safe_dump(status.to_manifest(), sort_keys=False))
    return path


def load_manifests(paths: list[Path]) -> tuple[list[ProfileRun], dict[str, ModelDeployment], Path]:
    from kaliper.api.loader import ManifestError, check_document, manifest_files, read_documents

    runs: list[ProfileRun] = []
    deployments: dict[str, ModelDeployment] = {}
    files = manifest_files(paths)
    for document in (check_document(d) for f in files for d in read_documents(f)):
        if document.problems:
            raise ManifestError(document.label, document.problems)
        if isinstance(document.resource, ProfileRun):
            runs.append(document.resource)
        elif isinstance(document.resource, ModelDeployment):
            deployments[document.resource.metadata.name or ""] = document.resource
    base_dir = files[0].parent if files else Path.cwd()
    return runs, deployments, base_dir


def replace_index(trial: TrialReport, index: int, parameters: dict[str, str]) -> TrialReport:
    """The same failure, reported for another level of the same configuration."""
    return trial.model_copy(update={"index": index, "name": f"t{index}", "parameters": parameters})
