"""Every reason Kaliper writes into a condition or an Event: where it appears, what it means and what to do.

One catalogue: docs/reference/reasons.md is generated from it (`kaliper crds generate`), and tests/test_reasons.py
holds the code to it (every reason a condition, an Event or an optimizer's report can carry is here, and nothing is
here that the code cannot write)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    kinds: tuple[str, ...]
    """The resources it appears on."""
    where: str
    """The condition (with its status) or the Event type that carries it."""
    means: str
    action: str = ""
    """What to do about it; empty when nothing is needed."""


PROFILE_RUN, MODEL_DEPLOYMENT, OPTIMIZATION, CLEANUP = "ProfileRun", "ModelDeployment", "ModelOptimization", "Cleanup"
ALL_KINDS = "every kind"
NO_ACTION_ON_A_FIX = "Read the message: it names the field and the fix. Correct the spec and apply it again."
OPTIMIZER = "Complete=False (phase Failed), from the optimizer Job's report"

REASONS: dict[str, Reason] = {
    # --- every kind ------------------------------------------------------------------------------------------
    "InvalidSpec": Reason(
        (ALL_KINDS,),
        "Complete=False (a ModelDeployment: Ready=False), Stalled=True; a Warning Event",
        "The spec was refused before anything was made: a field's value, or fields that do not go together.",
        NO_ACTION_ON_A_FIX,
    ),
    "StepFailed": Reason(
        (ALL_KINDS,),
        "Warning Event",
        "One of the operator's steps for the object failed (the API server refused a request: RBAC, a webhook, "
        "validation; or a bug) and is retried with a backoff that doubles up to the chart's apiServer.maxRetryBackoff. "
        "Told at the first failure, when the error changes, and every few failures after.",
        "The message quotes the API server's answer. A 403 means the operator's RBAC misses a verb (upgrade the "
        "chart); while the API server itself is away, no Event is written and the steps simply wait.",
    ),
    "StepRecovered": Reason(
        (ALL_KINDS,), "Normal Event", "A step went through after failing; the message counts the failures."
    ),
    "Pending": Reason(
        (ALL_KINDS,),
        "Reconciling=True",
        "The operator has not taken a first step for the object yet.",
        "If it stays: check that the operator runs (`kubectl -n kaliper-system get pods`) and watches this "
        "namespace (the chart's watchNamespaces).",
    ),
    # --- ProfileRun ------------------------------------------------------------------------------------------
    "WaitingForTarget": Reason(
        (PROFILE_RUN,),
        "Progressing=False (phase Pending)",
        "The run's target (its ModelDeployment or Deployment) does not exist or is not ready yet; the run starts "
        "when it is.",
        "Check the target named in spec.target (`kubectl get modeldeployment NAME`); the message says what is missing.",
    ),
    "ReadingModelHeaders": Reason(
        (PROFILE_RUN,),
        "Progressing=False (phase Pending)",
        "A short Job reads the models' headers (layers, context, KV cache) so that configurations that cannot fit "
        "their memory are left out before anything is deployed.",
        "If it stays, look at the run's Job (`kubectl get jobs,pods -l kaliper.dev/profilerun=NAME`): the model "
        "volume or ConfigMap it mounts must exist.",
    ),
    "TrialsRunning": Reason((PROFILE_RUN,), "Progressing=True (phase Running)", "The trials are planned and running."),
    "Started": Reason((PROFILE_RUN,), "Normal Event", "The run planned its trials; the message says how many."),
    "TrialStarted": Reason((PROFILE_RUN,), "Normal Event", "A trial's server is being deployed."),
    "TrialRunning": Reason((PROFILE_RUN,), "Normal Event", "A trial's server is ready and its load generator started."),
    "TrialSucceeded": Reason((PROFILE_RUN,), "Normal Event", "A trial finished with its figures."),
    "TrialSkipped": Reason(
        (PROFILE_RUN,),
        "Normal Event",
        "A trial was not run: the search left it out (it could not win on cost, or its model cannot fit).",
    ),
    "TrialFailed": Reason(
        (PROFILE_RUN,),
        "Warning Event",
        "A trial failed: its server never became ready (the message names the pods' reason: ErrImagePull, "
        "CrashLoopBackOff with the last log lines, OOMKilled, Unschedulable with the scheduler's words), or its "
        "load generator failed.",
        "[Troubleshoot](../how-to/troubleshoot.md#a-trial-failed) says what to do for each pod reason. The other "
        "trials go on.",
    ),
    "MetricsUnavailable": Reason(
        (PROFILE_RUN,),
        "Degraded=True; a Warning Event per trial",
        "A resource figure (CPU, memory, GPU) could not be read from Prometheus: none is configured, it could not "
        "be reached, or its series for the trial's pods were absent. Latency, throughput and the verdicts are "
        "measured regardless.",
        "Set spec.metrics.prometheus.url (or the chart's prometheus.url), and check that this Prometheus scrapes "
        "the kubelets' cAdvisor (and dcgm-exporter for GPUs); the message names each missing figure.",
    ),
    "MetricsAvailable": Reason((PROFILE_RUN,), "Degraded=False", "Every resource figure was measured."),
    "RunFailed": Reason(
        (PROFILE_RUN,),
        "Complete=False, Stalled=True; a Warning Event",
        "The run could not go on: it was refused by the tenancy rules (a destination outside its namespace, a cap "
        "exceeded) or its plan could not be made.",
        NO_ACTION_ON_A_FIX,
    ),
    "TrialsFailed": Reason(
        (PROFILE_RUN,),
        "Complete=False, Stalled=True; a Warning Event",
        "Every trial failed, so there is nothing to compare; the report keeps each trial's reason.",
        "`kaliper report NAME` lists the trials with their reasons; fix the first one's.",
    ),
    "Finished": Reason((PROFILE_RUN,), "Progressing=False", "The run is over; the report is written."),
    "Succeeded": Reason(
        (PROFILE_RUN, OPTIMIZATION),
        "Complete=True, Ready=True; a Normal Event",
        "The run finished with its report (whatever the verdict), or the optimization chose a model.",
    ),
    "SLONotMet": Reason(
        (PROFILE_RUN,),
        "Stalled=True, Ready=False (phase Succeeded)",
        "spec.failIfNotMet is set and no configuration met the SLO: a GitOps sync or `kubectl wait` sees the run "
        "as failed, and its report is kept.",
        "Read the report's rows: each says what held its configuration back.",
    ),
    "Regressed": Reason(
        (PROFILE_RUN,),
        "Stalled=True, Ready=False (phase Succeeded)",
        "slo.failIfRegressed is set and a figure regressed against spec.baseline beyond its tolerance.",
        "The message names the first regression; `kaliper compare` shows them all.",
    ),
    "ManagedByGitOps": Reason(
        (PROFILE_RUN,),
        "Retained=True",
        "The run's spec.ttl passed, but Argo CD or Flux manages the run and would create it again: it is kept.",
        "Remove it from Git to delete it.",
    ),
    "RecommendationApplied": Reason(
        (PROFILE_RUN,),
        "Normal Event",
        "spec.recommendation.updateMode Apply patched the target with the chosen configuration.",
    ),
    "RecommendationNotApplied": Reason(
        (PROFILE_RUN,),
        "Warning Event",
        "The recommendation was not applied: the target no longer exists, or Argo CD or Flux manages it and would "
        "undo the patch.",
        "Commit the recommendation to Git (`kaliper recommend NAME`), or set spec.recommendation.applyToGitOpsManaged.",
    ),
    # --- ModelDeployment -------------------------------------------------------------------------------------
    "ReplicasReady": Reason((MODEL_DEPLOYMENT,), "Ready=True", "Every replica asked for is ready at the endpoint."),
    "ReplicasNotReady": Reason((MODEL_DEPLOYMENT,), "Ready=False", "Fewer replicas are ready than asked for."),
    "RollingOut": Reason(
        (MODEL_DEPLOYMENT,),
        "Progressing=True, Reconciling=True",
        "The Deployment is rolling out (new replicas starting, or its controller has not seen the change yet).",
    ),
    "Settled": Reason((MODEL_DEPLOYMENT,), "Progressing=False, Reconciling=False", "The rollout is over."),
    "RolloutStuck": Reason(
        (MODEL_DEPLOYMENT,),
        "Degraded=True, Stalled=True",
        "The Deployment's rollout exceeded its progress deadline or could not create its pods; the message is its "
        "controller's.",
        "`kubectl describe pods -l kaliper.dev/modeldeployment=NAME` says why (image, memory, scheduling).",
    ),
    "Healthy": Reason((MODEL_DEPLOYMENT,), "Degraded=False, Stalled=False", "The rollout is not stuck."),
    "Holds": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=True; a Normal Event when it changes",
        "At the load each replica serves, no latency percentile of production is outside the profile's interval "
        "(spec.prediction).",
    ),
    "SlowerThanProfiled": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=False; a Warning Event when it changes",
        "A latency percentile's histogram bucket lies wholly above the profile's interval at production's load: "
        "production is slower than the profile said.",
        "What differs from the profile's trials: the node type, the image, the model, neighbours on the node. "
        "Profile again on today's nodes and traffic ([Check a recommendation in production]"
        "(../how-to/check-in-production.md)).",
    ),
    "FasterThanProfiled": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=False; a Warning Event when it changes",
        "A latency percentile lies wholly below the profile's interval, both timed by the server: the "
        "configuration may be larger than the traffic needs.",
        "Profile a smaller configuration at production's load.",
    ),
    "WorkloadShifted": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=False; a Warning Event when it changes",
        "The requests differ from the profile's (for LLMs, the mean prompt or output length moved by more than a "
        "quarter): the profile speaks of other traffic. The score can say it; the checks do not read production's "
        "token counts yet.",
        "Profile the traffic production has now (`kaliper workload --from-prometheus`).",
    ),
    "LoadOutsideProfile": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=Unknown; a Normal Event when it changes",
        "Each replica serves less or more than any load level the profile measured: nothing is extrapolated.",
        "Profile the range of load production runs at.",
    ),
    "NotEnoughTraffic": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=Unknown; a Normal Event when it changes",
        "Too few requests in the window to bound the highest percentile compared (a p99 needs 368).",
        "Lengthen spec.prediction.window.",
    ),
    "ProfileUnavailable": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=Unknown; a Normal Event when it changes",
        "spec.prediction.profile names no report Kaliper can read (the run has not finished, or the ConfigMap is "
        "not a profile report), or the profile has no succeeded trial of the configuration.",
        "Read the message: it names the field.",
    ),
    "Reprofiling": Reason(
        (MODEL_DEPLOYMENT,),
        "Normal Event",
        "The prediction has not held for spec.prediction.reprofile.after: the operator made a ProfileRun (a copy "
        "of the one named, targeting this deployment) to profile it again; the message names it.",
        "Read its recommendation when it finishes (`kaliper report NAME`).",
    ),
    "ReprofileRefused": Reason(
        (MODEL_DEPLOYMENT,),
        "Warning Event",
        "The prediction has not held, and the ProfileRun to copy (spec.prediction.reprofile.run, else "
        "profile.run) is not there.",
        "Name a ProfileRun of this namespace in spec.prediction.reprofile.run.",
    ),
    "ProductionUnavailable": Reason(
        (MODEL_DEPLOYMENT,),
        "PredictionHolds=Unknown; a Normal Event when it changes",
        "Production could not be read: the operator has no Prometheus, Prometheus holds none of the pods' latency "
        "series, or the runtime exports no latency histogram.",
        "Let Prometheus scrape the server pods (the chart's serverPodMonitor.enabled, or the prometheus.io "
        "annotations) and set the chart's prometheus.url.",
    ),
    # --- ModelOptimization -----------------------------------------------------------------------------------
    "JobCreated": Reason(
        (OPTIMIZATION,), "Progressing=True; a Normal Event", "The optimizer Job is made; its progress is the message."
    ),
    "OptimizerFailed": Reason(
        (OPTIMIZATION,),
        "Complete=False, Stalled=True; a Warning Event",
        "The optimizer Job failed without writing its report (killed, out of memory, its image could not start); "
        "the message holds its last log lines.",
        "Raise spec.resources for an OOM kill; the log lines say the rest.",
    ),
    "OptimizationFailed": Reason((OPTIMIZATION,), OPTIMIZER, "The optimizer reported a failure without a reason."),
    "ConversionFailed": Reason(
        (OPTIMIZATION,),
        OPTIMIZER,
        "The scikit-learn or PyTorch model could not be converted to ONNX; the message says why.",
        "Check model.inputs (names, shapes, types) against the model.",
    ),
    "DatasetMissing": Reason(
        (OPTIMIZATION,), OPTIMIZER, "The evaluator's dataset file is not there.", "Mount it where evaluator names it."
    ),
    "DatasetMismatch": Reason(
        (OPTIMIZATION,),
        OPTIMIZER,
        "The evaluator's dataset does not fit the model (rows that are not JSON, inputs of another shape, no prompts).",
        "The message names the line or the input.",
    ),
    "ModelDidNotLoad": Reason(
        (OPTIMIZATION,), OPTIMIZER, "The model could not be read or served.", "The message quotes the loader's error."
    ),
    "NoCandidateMeetsGoals": Reason(
        (OPTIMIZATION,),
        OPTIMIZER,
        "Every candidate fell short of the goals (accuracy floor, latency); the report keeps each with its figures.",
        "Loosen the goals or try other passes; `kaliper report NAME` shows what each candidate reached.",
    ),
    "NoTokens": Reason((OPTIMIZATION,), OPTIMIZER, "llama-server generated no tokens for the evaluation's prompts."),
    "ProviderUnavailable": Reason(
        (OPTIMIZATION,),
        OPTIMIZER,
        "target.executionProviders names one that the image's ONNX Runtime does not have (CUDA without "
        "onnxruntime-gpu).",
        "Use the image's CUDA variant, or remove the provider.",
    ),
    "ToolMissing": Reason(
        (OPTIMIZATION,), OPTIMIZER, "A tool the GGUF passes need (llama-quantize, llama-server) is not in the image."
    ),
    "Interrupted": Reason(
        (OPTIMIZATION,), OPTIMIZER, "The optimizer was stopped; the candidates evaluated so far are kept."
    ),
    "InternalError": Reason(
        (OPTIMIZATION,),
        OPTIMIZER,
        "The optimizer failed unexpectedly; the candidates so far are kept.",
        "A bug: report it with the message.",
    ),
    "Optimized": Reason((OPTIMIZATION,), "Normal Event", "A model was chosen; the message names it."),
    "FollowUpsCreated": Reason(
        (OPTIMIZATION,),
        "Normal Event",
        "The follow-up ModelDeployment and ProfileRun (spec.followUp) were created for the chosen model.",
    ),
    # --- Cleanup ---------------------------------------------------------------------------------------------
    "Removed": Reason(
        (CLEANUP,), "Complete=True; a Normal Event", "A pass removed what matched; the message counts it."
    ),
    "DryRun": Reason(
        (CLEANUP,), "Complete=True; a Normal Event", "spec.dryRun: the message counts what a pass would remove."
    ),
    "Scheduled": Reason((CLEANUP,), "Scheduled=True, Ready=True", "A scheduled Cleanup waits for its next pass."),
    "CannotRun": Reason(
        (CLEANUP,),
        "Complete=False; a Warning Event",
        "The pass could not run: it names other namespaces but lives outside the operator's own namespace.",
        NO_ACTION_ON_A_FIX,
    ),
    "ApiError": Reason(
        (CLEANUP,),
        "Complete=False; a Warning Event",
        "The API server refused a list or a delete; the message quotes it.",
        "A 403: the operator's RBAC misses the verb (upgrade the chart).",
    ),
}


def reasons_reference_markdown() -> str:
    """docs/reference/reasons.md: every reason, by the resource it appears on."""
    lines = [
        "<!-- Generated by `kaliper crds generate` from operator/kaliper/api/reasons.py. Do not edit by hand. -->",
        "",
        "# Conditions and Events",
        "",
        "After this page you can read every reason Kaliper writes into a resource's conditions "
        "(`kubectl get KIND NAME -o yaml`) and Events (`kubectl describe KIND NAME`): what it means and what to do. "
        "The questions people ask most are in [Troubleshooting](../how-to/troubleshoot.md).",
        "",
    ]
    for kind in (ALL_KINDS, PROFILE_RUN, MODEL_DEPLOYMENT, OPTIMIZATION, CLEANUP):
        lines += [
            f"## {kind[0].upper() + kind[1:]}",
            "",
            "| reason | where | what it means | what to do |",
            "|---|---|---|---|",
        ]
        for name, reason in REASONS.items():
            if kind in reason.kinds:
                lines.append(f"| `{name}` | {reason.where} | {reason.means} | {reason.action} |")
        lines.append("")
    return "\n".join(lines)
