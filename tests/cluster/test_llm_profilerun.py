"""LLM ProfileRuns through the operator on the kwok control plane: a URL target (llama.cpp's real llama-server
on loopback), its tokenizer from a ConfigMap mounted into the load-generator Job, and the token figures in the
status the operator writes; and a workload fitted from a real Prometheus when the run is planned."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaliper.serving.tiny_llm import train_tokenizer
from tests.support.cluster_objects import apply
from tests.support.controlplane import Kubectl, wait_for
from tests.support.groundtruth import STREAM_SOURCE, groundtruth
from tests.support.llama import chat_request, llama_server, synthetic_payload, tiny_model
from tests.support.operator_runner import Cluster, running_operator
from tests.support.prometheus import instant_value, prometheus

TOKENIZER_REF = {"configMap": {"name": "tiny-tokenizer", "key": "tokenizer.json"}}
SERIES = 'vllm:request_success_total{model_name="truth"}'  # what streamtruth -vllm-metrics counted
FINISHED = f"sum({SERIES})"
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


def test_a_workload_fitted_from_prometheus_when_planned_is_kept_in_the_status_and_sent(
    operator, crds: Kubectl, namespace: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """payload.prompts.fromPrometheus and load.fitted on the operator: bench/streamtruth exports vLLM's workload
    metrics to a real Prometheus after serving 40 known requests; the operator fits them once, when it plans the
    run, keeps the fit in the status, and the load generator's Job sends it; the selector reads the run's
    namespace's series only (tenancy). A selector that matches nothing fails the run with the reason."""
    train_tokenizer(1024).save(str(tmp_path / "tokenizer.json"))
    tokenizer = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tiny-tokenizer"},
        "data": {"tokenizer.json": (tmp_path / "tokenizer.json").read_text()},
    }
    flags = ("-vllm-metrics", "-ttft", "2ms", "-gap", "1ms")
    # Scraped as the run's namespace's and, again, as another team's: the run reads its own namespace's alone.
    with (
        groundtruth(*flags, source=STREAM_SOURCE) as base,
        prometheus([base.removeprefix("http://")], (namespace, "team-b")) as prom,
    ):
        # Scraped before the first request: what a series counted before its first sample is in no window.
        # Both namespaces' series, or the other's rise would be missed and the test could not tell the two apart.
        wait_for(
            lambda: instant_value(prom, f"count(sum by (namespace) ({SERIES}) == 0)") == 2, timeout=30, interval=0.2
        )
        # 40 requests: prompts of 50 and 150 words in turn (mean 100), answers of 8 tokens.
        for i in range(40):
            body = {
                "model": "truth",
                "prompt": " ".join(f"w{i}x{j}" for j in range(50 if i % 2 else 150)),
                "max_tokens": 8,
            }
            request = urllib.request.Request(f"{base}/v1/completions", json.dumps(body).encode(), method="POST")
            urllib.request.urlopen(request, timeout=10).read()
        wait_for(lambda: instant_value(prom, FINISHED) == 80, timeout=30, interval=0.5)  # 40 in each namespace

        def run(name: str, selector: str) -> dict:
            prompts = {
                # Long enough to hold the scrapes before the first request however slowly a busy machine gets
                # from them to planning the run (one busy run found nothing finished in a 2m window, as if the
                # samples before the requests had left it: the rise counts from a window's first sample).
                "fromPrometheus": {"url": prom, "selector": selector, "window": "10m"},
                "tokenizer": TOKENIZER_REF,
            }
            spec = {
                "target": {"url": base},
                "request": {"protocol": "openai-completions", "modelName": "truth"},
                "payload": {"prompts": prompts},
                "load": {"fitted": {"scale": 30}, "warmup": "0s", "minDuration": "2s", "maxDuration": "2s"},
            }
            return {
                "apiVersion": "kaliper.dev/v1alpha1",
                "kind": "ProfileRun",
                "metadata": {"name": name},
                "spec": spec,
            }

        apply(crds, namespace, tokenizer, run("fitted", 'model_name="truth"'), run("unmatched", 'model_name="absent"'))
        cluster = Cluster(crds, namespace, "fitted")
        cluster.wait_trial(0, "Running")
        workload = cluster.status()["workload"]
        assert workload["source"].startswith(f'{prom} {{model_name="truth"}} over the 10m to ')
        assert workload["fit"][0].startswith('40 requests finished in 600s by {model_name="truth"} (1 replica)')
        synthetic = workload["prompts"]
        assert (synthetic["inputTokens"]["mean"], synthetic["outputTokens"]["mean"]) == (100, 8)
        assert (synthetic["inputTokens"]["min"], synthetic["inputTokens"]["max"]) == (21, 200)  # buckets 21-50, 101-200
        assert workload["openLoop"]["rate"] > 0
        done = cluster.play_load(0, base)
        assert done.returncode == 0, done.stderr
        status = cluster.wait_phase("Succeeded")
        assert status["workload"] == workload  # the report's copy: the fit the run planned with
        assert status["trials"][0]["requests"] > 0

        failed = Cluster(crds, namespace, "unmatched").wait_phase("Failed")
    assert failed["message"].startswith(
        'payload.prompts.fromPrometheus: no vllm:request_success_total series match {model_name="absent"}'
    )
    assert "workload" not in failed and "trials" not in failed
