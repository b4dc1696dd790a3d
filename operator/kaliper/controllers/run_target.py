"""What a ProfileRun's trials deploy, from its spec.target: nothing (a URL, loaded as it is), a copy of a
ModelDeployment (a trial ModelDeployment, which its own controller serves), or a copy of a workload that
already runs (a Deployment and a Service the run makes itself, kaliper.manifests.workload). The run reads
its target once, when it plans, and keeps a snapshot (run_records): every trial starts from the same one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kaliper.api.modeldeployment import ModelDeploymentSpec, ModelDeploymentTemplate
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.units import parse_duration
from kaliper.controllers import kube
from kaliper.controllers.admission import url_service
from kaliper.controllers.run_records import RunFailed, RunRecords
from kaliper.controllers.settings import SETTINGS
from kaliper.controllers.store import STORE
from kaliper.manifests import workload
from kaliper.manifests.modeldeployment import endpoint
from kaliper.manifests.profilerun import build_trial_deployment, trial_name
from kaliper.profiling.tenancy import TargetHost, target_host


class RunTarget:
    def __init__(self, run: dict[str, Any], spec: ProfileRunSpec, records: RunRecords) -> None:
        self.run, self.spec, self.records = run, spec, records
        self.namespace, self.name = run["metadata"]["namespace"], run["metadata"]["name"]
        self.service: dict[str, Any] | None = None  # a target URL's Service, as the snapshot read it

    def reference(self) -> tuple[str, str, str] | None:
        """(kind, name, the spec field that names it), or None for a URL."""
        target = self.spec.target
        if target.deployment_ref is not None:
            return "ModelDeployment", target.deployment_ref.name, "spec.target.deploymentRef"
        if target.workload_ref is not None:
            return target.workload_ref.kind, target.workload_ref.name, "spec.target.workloadRef"
        return None

    def url(self) -> str | None:
        """The URL a run without a deployment loads, as admission resolved it (a Service by its absolute cluster
        name, an address in its canonical form): never the spelling written in spec.target.url."""
        target = self.url_target()
        return target.load_url(SETTINGS.tenancy.cluster_domain) if target is not None else None

    def url_target(self) -> TargetHost | None:
        """What the target URL's host is, as admission reads it (None: not a URL)."""
        url = self.url_written()
        return target_host(url, self.namespace, SETTINGS.tenancy) if url is not None else None

    def url_written(self) -> str | None:
        return str(self.spec.target.url) if self.reference() is None else None

    def _absent(self, what: str, field: str, now: datetime) -> tuple[None, str]:
        created = datetime.fromisoformat(self.run["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
        if (now - created).total_seconds() > parse_duration(self.spec.ready_timeout):
            raise RunFailed(f"{what} does not exist; create it or fix {field}")
        return None, f"waiting for {what} ({field})"

    def snapshot(self, now: datetime) -> tuple[ModelDeploymentTemplate | None, str | None]:
        """Read the target and keep it: (what its trials vary, None) once it exists, (None, why the run
        waits) until then. Raises RunFailed when it never came within readyTimeout, or cannot be copied, or
        the Service a URL names may not be loaded (admission.url_service)."""
        reference = self.reference()
        if reference is None:
            target = self.url_target()
            if target is not None and target.service is not None:
                self.service = url_service(target, SETTINGS.tenancy)
                if self.service is None:
                    where = "" if target.namespace == self.namespace else f" of namespace {target.namespace}"
                    return self._absent(f"Service {target.service}{where}", "spec.target.url", now)
            self.records.save_target(None)
            return None, None
        kind, name, field = reference
        found = STORE.get(kind, self.namespace, name) or kube.get(kind, self.namespace, name)  # not seen yet
        if found is None:
            return self._absent(f"{kind} {name}", field, now)
        if kind == "ModelDeployment":
            base = ModelDeploymentSpec.model_validate(found["spec"])
            self.records.save_target(base)
            return base, None
        saved = workload.snapshot(found)
        base = self._shape(saved)
        self.records.save_target(None, saved)
        return base, None

    def _shape(self, saved: dict[str, Any]) -> ModelDeploymentTemplate:
        assert self.spec.target.workload_ref is not None
        try:
            return workload.serving_shape(saved, self.spec.target.workload_ref)
        except workload.WorkloadProblem as problem:
            raise RunFailed(str(problem)) from None

    def base(self) -> ModelDeploymentTemplate | None:
        """What the trials vary, from the snapshot the run planned with."""
        saved = self.records.workload()
        if saved is not None:
            return self._shape(saved)
        return self.records.target()

    def container(self) -> str | None:
        """A workload target's serving container (the one its trials vary and its recommendation patches)."""
        saved, ref = self.records.workload(), self.spec.target.workload_ref
        return workload.serving_container(saved, ref)["name"] if saved is not None and ref is not None else None

    def apply_trial(self, index: int, configuration: ModelDeploymentTemplate) -> None:
        saved = self.records.workload()
        if saved is None:
            assert isinstance(configuration, ModelDeploymentSpec)
            kube.apply(build_trial_deployment(self.run, index, configuration))
            return
        assert self.spec.target.workload_ref is not None
        for obj in workload.build_trial_workload(self.run, index, saved, self.spec.target.workload_ref, configuration):
            kube.apply(obj)

    def trial_url(self, index: int, configuration: ModelDeploymentTemplate, protocol: str) -> str:
        """The trial's Service, at its gRPC port for oip-v2-grpc (a workload copy's one port serves both)."""
        if self.spec.target.workload_ref is not None:
            protocol = "oip-v2"
        return endpoint(trial_name(self.name, index), self.namespace, configuration, protocol)

    def delete_trial(self, index: int) -> None:
        """The trial's serving objects: its ModelDeployment (which takes its Deployment and Service along),
        or its copy of the workload and that copy's Service."""
        name = trial_name(self.name, index)
        if self.spec.target.workload_ref is not None:
            kube.delete("Deployment", self.namespace, name)
            kube.delete("Service", self.namespace, name)
        else:
            kube.delete("ModelDeployment", self.namespace, name)
