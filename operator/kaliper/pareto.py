"""The Pareto front: one rule for every frontier Kaliper reports (a ProfileRun's trials on cost against p99, a
ModelOptimization's candidates on latency against accuracy or size). A leaf module: it imports nothing."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)


def pareto_front(points: Sequence[tuple[float, float, Key]]) -> list[Key]:
    """Keys of the points no other point beats on both axes (lower is better on both), in input order."""
    front = []
    for x, y, key in points:
        dominated = any(ox <= x and oy <= y and (ox, oy) != (x, y) for ox, oy, _ in points)
        if not dominated:
            front.append(key)
    return front
