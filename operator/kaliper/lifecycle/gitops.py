"""Which GitOps tool manages an object, from the marks each leaves on what it applies. Deleting such an object
fights the tool: Argo CD (auto-sync) or Flux (every interval) creates it again, and a ProfileRun created again
runs its load test again. ttl and Cleanup leave these objects alone unless their spec says otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Argo CD's annotation tracking (the default since 3.0) and its label tracking under the key its docs suggest.
ARGOCD_TRACKING_ID = "argocd.argoproj.io/tracking-id"
ARGOCD_INSTANCE = "argocd.argoproj.io/instance"
# Flux's kustomize-controller and helm-controller label everything they apply with their object's name.
FLUX_LABELS = {
    "Flux Kustomization": ("kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace"),
    "Flux HelmRelease": ("helm.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/namespace"),
}


def gitops_manager(metadata: Mapping[str, Any]) -> str | None:
    """ "Argo CD application NAME", "Flux Kustomization NAMESPACE/NAME" and the like, or None."""
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    if ARGOCD_TRACKING_ID in annotations:  # "<application>:<group>/<kind>:<namespace>/<name>"
        return f"Argo CD application {annotations[ARGOCD_TRACKING_ID].split(':', 1)[0]}"
    if ARGOCD_INSTANCE in labels:
        return f"Argo CD application {labels[ARGOCD_INSTANCE]}"
    for tool, (name, namespace) in FLUX_LABELS.items():
        if name in labels:
            return f"{tool} {labels.get(namespace, '?')}/{labels[name]}"
    return None
