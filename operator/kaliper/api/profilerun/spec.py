"""The ProfileRun spec (and its template, without a target, for ModelOptimization follow-ups): the parts
of the vocabulary put together under the rules.
"""

from __future__ import annotations

from pydantic import Field

from kaliper.api.base import KaliperModel
from kaliper.api.common import (
    PositiveDuration,
)
from kaliper.api.profilerun.quality import QualityCheck
from kaliper.api.profilerun.rules import TARGET, TEMPLATE, rules_of
from kaliper.api.profilerun.vocabulary import (
    BaselineSource,
    CostModel,
    LoadSpec,
    MetricsSpec,
    Payload,
    ProfileTarget,
    RecommendationSpec,
    ReportSpec,
    RequestSpec,
    SearchSpec,
    SloSpec,
    SweepSpec,
    TtlSpec,
)


class ProfileRunTemplate(KaliperModel):
    """A ProfileRun spec without its target (ModelOptimization follow-ups fill the target in)."""

    request: RequestSpec = Field(default_factory=RequestSpec)
    """How each request is sent."""
    payload: Payload
    """What each request carries."""
    load: LoadSpec
    """The load each trial applies."""
    sweep: SweepSpec | None = None
    """The configurations to try. Default: just the target as it is."""
    search: SearchSpec = Field(default_factory=SearchSpec)
    """How configurations are chosen from the sweep."""
    slo: SloSpec | None = None
    """What a configuration must achieve. Without one, the report has figures but no verdict."""
    quality: QualityCheck | None = None
    """Generation: each configuration's answers to a dataset scored once, apart from the timed load; one whose
    score is shown below the floor is not chosen."""
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)
    """Where resource figures come from."""
    cost: CostModel = Field(default_factory=CostModel)
    """Prices for the cost figures."""
    recommendation: RecommendationSpec = Field(default_factory=RecommendationSpec)
    """How requests and limits are recommended."""
    report: ReportSpec = Field(default_factory=ReportSpec)
    """Which report files to write."""
    ready_timeout: PositiveDuration = "10m"
    """Longest a trial's deployment (or the run's target ModelDeployment) may take to become ready before
    the trial is marked Failed, with the reason (image pull, crash loop, unschedulable, OOM)."""
    trial_timeout: PositiveDuration = "20m"
    """Longest one trial (deploy, become ready, load, collect) may take before it is marked Failed."""
    ttl: TtlSpec | None = None
    """When the finished run is deleted."""
    baseline: BaselineSource | None = None
    """A finished run to compare this one with: for each configuration both measured at the same load, each
    figure better, worse or within the noise, in the report and the status (slo.failIfRegressed gates on it)."""
    fail_if_not_met: bool = False
    """Whether a finished run whose verdict is not Met (NotMet, Inconclusive or Unknown) counts as failed:
    Stalled instead of Ready, which Flux and `kubectl wait` read as failed and Argo CD as Degraded; its phase
    stays Succeeded and its report is kept. The cluster twin of `kaliper run --fail-if-not-met`, which this
    field also turns on. Default false: a run that measured is Ready whatever its verdict."""

    cross_field_rules = rules_of(TEMPLATE)


class ProfileRunSpec(ProfileRunTemplate):
    """A load test of a target over a sweep of configurations, judged against an SLO."""

    target: ProfileTarget
    """What to load."""

    cross_field_rules = (*rules_of(TEMPLATE), *rules_of(TARGET))
    # Enforced by the API server only: every trial of a run is measured against the spec it started with.
    server_only_validations = (
        {"rule": "self == oldSelf", "message": "a ProfileRun's spec cannot change; create a new ProfileRun"},
    )
