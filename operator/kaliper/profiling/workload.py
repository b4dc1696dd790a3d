"""A fitted workload as a ProfileRun's payload and load sections, and the lines that say how well it fits:
written out by `kaliper workload --from-prometheus`, or put in place of payload.prompts.fromPrometheus and
load.fitted when a run is planned.

Pure functions: the fit comes from metrics/workload_query.py.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from kaliper.api.profilerun import BucketShares, FittedWorkload, OpenLoop, ProfileRunSpec, SyntheticPrompts
from kaliper.measure.workload_fit import Bucket, LengthFit, WorkloadFit

# LengthDistribution's bounds (api/profilerun/vocabulary.py).
MOST_TOKENS = 131072


class SectionsError(ValueError):
    """The ProfileRun the sections go into cannot take them."""


def length_section(fit: LengthFit) -> dict[str, Any]:
    """A lognormal of the fitted mean and spread, clamped where the histogram's occupied buckets end."""
    mean = min(max(round(fit.mean), 1), MOST_TOKENS)
    section: dict[str, Any] = {"distribution": "lognormal", "mean": mean, "stddev": round(fit.stddev, 1)}
    section["min"] = min(fit.smallest, mean)
    if fit.largest is not None:
        section["max"] = min(max(fit.largest, mean), MOST_TOKENS)
    return section


def arrival_section(fit: WorkloadFit) -> dict[str, Any]:
    """Open-loop arrivals at the fitted rate: gamma of the fitted burstiness, or Poisson when the burstiness's
    interval holds 1 (the data cannot tell it from Poisson) or could not be fitted."""
    rate = float(f"{fit.rate:.4g}")
    shape = fit.burstiness
    if shape is None or shape.low <= 1 <= shape.high:
        return {"rate": rate, "arrival": "poisson"}
    return {"rate": rate, "arrival": "gamma", "burstiness": float(f"{shape.burstiness:.3g}")}


def prompt_section(fit: WorkloadFit) -> dict[str, Any]:
    synthetic: dict[str, Any] = {
        "inputTokens": length_section(fit.input_tokens),
        "outputTokens": length_section(fit.output_tokens),
    }
    if fit.prefix_hit_share:
        synthetic["sharedPrefixRatio"] = round(min(fit.prefix_hit_share, 1.0), 2)
    return synthetic


def sections(fit: WorkloadFit, tokenizer: dict[str, Any] | None) -> dict[str, Any]:
    """The payload and load sections on their own (`kaliper workload` without --into)."""
    prompts: dict[str, Any] = {"synthetic": prompt_section(fit)}
    if tokenizer is not None:
        prompts["tokenizer"] = tokenizer
    return {"payload": {"prompts": prompts}, "load": {"openLoop": arrival_section(fit)}}


