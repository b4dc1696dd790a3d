"""LLM ProfileRuns through the operator on the kwok control plane: a URL target (llama.cpp's real llama-server
on loopback), its tokenizer from a ConfigMap mounted into the load-generator Job, and the token figures in the
status the operator writes; a workload fitted from a real Prometheus when the run is planned; and a two-replica
vLLM trial whose servers' load (its prefix-cache hit rate among it) comes from Prometheus's scrapes of both pods."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaliper.netutil import free_port
from kaliper.serving.tiny_llm import train_tokenizer
from tests.support.cluster_objects import apply
from tests.support.controlplane import Kubectl, wait_for
from tests.support.exporter import Exporter, PodSeries, VllmSeries
from tests.support.groundtruth import STREAM_SOURCE, groundtruth
from tests.support.llama import CHAT_TEMPLATE_TOKENS, chat_request, llama_server, synthetic_payload, tiny_model
from tests.support.operator_runner import Cluster, running_operator
from tests.support.prometheus import instant_value, prometheus

TOKENIZER_REF = {"configMap": {"name": "tiny-tokenizer", "key": "tokenizer.json"}}
SERIES = 'vllm:request_success_total{model_name="truth"}'  # what streamtruth -vllm-metrics counted
FINISHED = f"sum({SERIES})"
THREE_SECONDS = {"minDuration": "3s", "maxDuration": "3s"}


def tiny_tokenizer_configmap(folder: Path) -> dict:
    """The ConfigMap TOKENIZER_REF names: a tokenizer of 1,024 tokens trained here."""
    train_tokenizer(1024).save(str(folder / "tokenizer.json"))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "tiny-tokenizer"},
        "data": {"tokenizer.json": (folder / "tokenizer.json").read_text()},
    }


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
    tokenizer = tiny_tokenizer_configmap(tmp_path)
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


def test_a_two_replica_vllm_trial_reports_its_prefix_cache_hit_rate_from_prometheus(
    operator, crds: Kubectl, namespace: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """A vLLM ModelDeployment of two replicas: the load generator reaches one replica at a time through the
    Service, so the servers' load comes from Prometheus's scrapes of both pods (the exporter double serves
    vLLM's series for them: 600 of 1,000 and 150 of 500 prompt tokens a second found in the prefix cache), and
    the trial's report carries the hit rate of the two together, 0.5."""
    tokenizer = tiny_tokenizer_configmap(tmp_path)
    deployment = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "chat"},
        "spec": {
            "model": {
                "image": {"image": "registry.example.com/models/tiny:1", "path": "/models/tiny"},
                "name": "truth",
            },
            "runtime": {"type": "vllm"},
            "replicas": 2,
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
                "gpu": {"count": 1},  # the kwok nodes offer nvidia.com/gpu
            },
        },
    }
    pods = {
        "prefix-a": VllmSeries(2, 0, 1.5, 0.1, 4, prefix_queries_per_s=1000, prefix_hits_per_s=600),
        "prefix-b": VllmSeries(1, 0, 0.5, 0.0, 2, prefix_queries_per_s=500, prefix_hits_per_s=150),
    }
    exporter, port = Exporter(), free_port()
    server = exporter.serve(port)
    try:
        with (
            groundtruth("-ttft", "2ms", "-gap", "1ms", source=STREAM_SOURCE) as base,
            prometheus([f"127.0.0.1:{port}"]) as prom,
        ):
            run = {
                "apiVersion": "kaliper.dev/v1alpha1",
                "kind": "ProfileRun",
                "metadata": {"name": "prefix"},
                "spec": {
                    "target": {"deploymentRef": {"name": "chat"}},
                    "request": {"protocol": "openai-completions", "modelName": "truth", "generation": {"maxTokens": 8}},
                    "payload": synthetic_payload(TOKENIZER_REF, 24, 16),
                    "load": {
                        "closedLoop": {"concurrency": 2},
                        "warmup": "0s",
                        "minDuration": "3s",
                        "maxDuration": "3s",
                    },
                    "metrics": {"prometheus": {"url": prom, "scrapeInterval": "1s", "timeout": "5s"}},
                },
            }
            apply(crds, namespace, tokenizer, deployment, run)
            cluster = Cluster(crds, namespace, "prefix")
            cluster.wait_trial(0, "Running")
            for pod, series in zip(cluster.wait_pods(0, "server", count=2), pods.values(), strict=True):
                exporter.add(pod["metadata"]["name"], PodSeries(namespace, 0.5, 2**30, container="vllm", vllm=series))
            wait_for(
                lambda: instant_value(prom, f'count(vllm:num_requests_running{{namespace="{namespace}"}})') == 2,
                timeout=30,
                interval=0.5,
            )
            done = cluster.play_load(0, base)
            assert done.returncode == 0, done.stderr
            status = cluster.wait_phase("Succeeded", timeout=120)
            report = json.loads(cluster.get("configmap", "prefix-report")["data"]["report.json"])
    finally:
        server.shutdown()
    load = report["trials"][0]["stage"]["tokens"]["serverLoad"]
    assert status["trials"][0]["phase"] == "Succeeded"
    figures = (load["source"], load["readFrom"], load["pods"], load["prefixCacheHitRate"])
    assert figures == ("vLLM", "prometheus", 2, 0.5)
