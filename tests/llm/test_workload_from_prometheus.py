"""`kaliper workload --from-prometheus` against a real Prometheus (Debian's) scraping bench/streamtruth, which
exports vLLM's workload metrics under vLLM's names (-vllm-metrics: the token histograms with vLLM's 1-2-5
buckets, request_success_total by finished_reason, the prefix cache's counters) and records every request it
served: a known workload is sent by Kaliper's load generator, fitted back from Prometheus, compared with the
server's records, written into a ProfileRun, validated and run."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import yaml

from kaliper.netutil import free_port
from kaliper.serving.tiny_llm import train_tokenizer
from tests.support.controlplane import wait_for
from tests.support.groundtruth import STREAM_SOURCE, groundtruth
from tests.support.loadgen_run import run_loadgen
from tests.support.local_run import run_manifests
from tests.support.prometheus import instant_value, prometheus

LOAD_S = 40


def kaliper(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kaliper.cli", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def scraped_requests(url: str) -> float | None:
    """The server's count of finished requests in Prometheus's latest scrape (None before the first)."""
    return instant_value(url, 'sum(vllm:request_success_total{model_name="truth"})')


def scrapes_so_far(url: str) -> float:
    return instant_value(url, 'count_over_time(vllm:request_success_total{finished_reason="length"}[1m])') or 0


def test_a_workload_sent_is_fitted_back_from_prometheus_and_runs_as_a_profilerun(tmp_path: Path) -> None:
    train_tokenizer(1024).save(str(tmp_path / "tokenizer.json"))
    flags = ("-vllm-metrics", "-max-model-len", "4096", "-block-tokens", "16", "-ttft", "5ms", "-gap", "1ms")
    with groundtruth(*flags, source=STREAM_SOURCE) as base, prometheus([base.removeprefix("http://")]) as prom:
        # The workload: lognormal prompts (mean 300, stddev 180) whose first half is the same text, lognormal
        # answers (mean 40, stddev 20), 20 requests a second in gamma arrivals of burstiness 0.25.
        config = {
            "url": base,
            "request": {"protocol": "openai-completions", "modelName": "truth", "timeout": "10s"},
            "payload": {
                "prompts": {
                    "synthetic": {
                        "inputTokens": {"distribution": "lognormal", "mean": 300, "stddev": 180, "max": 4000},
                        "outputTokens": {"distribution": "lognormal", "mean": 40, "stddev": 20, "max": 1000},
                        "sharedPrefixRatio": 0.5,
                        "count": 900,
                        "seed": 3,
                    },
                    "tokenizer": {"file": str(tmp_path / "tokenizer.json")},
                }
            },
            "load": {
                "openLoop": {"rate": 20, "arrival": "gamma", "burstiness": 0.25},
                "warmup": "0s",
                "maxDuration": f"{LOAD_S}s",
            },
            "seed": 5,
        }
        # Scraped for 12 s before the first request: the windows below start up to 10 s before it, and each
        # then has a sample every second from its start (its rate is over the seconds sampled).
        wait_for(lambda: scrapes_so_far(prom) >= 12, timeout=60, interval=0.5)
        process, result = run_loadgen(tmp_path, config)
        assert process.returncode == 0 and result is not None, process.stderr
        records = json.loads(urllib.request.urlopen(f"{base}/_truth/records", timeout=30).read())["records"]
        served = [r for r in records if r["chunks"]]
        # Every answer scraped: Prometheus's count reaches the server's (a wait on the condition, 1 s scrapes).
        wait_for(lambda: scraped_requests(prom) == len(served), timeout=30, interval=0.5)

        # A window from 5 s before the first request (the generator's check of the target, then the load) to now,
        # after the last was scraped, holds every request.
        first = min(r["arrived"] for r in served) / 1e9
        end = time.time()
        window_s = math.ceil(end - first) + 5
        base_run = {
            "apiVersion": "kaliper.dev/v1alpha1",
            "kind": "ProfileRun",
            "metadata": {"name": "fitted"},
            "spec": {
                "target": {"url": base},
                "request": {"protocol": "openai-completions", "modelName": "truth", "timeout": "10s"},
                "payload": {"prompts": {"dataset": {"file": "unused.jsonl"}, "tokenizer": {"file": "tokenizer.json"}}},
                "load": {"closedLoop": {"users": 2}, "warmup": "1s", "minDuration": "2s", "maxDuration": "4s"},
            },
        }
        (tmp_path / "base.yaml").write_text(yaml.safe_dump(base_run))
        end_text = datetime.fromtimestamp(end, UTC).isoformat()
        args = ["workload", "--from-prometheus", prom, "--selector", 'model_name="truth"', "--end", end_text]
        fitted = kaliper(*args, "--window", f"{window_s}s", "--into", "base.yaml", "-o", "fitted.yaml", cwd=tmp_path)
        assert fitted.returncode == 0, fitted.stderr
        # What Prometheus held, fitted, beside what the server recorded.
        prompts = np.array([r["prompt"] for r in served], float)
        answers = np.array([len(r["chunks"]) for r in served], float)
        report = fitted.stderr
        assert f'{len(served):,} requests finished in {window_s}s by {{model_name="truth"}} (1 replica)' in report

        document = yaml.safe_load((tmp_path / "fitted.yaml").read_text())
        spec = document["spec"]
        synthetic = spec["payload"]["prompts"]["synthetic"]
        # The means are the histograms' own sums over counts: the records' to the token.
        assert synthetic["inputTokens"]["mean"] == round(prompts.mean())
        assert synthetic["outputTokens"]["mean"] == round(answers.mean())
        # The spreads, from the buckets alone, within 10% of the records' own (lognormal draws: sigma of the log).
        input_sigma = float(np.log(prompts).std())
        assert math.sqrt(math.log(1 + (synthetic["inputTokens"]["stddev"] / prompts.mean()) ** 2)) == pytest.approx(
            input_sigma, rel=0.1
        )
        assert synthetic["outputTokens"]["stddev"] == pytest.approx(float(answers.std()), rel=0.15)
        # The prefix cache's hits over its queries, as the server counted them: half of each prompt shared,
        # less what does not fill a 16-token block.
        hit_share = sum(r["cached"] for r in records) / sum(r["prompt"] for r in records)
        assert synthetic["sharedPrefixRatio"] == round(hit_share, 2)
        assert 0.42 <= hit_share <= 0.5
        # The rate over the window, and gamma arrivals burstier than Poisson (0.25 sent).
        open_loop = spec["load"]["openLoop"]
        assert open_loop["rate"] == pytest.approx(len(served) / window_s, rel=0.05)
        assert open_loop["arrival"] == "gamma"
        assert 0.12 <= open_loop["burstiness"] <= 0.45
        # Everything else of the base kept: the target, the request, the load's durations.
        assert spec["target"] == base_run["spec"]["target"] and spec["request"] == base_run["spec"]["request"]
        assert (spec["load"]["warmup"], spec["load"]["maxDuration"]) == ("1s", "4s")
        assert "closedLoop" not in spec["load"] and "dataset" not in spec["payload"]["prompts"]
        # The fit's report heads the manifest, as comments.
        assert (tmp_path / "fitted.yaml").read_text().startswith(f"# kaliper workload --from-prometheus {prom}\n")

        # The same fit when a ProfileRun is planned (payload.prompts.fromPrometheus, load.fitted at half the
        # rate), over a window from before the first request to when it is planned: nothing was sent since.
        window_s = math.ceil(time.time() - first) + 10  # planned within 10 s: the window holds every request
        planned = {
            **base_run,
            "metadata": {"name": "planned"},
            "spec": {
                **base_run["spec"],
                "payload": {
                    "prompts": {
                        "fromPrometheus": {"url": prom, "selector": 'model_name="truth"', "window": f"{window_s}s"},
                        "tokenizer": {"file": "tokenizer.json"},
                    }
                },
                "load": {"fitted": {"scale": 0.5}, "warmup": "1s", "minDuration": "2s", "maxDuration": "4s"},
            },
        }
        (tmp_path / "planned").mkdir()
        shutil.copy(tmp_path / "tokenizer.json", tmp_path / "planned")
        report, process = run_manifests(tmp_path / "planned", [planned])
        assert report.workload is not None
        assert report.workload.source.startswith(f'{prom} {{model_name="truth"}} over the {window_s}s to ')
        assert report.workload.prompts.input_tokens.mean == round(prompts.mean())
        assert report.workload.prompts.shared_prefix_ratio == round(hit_share, 2)
        arrivals = report.workload.open_loop
        assert arrivals is not None and arrivals.arrival == "gamma"
        assert arrivals.rate == pytest.approx(0.5 * len(served) / window_s, rel=0.05)
        (trial,) = report.trials
        assert trial.stage is not None and trial.stage.requests > 0 and trial.stage.errors_by_kind == {}
        assert f"workload fitted from {report.workload.source}: input tokens lognormal mean" in process.stdout
        assert "<h2>Workload</h2>" in (tmp_path / "planned" / "reports" / "report.html").read_text()

        # And the manifest `kaliper workload` wrote validates and runs.
        checked = kaliper("validate", "fitted.yaml", cwd=tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        ran, _ = run_manifests(tmp_path, [document])
    (trial,) = ran.trials
    assert trial.stage is not None and trial.stage.requests > 0 and trial.stage.errors_by_kind == {}


def test_bad_input_and_an_empty_prometheus_get_errors_that_say_what_to_fix(tmp_path: Path) -> None:
    bad_window = kaliper("workload", "--from-prometheus", "http://127.0.0.1:9", "--window", "5x", cwd=tmp_path)
    assert bad_window.returncode == 2
    assert "Invalid value for --window: '5x' is not a duration" in bad_window.stderr
    port = free_port()
    unreachable = kaliper("workload", "--from-prometheus", f"http://kaliper:s3cret@127.0.0.1:{port}", cwd=tmp_path)
    assert unreachable.returncode == 1
    # The password never shows.
    assert unreachable.stderr.startswith(f"Error: cannot reach Prometheus at http://kaliper:***@127.0.0.1:{port}:")
    assert "s3cret" not in unreachable.stderr
    with prometheus([]) as prom:
        nothing = kaliper("workload", "--from-prometheus", prom, "--selector", 'model_name="llama"', cwd=tmp_path)
        assert nothing.returncode == 1
        assert nothing.stderr == (
            f'Error: no vllm:request_success_total series match {{model_name="llama"}} in the 3600s before the end at '
            f"{prom}: check the selector (kaliper workload --selector) and that Prometheus scrapes the servers' "
            "/metrics\n"
        )
        # Prometheus's own refusal, through a URL with a password (this Prometheus asks for none).
        with_password = prom.replace("http://", "http://kaliper:s3cret@")
        args = ("workload", "--from-prometheus", with_password, "--selector", "model_name=llama")
        unquoted = kaliper(*args, cwd=tmp_path)
        assert unquoted.returncode == 1
        shown = prom.replace("http://", "http://kaliper:***@")
        assert unquoted.stderr.startswith(f"Error: HTTP 400 from {shown}/api/v1/query: bad_data: ")
        assert "s3cret" not in unquoted.stderr