def apply_to(document: dict[str, Any], fit: WorkloadFit, tokenizer: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of a ProfileRun with its prompts and load model replaced by the fitted ones; everything else
    (target, request, SLO, sweep, the load's durations and processes) kept as it was."""
    if document.get("kind") != "ProfileRun" or not isinstance(document.get("spec"), dict):
        raise SectionsError("--into needs a ProfileRun manifest (kind: ProfileRun, with a spec)")
    result = copy.deepcopy(document)
    spec = result["spec"]
    old_prompts = (spec.get("payload") or {}).get("prompts") or {}
    tokenizer = tokenizer or old_prompts.get("tokenizer")
    if tokenizer is None:
        raise SectionsError(
            "the fitted prompts are made with the model's tokenizer: give --tokenizer FILE, or set "
            "spec.payload.prompts.tokenizer in the ProfileRun given to --into"
        )
    payload = {k: v for k, v in (spec.get("payload") or {}).items() if k not in ("inline", "dataset", "tensors")}
    payload["prompts"] = {"synthetic": prompt_section(fit), "tokenizer": tokenizer}
    spec["payload"] = payload
    load = {k: v for k, v in (spec.get("load") or {}).items() if k not in ("closedLoop", "openLoop", "trace")}
    load["openLoop"] = arrival_section(fit)
    spec["load"] = load
    return result


def fit_lines(fit: WorkloadFit) -> list[str]:
    """What was fitted from what, and how well, for the terminal and the written manifest's comments."""
    replicas = f"{fit.replicas} replica{'s' if fit.replicas != 1 else ''}"
    lines = [
        f"{fit.requests:,.0f} requests finished in {fit.window_s:g}s by {{{fit.selector}}} ({replicas}): "
        f"{fit.rate:.4g} requests/s together",
    ]
    shape = fit.burstiness
    if shape is not None:
        verdict = (
            "cannot be told from Poisson: poisson arrivals"
            if shape.low <= 1 <= shape.high
            else ("burstier than Poisson" if shape.high < 1 else "more even than Poisson") + ": gamma arrivals"
        )
        lines.append(
            f"arrivals: burstiness {shape.burstiness:.3g} (95%: {shape.low:.3g}-{shape.high:.3g}) from "
            f"{shape.intervals} intervals of {shape.interval_s:g}s; {verdict}"
        )
        lines.append(f"busiest interval: {shape.busiest_rate:.4g} requests/s")
    for name, length in (("input tokens", fit.input_tokens), ("output tokens", fit.output_tokens)):
        gap, edge = length.largest_gap
        lines.append(
            f"{name}: lognormal, mean {length.mean:.1f}, stddev {length.stddev:.1f} (sigma {length.sigma:.3f}) from "
            f"{length.count:,.0f} requests; the fit's share at or below each bucket edge is within {gap:.1f} points "
            f"of the histogram's" + (f" (largest at {edge:g})" if gap > 0 else "")
        )
        lines.extend(f"  {row}" for row in bucket_rows(length))
    if fit.prefix_hit_share is not None:
        lines.append(
            f"prefix cache: {fit.prefix_hit_share:.1%} of prompt tokens were hits: sharedPrefixRatio "
            f"{round(min(fit.prefix_hit_share, 1.0), 2):g} (a block-aligned share; the prompts share that much)"
        )
    lines.append(
        "lengths are the server's counts (a chat template's tokens included); output lengths are asked as "
        "max_tokens: set request.generation.ignoreEos for the server to generate them all"
    )
    lines.extend(fit.notes)
    return lines


def bucket_rows(length: LengthFit) -> list[str]:
    """The occupied buckets and their neighbours: observed and fitted shares side by side."""
    total = sum(b.observed for b in length.buckets) or 1.0
    rows = [f"{'tokens':>14}  {'observed':>8}  {'fitted':>6}"]
    for bucket in _shown(length):
        if bucket.high is None:
            span = f"over {bucket.low:g}"
        else:  # whole tokens: (20, 50] is 21-50
            span = f"{bucket.low + 1:g}-{bucket.high:g}" if bucket.high > bucket.low + 1 else f"{bucket.high:g}"
        rows.append(f"{span:>14}  {bucket.observed / total:>8.1%}  {bucket.fitted:>6.1%}")
    return rows


def fitted_workload(fit: WorkloadFit, spec: ProfileRunSpec, source: str, end: datetime) -> FittedWorkload:
    """What a run keeps of the fit (status.workload): the prompts in place of payload.prompts.fromPrometheus,
    the arrivals (load.fitted's scale applied) in place of load.fitted."""
    prompts = spec.payload.prompts
    assert prompts is not None and prompts.from_prometheus is not None
    made = SyntheticPrompts.model_validate({**prompt_section(fit), "seed": 0})
    arrivals = None
    if spec.load.fitted is not None:
        section = arrival_section(fit)
        section["rate"] = float(f"{section['rate'] * spec.load.fitted.scale:.4g}")
        if spec.load.fitted.max_connections is not None:
            section["maxConnections"] = spec.load.fitted.max_connections
        arrivals = OpenLoop.model_validate(section)
    lines = [line[:512] for line in fit_lines(fit)][:64]
    return FittedWorkload(
        source=source[:2048],
        fitted_at=end,
        prompts=made,
        open_loop=arrivals,
        fit=lines,
        input_buckets=bucket_shares(fit.input_tokens),
        output_buckets=bucket_shares(fit.output_tokens),
    )


def _shown(length: LengthFit) -> list[Bucket]:
    """The occupied buckets and a neighbour each side: what the tables and the chart show."""
    occupied = [i for i, b in enumerate(length.buckets) if b.observed > 0]
    first, last = max(occupied[0] - 1, 0), min(occupied[-1] + 1, len(length.buckets) - 1)
    return length.buckets[first : last + 1]


def bucket_shares(length: LengthFit) -> list[BucketShares]:
    total = sum(b.observed for b in length.buckets) or 1.0
    return [
        BucketShares(upper=b.high, observed=round(b.observed / total, 4), fitted=round(min(b.fitted, 1.0), 4))
        for b in _shown(length)
    ][:40]


def resolve(spec: ProfileRunSpec, workload: FittedWorkload) -> ProfileRunSpec:
    """The spec every trial runs: the fitted prompts and arrivals in place of what asked for them."""
    prompts = spec.payload.prompts
    assert prompts is not None
    payload = spec.payload.model_copy(
        update={"prompts": prompts.model_copy(update={"from_prometheus": None, "synthetic": workload.prompts})}
    )
    load = spec.load
    if load.fitted is not None:
        load = load.model_copy(update={"fitted": None, "open_loop": workload.open_loop})
    return spec.model_copy(update={"payload": payload, "load": load})
