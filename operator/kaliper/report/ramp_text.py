"""A ramp's segments in words, for the load generator's summary and the profile report alike."""

from __future__ import annotations

from kaliper.report.schema import RampSegment


def segment_text(segment: RampSegment) -> str:
    """One ramp segment in a line: the rate asked, what was answered, the latency, the late sends."""
    figures = "  ".join(
        f"{name} {value:.2f}ms" for name, value in (("p50", segment.p50_ms), ("p99", segment.p99_ms)) if value
    )
    asked = (
        f"{segment.intended_rps:g} req/s" if segment.intended_rps is not None else f"{segment.intended_users:g} users"
    )
    late = f"  late sends {segment.late_sends}" if segment.intended_rps is not None else ""
    return (
        f"ramp {segment.start_s:g}-{segment.start_s + segment.duration_s:g}s: {asked} asked, "
        f"{segment.throughput_rps:.1f} ok/s  errors {segment.errors}  {figures}{late}"
    )
