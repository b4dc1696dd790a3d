"""Write a results document into a ConfigMap, from metadata the operator prepared (name, owner, labels).

This is how a load-generator pod hands its results to the operator durably: the ConfigMap outlives the pod,
and the operator may be restarted in between. The pod's service account may create ConfigMaps and nothing
else.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from kaliper.report.store import configmap_content

RESULT_KEY = "result.json"


def results_configmap(template: dict, text: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": template["metadata"],
        **configmap_content(RESULT_KEY, text),
    }


def publish(text: str, template_path: Path, attempts: int = 5) -> str:
    """Create the results ConfigMap; returns its name. An existing one (a retried pod) is left as it is."""
    from kubernetes import client, config

    body = results_configmap(yaml.safe_load(template_path.read_text()), text)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    api = client.CoreV1Api()
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    for attempt in range(attempts):
        try:
            api.create_namespaced_config_map(namespace, body)
            return name
        except client.ApiException as exc:
            if exc.status == 409:
                return name
            retryable = exc.status is None or exc.status >= 500 or exc.status == 429
            if not retryable or attempt == attempts - 1:
                raise
        time.sleep(2**attempt)
    return name
