"""An autoscaler's rehearsal in words, for the report's text, terminal and HTML alike: the replicas over the load,
each scale-up's stages, the SLO's attainment (window by window, and while scale-ups were under way), what the
replicas held."""

from __future__ import annotations

from kaliper.report.schema import Rehearsal, ReplicaCount, ScaleUp

MOST_WINDOWS = 30  # a long shape's windows are shown in groups, so the attainment line stays readable


def rehearsal_lines(rehearsal: Rehearsal) -> list[str]:
    lines = [f"autoscaler {rehearsal.autoscaler}: replicas {_counts(rehearsal)}"]
    lines += [_scale_up_text(s) for s in rehearsal.scale_ups]
    if rehearsal.attainment is not None:
        lines.append(
            f"SLO attainment {_pct(rehearsal.attainment)} (95% CI {_pct(rehearsal.attainment_ci_low)}-"
            f"{_pct(rehearsal.attainment_ci_high)}); while scaling up, {rehearsal.scaling_missed} of "
            f"{rehearsal.scaling_requests} requests missed it"
        )
    if rehearsal.windows:
        size = -(-len(rehearsal.windows) // MOST_WINDOWS)
        groups = [rehearsal.windows[i : i + size] for i in range(0, len(rehearsal.windows), size)]
        shares = " ".join(
            f"{sum(w.good for w in g) / sum(w.requests for w in g):.0%}{'*' if any(w.scaling for w in g) else ''}"
            for g in groups
        )
        lines.append(f"attainment by window from {_seconds(rehearsal.windows[0].start_s)} (* scaling up): {shares}")
    lines.append(
        f"held {rehearsal.mean_replicas:.2f} replicas on average ({rehearsal.replica_seconds:.0f} replica-seconds, "
        "ready or not, priced)"
    )
    lines += [f"autoscaler warned: {warning}" for warning in rehearsal.warnings]
    return lines


def _counts(rehearsal: Rehearsal) -> str:
    """Each count as ready of desired, with how many had answered where that differs."""

    def count(c: ReplicaCount) -> str:
        serving = f" ({c.serving} serving)" if c.serving is not None and c.serving != c.ready else ""
        return f"{c.ready} ready{serving} of {c.desired} at {_seconds(c.at_s)}"

    return ", ".join(count(c) for c in rehearsal.replicas) or "-"


def _scale_up_text(scale_up: ScaleUp) -> str:
    stages = (
        ("created", scale_up.created_s),
        ("scheduled", scale_up.scheduled_s),
        ("running", scale_up.started_s),
        ("ready", scale_up.ready_s),
        ("first answer", scale_up.first_answer_s),
    )
    steps = ", ".join(f"{word} +{at:.1f} s" if word == "first answer" else f"{word} +{at:.0f} s"
                      for word, at in stages if at is not None)  # fmt: skip
    late = "" if scale_up.ready_s is not None else ", not ready by the end"
    return f"scale-up {scale_up.replica}: asked for at {_seconds(scale_up.decided_at_s)}; {steps}{late}"


def _seconds(at: float) -> str:
    """An instant of the stage, to a tenth of a second (the API server's own are whole seconds)."""
    return f"{at:.1f}".removesuffix(".0") + " s"


def _pct(share: float | None) -> str:
    return f"{share:.1%}" if share is not None else "-"
