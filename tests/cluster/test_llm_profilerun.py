"""An LLM ProfileRun through the operator on the kwok control plane: a URL target (llama.cpp's real
llama-server on loopback), its tokenizer from a ConfigMap mounted into the load-generator Job, and the token
figures in the status the operator writes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster_objects import apply
from tests.support.controlplane import Kubectl
from tests.support.llama import chat_request, llama_server, synthetic_payload, tiny_model
from tests.support.operator_runner import Cluster, running_operator

TOKENIZER_REF = {"configMap": {"name": "tiny-tokenizer", "key": "tokenizer.json"}}
CHAT_TEMPLATE_TOKENS = 16  # llama-server's ChatML around one user message, with the tiny model's tokenizer


@pytest.fixture(scope="module")
def operator(crds: Kubectl) -> Iterator[None]:
    with running_operator(crds):
        yield


def test_token_figures_reach_the_status_with_the_tokenizer_from_a_configmap(
    operator, crds: Kubectl, namespace: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    model = tiny_model(tmp_path / "model")
    tokenizer = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tiny-tokenizer"},
        "data": {"tokenizer.json": (tmp_path / "model" / "tokenizer.json").read_text()},
    }
    with llama_server(model, slots=2) as base:
        run = {
            "apiVersion": "kaliper.dev/v1alpha1",
            "kind": "ProfileRun",
            "metadata": {"name": "chat"},
            "spec": {
                "target": {"url": base},
                "request": chat_request(8),
                "payload": synthetic_payload(TOKENIZER_REF, 24, 32),
                "load": {"closedLoop": {"concurrency": 2}, "warmup": "0s", "minDuration": "2s", "maxDuration": "2s"},
                "slo": {"latency": [{"metric": "ttft", "percentile": 90, "max": "10s"}]},
            },
        }
        apply(crds, namespace, tokenizer, run)
        cluster = Cluster(crds, namespace, "chat")
        crds.wait_for(lambda: bool(crds.json("get", "jobs", "-n", namespace)["items"]), timeout=60, what="the Job")
        done = cluster.play_load(0, base)
        assert done.returncode == 0, done.stderr
        status = cluster.wait_phase("Succeeded")
    trial = status["trials"][0]
    tokens = trial["tokens"]
    assert trial["sloVerdict"] == "Met", json.dumps(trial)
    assert tokens["outputTokens"] == 8 * trial["requests"]
    assert tokens["inputTokens"] == (24 + CHAT_TEMPLATE_TOKENS) * trial["requests"]
    assert tokens["ttftP50Ms"] > 0 and tokens["outputTokensPerS"] > 0
