"""Write a results document into a ConfigMap, from metadata the operator prepared (name, owner, labels).

This is how a load-generator pod hands its results to the operator durably: the ConfigMap outlives the pod,
and the operator may be restarted in between. The pod's service account may create ConfigMaps and nothing
else. An API server that is away when the load ends (an upgrade, an etcd stall) is waited for, with backoff,
for up to PUBLISH_WAIT_S: the measurement is not thrown away for an outage of a few minutes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from kaliper.report.store import configmap_content

RESULT_KEY = "result.json"
PUBLISH_WAIT_S = 900.0  # the load-generator Job's deadline leaves this much time for it


def results_configmap(template: dict, text: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": template["metadata"],
        **configmap_content(RESULT_KEY, text),
    }


def retryable(exc: BaseException) -> bool:
    """The API server away or overloaded (no connection, a timeout, 5xx, 429), not the request refused."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and hasattr(exc, "reason"):
        return status >= 500 or status == 429
    return isinstance(exc, OSError) or type(exc).__module__.startswith("urllib3")


def publish(
    text: str,
    template_path: Path,
    wait_s: float = PUBLISH_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Create the results ConfigMap; returns its name. An existing one (a retried pod) is left as it is."""
    from kubernetes import client, config

    body = results_configmap(yaml.safe_load(template_path.read_text()), text)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        # The library reads $KUBECONFIG when it is imported; read it now instead (a process that set it later).
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    api = client.CoreV1Api()
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    deadline, attempt = time.monotonic() + wait_s, 0
    while True:
        try:
            api.create_namespaced_config_map(namespace, body, _request_timeout=(5.0, 30.0))
            return name
        except Exception as exc:
            if getattr(exc, "status", None) == 409:
                return name
            attempt += 1
            # Short steps: once the API server is back, the Job controller ends a pod past its deadline soon.
            delay = min(5.0, 2.0 ** (attempt - 1))
            if not retryable(exc) or time.monotonic() + delay > deadline:
                raise
            if attempt & (attempt - 1) == 0:  # the 1st, 2nd, 4th, 8th ... failure: a few lines for a long outage
                print(f"results not handed in yet ({attempt} tries; {type(exc).__name__}): retrying", file=sys.stderr)
        sleep(delay)
