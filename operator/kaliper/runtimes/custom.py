"""A server the user brings: an image (on Kubernetes) or a command (locally), on the port it names, speaking
the protocol it names (http-json by default)."""

from __future__ import annotations

from kaliper.api.modeldeployment import ModelDeploymentSpec, ModelDeploymentTemplate
from kaliper.runtimes.base import OIP_HEALTH_PATH, Launch, Runtime, ServerCommand


class Custom(Runtime):
    type = "custom"
    display_name = "a custom server"

    def health_path(self, spec: ModelDeploymentTemplate) -> str:
        return OIP_HEALTH_PATH if spec.runtime.protocol == "oip-v2" else "/"

    def server_command(self, launch: Launch) -> ServerCommand:
        return ServerCommand(None)  # the spec's command and args, or the image's entrypoint

    def cluster_problem(self, spec: ModelDeploymentSpec, name: str) -> str | None:
        if spec.runtime.image is None:
            return "a custom runtime on Kubernetes needs spec.runtime.image"
        return None


RUNTIME = Custom()
