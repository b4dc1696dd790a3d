"""What the check before a run found, whatever the protocol (each user class makes its own check)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preflight:
    problem: str | None = None
    """Why a run would measure nothing (it does not start)."""
    warning: str | None = None
    """What the first call met that the run will measure anyway, in the server's words."""
