"""A ModelDeployment's autoscaler: the HorizontalPodAutoscaler (autoscaling/v2) the operator makes beside its
Deployment, in the fields and words of the HPA its users already run (minReplicas, maxReplicas, a target
utilisation, behavior). Kaliper makes no autoscaler of its own: a ProfileRun rehearses the cluster's."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from kaliper.api.base import KaliperModel, Rule
from kaliper.api.common import Name


class ScalingPolicy(KaliperModel):
    """How much the autoscaler may change the replicas within a period (HPAScalingPolicy)."""

    type: Literal["Pods", "Percent"]
    """Pods: a number of replicas; Percent: a share of the current replicas."""
    value: Annotated[int, Field(ge=1, le=10000)]
    """How many replicas (Pods) or what percentage of them (Percent)."""
    period_seconds: Annotated[int, Field(ge=1, le=1800)]
    """The window the change is counted over, in seconds (1 to 1800)."""


class ScalingRules(KaliperModel):
    """One direction's behaviour (HPAScalingRules)."""

    stabilization_window_seconds: Annotated[int, Field(ge=0, le=3600)] | None = None
    """How far back the autoscaler looks before changing the replicas, in seconds (HPA's default: 0 to scale
    up, 300 to scale down)."""
    select_policy: Literal["Max", "Min", "Disabled"] | None = None
    """Which policy applies when several do (Max: the largest change); Disabled: never in this direction."""
    policies: Annotated[list[ScalingPolicy], Field(min_length=1, max_length=8)] | None = None
    """The changes allowed per period (HPA's default up: 4 pods or 100% per 15 s; down: 100% per 15 s)."""


class ScalingBehavior(KaliperModel):
    """How fast the autoscaler moves each way (HorizontalPodAutoscalerBehavior)."""

    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


class Autoscaling(KaliperModel):
    """A HorizontalPodAutoscaler the operator makes for the Deployment and owns with it; it sets the replicas
    (spec.replicas is not applied), starting from minReplicas."""

    min_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    """The fewest replicas it keeps, however idle."""
    max_replicas: Annotated[int, Field(ge=1, le=1000)]
    """The most replicas it may run."""
    cpu_utilization: Annotated[int, Field(ge=1, le=1000)] | None = None
    """Target average CPU use, in percent of each replica's resources.requests.cpu (metrics-server's figure)."""
    memory_utilization: Annotated[int, Field(ge=1, le=1000)] | None = None
    """Target average memory use, in percent of each replica's resources.requests.memory."""
    behavior: ScalingBehavior | None = None
    """Scale-up and scale-down policies, copied into the HPA as written."""

    cross_field_rules = (
        Rule(
            cel="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",
            message="minReplicas must not exceed maxReplicas; raise maxReplicas or lower minReplicas",
            check=lambda s: s.min_replicas <= s.max_replicas,
            field_path=".minReplicas",
        ),
        Rule(
            cel="has(self.cpuUtilization) || has(self.memoryUtilization)",
            message="an autoscaler needs a metric to follow: set cpuUtilization (percent of the CPU request, such "
            "as 70) or memoryUtilization",
            check=lambda s: s.cpu_utilization is not None or s.memory_utilization is not None,
        ),
    )


class AutoscalerSettings(KaliperModel):
    """One value of a ProfileRun's sweep.autoscaling axis: settings laid over the target's spec.autoscaling for the
    configurations that try it (each field left out keeps the target's), such as a warm spare (minReplicas 2)
    against a lower utilisation target."""

    name: Name
    """Shown as the configuration's autoscaling parameter, such as warm-spare."""
    min_replicas: Annotated[int, Field(ge=1, le=1000)] | None = None
    """The fewest replicas it keeps (2 or more: a warm spare)."""
    max_replicas: Annotated[int, Field(ge=1, le=1000)] | None = None
    """The most replicas it may run."""
    cpu_utilization: Annotated[int, Field(ge=1, le=1000)] | None = None
    """Target average CPU use, in percent of each replica's CPU request."""
    memory_utilization: Annotated[int, Field(ge=1, le=1000)] | None = None
    """Target average memory use, in percent of each replica's memory request."""
    behavior: ScalingBehavior | None = None
    """Replaces the target's behavior whole."""

    def over(self, base: Autoscaling) -> Autoscaling:
        """The target's autoscaler with these settings (not validated here: the sweep's check validates every
        configuration whole and names the one that breaks a rule)."""
        fields = ("min_replicas", "max_replicas", "cpu_utilization", "memory_utilization", "behavior")
        return base.model_copy(update={f: getattr(self, f) for f in fields if getattr(self, f) is not None})
