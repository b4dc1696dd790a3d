"""What the operator's watch streams have shown it: the latest copy of every object it steps on.

A ProfileRun step used to read its run and list its ModelDeployments, Jobs and Pods from the API server on
every step, and the ModelDeployment controller read both objects afresh on every rollout event: about 110
of the 164 requests of a two-trial run. kopf already streams each of those kinds to the operator, so the
handlers put every event's object here and the steps read from here instead.

Two rules keep it from showing an older view than the operator has already seen:
- an object replaces the stored copy only when its resourceVersion is newer, so the result of the
  operator's own write (put here at once) is not undone by a late watch event of the object before it;
- a deleted object leaves a tombstone with its last resourceVersion, so an older copy cannot come back.

Right after a start the watch streams may not have delivered their first listing yet; `prime` lists a
namespace's labelled objects of a kind once per operator process, so a step never mistakes "not seen yet"
for "does not exist". Everything is dropped when the operator stops.

It keeps only what the operator reads of an object (`kept`), as controller-runtime's cache transforms do:
never managedFields (a tree of every field each manager set, often larger than the object), and of a Pod or
a Job not their spec (their status and labels say all the operator decides from). A run's status, which its
next step starts from, is kept whole. And it keeps each as compact JSON text, with the few facts it indexes
by (version, group, phase) beside it: as dicts and lists an object takes about ten times its JSON's size,
and every reader gets its own copy anyway, which parsing the text makes faster than a deep copy did. At
1,000 runs in flight the store held about 100 MiB of dicts (bench/operator_scale.py).
"""

from __future__ import annotations

import collections
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kaliper.manifests.profilerun import LABEL_RUN

Key = tuple[str, str, str]  # kind, namespace, name
MAX_TOMBSTONES = 20_000
# Kinds whose spec nothing reads: a Pod's (diagnosis reads its status) and a load generator's Job.
WITHOUT_SPEC = frozenset({"Pod", "Job"})


def kept(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """What the store keeps of an object: all but its managedFields, and no spec of the kinds in WITHOUT_SPEC.
    The result shares the object's remaining parts (it is only serialised)."""
    obj = {key: value for key, value in body.items() if not (key == "spec" and kind in WITHOUT_SPEC)}
    metadata = body["metadata"]
    if "managedFields" in metadata:
        obj["metadata"] = {key: value for key, value in metadata.items() if key != "managedFields"}
    return obj


@dataclass(frozen=True, slots=True)
class _Entry:
    version: int
    group: str | None  # its value of the group label
    phase: str  # its status.phase ("" for none)
    text: str  # what the store keeps of it (kept), as compact JSON


def _version(obj: Mapping[str, Any]) -> int:
    # resourceVersion is opaque by contract, but every API server (etcd's revision) gives decimal integers; an
    # unexpected one counts as newest, which is what reading the API afresh would have given.
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 1 << 62


class Store:
    def __init__(self, group_label: str) -> None:
        """group_label: objects carrying it are also indexed by its value (a ProfileRun's children by run)."""
        self._group_label = group_label
        self._objects: dict[Key, _Entry] = {}
        self._groups: dict[tuple[str, str, str], set[str]] = {}  # kind, namespace, label value -> names
        self._tombstones: OrderedDict[Key, int] = OrderedDict()
        self._primed: set[tuple[str, str]] = set()
        self._guard = threading.Lock()

    def seen(self, kind: str, body: Mapping[str, Any], deleted: bool = False) -> None:
        """An object from a watch event, or the result of the operator's own write."""
        meta = body["metadata"]
        key = (kind, meta["namespace"], meta["name"])
        version = _version(body)
        with self._guard:
            if version <= self._tombstones.get(key, -1):
                return
            current = self._objects.get(key)
            if deleted:
                if current is None or current.version <= version:
                    self._remove(key, version)
                return
            if current is not None and current.version >= version:
                return
        group = (meta.get("labels") or {}).get(self._group_label)
        phase = (body.get("status") or {}).get("phase") or ""
        entry = _Entry(version, group, phase, json.dumps(kept(kind, body), separators=(",", ":")))
        with self._guard:  # serialised outside the lock; another version may have come meanwhile
            current = self._objects.get(key)
            if version <= self._tombstones.get(key, -1) or (current is not None and current.version >= version):
                return
            if current is not None:
                self._ungroup(key, current)
            self._objects[key] = entry
            self._tombstones.pop(key, None)
            if group:
                self._groups.setdefault((kind, key[1], group), set()).add(key[2])

    def gone(self, kind: str, namespace: str, name: str) -> None:
        """The operator deleted it: forget it now rather than at the watch's DELETED event."""
        key = (kind, namespace, name)
        with self._guard:
            if key in self._objects:
                self._remove(key, self._objects[key].version)

    def drop_group(self, namespace: str, group: str) -> None:
        """Forget every object of a finished run: a watch that re-listed after a gap would not have told us
        about children deleted in between, and nobody needs them any more."""
        with self._guard:
            for kind, ns, value in [g for g in self._groups if g[1:] == (namespace, group)]:
                for name in list(self._groups.get((kind, ns, value), ())):
                    self._remove((kind, ns, name), self._objects[(kind, ns, name)].version)

    def _remove(self, key: Key, version: int) -> None:
        current = self._objects.pop(key, None)
        if current is not None:
            self._ungroup(key, current)
        self._tombstones[key] = version
        self._tombstones.move_to_end(key)
        while len(self._tombstones) > MAX_TOMBSTONES:
            self._tombstones.popitem(last=False)

    def _ungroup(self, key: Key, entry: _Entry) -> None:
        if entry.group:
            names = self._groups.get((key[0], key[1], entry.group))
            if names is not None:
                names.discard(key[2])
                if not names:
                    del self._groups[(key[0], key[1], entry.group)]

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of its own for the caller, which may change it."""
        with self._guard:
            found = self._objects.get((kind, namespace, name))
        return json.loads(found.text) if found is not None else None

    def phases(self, kind: str) -> collections.Counter[str]:
        """How many objects of a kind are in each status.phase ("" for none yet)."""
        with self._guard:
            return collections.Counter(entry.phase for (k, _, _), entry in self._objects.items() if k == kind)

    def every(self, kind: str) -> list[dict[str, Any]]:
        """Copies of every object of a kind."""
        with self._guard:
            found = [entry.text for (k, _, _), entry in self._objects.items() if k == kind]
        return [json.loads(text) for text in found]

    def group(self, kind: str, namespace: str, group: str) -> list[dict[str, Any]]:
        """Copies of the objects of a kind whose group label has this value (a run's Jobs, say)."""
        with self._guard:
            names = sorted(self._groups.get((kind, namespace, group), ()))
            found = [self._objects[(kind, namespace, name)].text for name in names]
        return [json.loads(text) for text in found]

    def prime(self, kind: str, namespace: str, list_from_api: Callable[[], list[dict[str, Any]]]) -> None:
        """Once per kind and namespace in this process: take the API server's listing, so objects that
        existed before the watch caught up are known."""
        with self._guard:
            if (kind, namespace) in self._primed:
                return
        items = list_from_api()
        for item in items:
            self.seen(kind, item)
        with self._guard:
            self._primed.add((kind, namespace))

    def clear(self) -> None:
        with self._guard:
            self._objects.clear()
            self._groups.clear()
            self._tombstones.clear()
            self._primed.clear()


STORE = Store(group_label=LABEL_RUN)
# The kinds the operator watches (and so may read from the store); other kinds' writes are not kept.
WATCHED = ("ProfileRun", "ModelDeployment", "ModelOptimization", "Cleanup", "Deployment", "Job", "Pod")
