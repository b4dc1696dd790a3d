"""`kaliper gc` in a cluster: read what lifecycle.gc decides on, and remove exactly what it found."""

from __future__ import annotations

from datetime import datetime

from kubernetes.client import ApiException

from kaliper.controllers import kube
from kaliper.lifecycle.gc import MADE_KINDS, MANAGED, OWNER_KINDS, ClusterLeftover, cluster_leftovers


class ClusterUnreachable(Exception):
    """The cluster could not be read; the message says what to do."""


def find(namespace: str | None, now: datetime) -> list[ClusterLeftover]:
    """Leftovers in one namespace, or in all (None)."""
    try:
        owners = {kind: kube.list_objects(kind, namespace) for kind in OWNER_KINDS}
        made = [(kind, o) for kind in MADE_KINDS for o in kube.list_objects(kind, namespace, MANAGED)]
    except (ApiException, OSError) as exc:
        raise ClusterUnreachable(f"could not read the cluster: {getattr(exc, 'reason', None) or exc}") from exc
    except Exception as exc:  # no usable kubeconfig
        raise ClusterUnreachable(f"could not connect to the cluster: {exc}; pass --no-cluster") from exc
    return cluster_leftovers(owners, made, now)


def remove(found: list[ClusterLeftover]) -> list[str]:
    """Delete each one found, and only it (its uid must still match); what could not be removed, and why."""
    failures = []
    for item in found:
        try:
            kube.delete_exactly(item.kind, item.namespace, item.name, item.uid, "Background")
        except ApiException as exc:
            failures.append(f"{item.kind} {item.namespace}/{item.name}: {exc.status} {exc.reason}")
    return failures
