"""An object in the cluster as the lifecycle code names it: what a Cleanup looks at and what the garbage
collection finds left over both start from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterObject:
    kind: str
    namespace: str
    name: str
    uid: str
