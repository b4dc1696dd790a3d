"""What a ProfileRun's load-generator pods run as and may reach: their identity (a ServiceAccount that may
write their results) and, unless the chart turns it off (tenancy.networkPolicy), a NetworkPolicy that lets them
reach their target alone, as admission resolved it (kaliper.profiling.tenancy.load_reach), the cluster's DNS,
the API server (where they write their results) and their master. Made when the run is planned, owned by it."""

from __future__ import annotations

import threading
import time
from typing import Any

from kaliper.controllers import kube
from kaliper.controllers.run_target import RunTarget
from kaliper.controllers.settings import SETTINGS
from kaliper.manifests.profilerun import loadgen_network_policy, loadgen_rbac
from kaliper.profiling.tenancy import load_reach


def loadgen_objects(run: dict[str, Any], target: RunTarget) -> list[dict[str, Any]]:
    """The run's load-generator identity and, where enabled, its NetworkPolicy (the target as its snapshot read
    it: a URL's Service)."""
    objects = loadgen_rbac(run)
    if not SETTINGS.loadgen_network_policy:
        return objects
    selector = (target.service or {}).get("spec", {}).get("selector")
    reach = load_reach(run["metadata"]["name"], target.url_target(), selector)
    policy = loadgen_network_policy(run, reach.peers, reach.ports, api_server_addresses(), reach.wider)
    return [*objects, policy]


# The API server's addresses, read once a minute rather than for every run (two requests each: a thousand runs
# created at once all find the same); an address that moved reaches runs planned within a minute of it late.
ADDRESSES_FOR_S = 60.0
_addresses: tuple[float, list[tuple[str, int]]] | None = None
_addresses_guard = threading.Lock()


def api_server_addresses() -> list[tuple[str, int]]:
    """Where the pods reach the API server: the `kubernetes` Service's address and port, and the endpoints
    behind it (a NetworkPolicy is applied after the Service's address is translated to one of them, by most
    network plugins)."""
    global _addresses
    with _addresses_guard:
        if _addresses is not None and time.monotonic() - _addresses[0] < ADDRESSES_FOR_S:
            return list(_addresses[1])
    found: list[tuple[str, int]] = []
    service = kube.get("Service", "default", "kubernetes")
    if service is not None and service["spec"].get("clusterIP"):
        found += [(service["spec"]["clusterIP"], port["port"]) for port in service["spec"].get("ports") or []]
    for endpoint_slice in kube.list_objects("EndpointSlice", "default", "kubernetes.io/service-name=kubernetes"):
        ports = [port["port"] for port in endpoint_slice.get("ports") or [] if port.get("port")]
        for endpoint in endpoint_slice.get("endpoints") or []:
            found += [(address, port) for address in endpoint.get("addresses") or [] for port in ports]
    with _addresses_guard:
        _addresses = (time.monotonic(), found)
    return list(found)


def forget_addresses() -> None:
    """An operator started again in the same process (tests) may face another API server."""
    global _addresses
    with _addresses_guard:
        _addresses = None
