"""What a ModelOptimization creates once a model is chosen: a ModelDeployment serving it with the settings it
was measured with, and a ProfileRun of that deployment. Pure builders, the same for `kaliper run` and the
operator; only the chosen model's source differs (a file here, the PVC path there)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kaliper.api.modeldeployment import ModelDeploymentSpec, ModelSource, Threads
from kaliper.api.modeloptimization import (
    ChosenModel,
    FollowUpDeployment,
    FollowUpProfileRun,
    FollowUpStatus,
    ModelOptimizationSpec,
)
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.runtimes import runtime_of

CHOSEN_FILE = "best/model.onnx"  # under the output folder: where the engine puts the chosen model
CHOSEN_GGUF = "best/model.gguf"  # the same for a GGUF model (a llama.cpp quantization)


def chosen_file(spec: ModelOptimizationSpec) -> tuple[str, str]:
    """(path under the output folder, model format) of the chosen model."""
    return (CHOSEN_GGUF, "gguf") if spec.model.framework == "gguf" else (CHOSEN_FILE, "onnx")


def chosen_source(spec: ModelOptimizationSpec, output_folder: Path | None = None) -> ModelSource:
    """The chosen model as a ModelDeployment's source: on the output PVC (both paths; `kaliper run --volume`
    maps the claim to a folder), else the file in `output_folder` on this machine."""
    name = spec.model.source.name
    chosen, format = chosen_file(spec)
    if spec.output.pvc is not None:
        path = f"{spec.output.pvc.path.strip('/')}/{chosen}"
        return ModelSource(pvc={"claimName": spec.output.pvc.claim_name, "path": path}, format=format, name=name)
    assert output_folder is not None, "a chosen model outside a PVC is a local file"
    return ModelSource(file=str(output_folder / chosen), format=format, name=name)


def deployment_spec(follow: FollowUpDeployment, source: ModelSource, chosen: ChosenModel) -> ModelDeploymentSpec:
    """The template with the chosen model; thread counts it was measured with fill the template's threads
    where the template leaves them unset (the built-in server runs inter-op threads in parallel mode, which
    is what a candidate with interOp was measured in)."""
    template = follow.template.model_dump(by_alias=True, exclude_none=True)
    threads = dict(template.get("threads") or {})
    if runtime_of(follow.template).onnx_session_threads:
        if "intraOp" in chosen.settings:
            threads.setdefault("intraOp", int(chosen.settings["intraOp"]))
        if "interOp" in chosen.settings:
            threads.setdefault("interOp", int(chosen.settings["interOp"]))
    if threads:
        template["threads"] = Threads.model_validate(threads).model_dump(by_alias=True, exclude_none=True)
    return ModelDeploymentSpec.model_validate(
        {**template, "model": source.model_dump(by_alias=True, exclude_none=True)}
    )


def profile_run_spec(follow: FollowUpProfileRun, deployment_name: str) -> ProfileRunSpec:
    template = follow.template.model_dump(by_alias=True, exclude_none=True)
    return ProfileRunSpec.model_validate({**template, "target": {"deploymentRef": {"name": deployment_name}}})


@dataclass(frozen=True)
class FollowUps:
    """The follow-ups a ModelOptimization's followUp asks for, built for its chosen model."""

    deployment: tuple[str, ModelDeploymentSpec] | None = None  # (name, spec)
    profile_run: tuple[str, ProfileRunSpec] | None = None

    def status(self) -> FollowUpStatus | None:
        if self.deployment is None:
            return None
        return FollowUpStatus(
            deployment_name=self.deployment[0], profile_run_name=self.profile_run[0] if self.profile_run else None
        )

    def described(self) -> str:
        """ "ModelDeployment iris-best, ProfileRun iris-best-load" (empty without follow-ups)."""
        made = [("ModelDeployment", self.deployment), ("ProfileRun", self.profile_run)]
        return ", ".join(f"{kind} {named[0]}" for kind, named in made if named is not None)


def follow_ups(spec: ModelOptimizationSpec, chosen: ChosenModel, output_folder: Path | None = None) -> FollowUps:
    """What to create for the chosen model (output_folder: where `kaliper run` wrote it, for a model outside
    a PVC)."""
    follow = spec.follow_up
    if follow is None or follow.deployment is None:
        return FollowUps()
    name = follow.deployment.name
    deployment = deployment_spec(follow.deployment, chosen_source(spec, output_folder), chosen)
    run = (follow.profile_run.name, profile_run_spec(follow.profile_run, name)) if follow.profile_run else None
    return FollowUps((name, deployment), run)
