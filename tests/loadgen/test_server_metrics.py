"""The self-check's parsing and comparison (pure): expositions as llama.cpp's server writes them (captured
from the llama-server that tests/llm runs) and as vLLM documents its metrics (names, labels, histogram
series), set beside literal generator figures."""

from __future__ import annotations

import pytest

from kaliper.loadgen.server_metrics import (
    dialect,
    parse_exposition,
    read_server_at_edges,
    server_check,
    server_load,
)
from kaliper.report.schema import LatencyFigures, TokenFigures

LLAMA_BEFORE = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 800
# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 0
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.05
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 640
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 0.2
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
"""

LLAMA_AFTER = """\
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 8000
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 80
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.5
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 7040
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 2.2
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
"""

VLLM_BEFORE = """\
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 1000.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 640.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.02",model_name="tiny"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 0.3
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_count{engine="0",model_name="tiny"} 630.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="tiny"} 3.15
"""

VLLM_AFTER = """\
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 11000.0
vllm:generation_tokens_total{engine="0",model_name="tiny"} 7040.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 110.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 4.3
vllm:inter_token_latency_seconds_count{engine="0",model_name="tiny"} 6930.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="tiny"} 34.65
"""


def figures(count: int = 0, mean_ms: float | None = None) -> LatencyFigures:
    return LatencyFigures(count=count, mean_ms=mean_ms)


def tokens() -> TokenFigures:
    """100 streams of 64 tokens, 80-token prompts, every gap 3 ms on average (6300 gaps: 18.9 s)."""
    return TokenFigures(
        ttft=figures(100, 42.0),
        ttft_service=figures(100, 41.0),
        itl_chunk=figures(6300, 3.0),
        itl_token=figures(6300, 5.25),
        tpot=figures(100, 3.0),
        streams=100,
        chunks=6400,
        input_tokens=8000,
        output_tokens=6400,
        output_tokens_per_s=640.0,
        total_tokens_per_s=1440.0,
    )


def test_exposition_sums_every_label_set_of_a_name_and_skips_comments() -> None:
    text = 'x_total{a="1"} 2\nx_total{a="2",b="} {"} 3.5\n# TYPE y gauge\ny 7 1700000000000\nbad_line\n'
    assert parse_exposition(text) == {"x_total": 5.5, "y": 7.0}


def test_each_server_is_known_by_its_own_metric_names() -> None:
    assert dialect(parse_exposition(LLAMA_AFTER)) == "llama.cpp"
    assert dialect(parse_exposition(VLLM_AFTER)) == "vLLM"
    assert dialect(parse_exposition("process_cpu_seconds_total 1.0\n")) is None


def test_llama_cpp_counters_over_the_interval_beside_the_generator() -> None:
    check = server_check("http://s/metrics", parse_exposition(LLAMA_BEFORE), parse_exposition(LLAMA_AFTER), tokens())
    assert check.source == "llama.cpp"
    got = {c.figure: (c.server, c.generator, c.difference) for c in check.comparisons}
    assert got == {
        "outputTokens": (6400.0, 6400.0, 0.0),
        "inputTokens": (7280.0, 8000.0, pytest.approx(0.098901, abs=1e-6)),
        "generationSeconds": (2.0, 18.9, 8.45),
    }


def test_vllm_counters_and_histogram_means_beside_the_generator() -> None:
    check = server_check("http://s/metrics", parse_exposition(VLLM_BEFORE), parse_exposition(VLLM_AFTER), tokens())
    assert check.source == "vLLM"
    got = {c.figure: (c.server, c.generator, c.difference) for c in check.comparisons}
    assert got == {
        "outputTokens": (6400.0, 6400.0, 0.0),
        "inputTokens": (10000.0, 8000.0, -0.2),
        "meanTtftMs": (40.0, 41.0, 0.025),
        "meanItlMs": (5.0, 5.25, 0.05),
    }


def test_older_vllm_names_its_gap_histogram_time_per_output_token() -> None:
    older = {"vllm:generation_tokens_total": 1.0, "vllm:time_per_output_token_seconds_count": 100.0}
    after = {**older, "vllm:time_per_output_token_seconds_sum": 0.5}
    check = server_check("http://s/metrics", {}, after, tokens())
    assert [(c.figure, c.server) for c in check.comparisons] == [("outputTokens", 1.0), ("meanItlMs", 5.0)]


def test_no_check_says_why() -> None:
    refused = server_check("http://s/metrics", "http://s/metrics: HTTP Error 404: Not Found", {}, tokens())
    assert (refused.source, refused.unavailable) == (None, "http://s/metrics: HTTP Error 404: Not Found")
    unknown = server_check("http://s/metrics", {}, {"process_cpu_seconds_total": 3.0}, tokens())
    assert unknown.unavailable == "http://s/metrics exports no llama.cpp or vLLM generation metrics"
    assert unknown.comparisons == []


def llama_gauges(processing: int, deferred: int, busy_per_decode: float, decodes: int) -> str:
    """llama-server's load gauges as its /metrics writes them (names and types from the running server)."""
    return (
        "# TYPE llamacpp:n_decode_total counter\n"
        f"llamacpp:n_decode_total {decodes}\n"
        "# TYPE llamacpp:requests_processing gauge\n"
        f"llamacpp:requests_processing {processing}\n"
        "# TYPE llamacpp:requests_deferred gauge\n"
        f"llamacpp:requests_deferred {deferred}\n"
        "# TYPE llamacpp:n_busy_slots_per_decode gauge\n"
        f"llamacpp:n_busy_slots_per_decode {busy_per_decode}\n"
    )


def test_llama_cpp_load_over_the_interval_from_its_gauges_at_each_edge() -> None:
    readings = [
        parse_exposition(llama_gauges(2, 0, 1.5, 100)),
        parse_exposition(llama_gauges(2, 3, 1.8, 300)),
        "http://127.0.0.1:1/metrics: timed out",  # a reading that failed is left out
        parse_exposition(llama_gauges(1, 1, 1.9, 500)),
    ]
    load = server_load(readings, 10.0)
    assert load is not None
    # Busy slots per decode since the start: 150 over the first 100 calls, 950 over 500; over the interval
    # (950 - 150) / (500 - 100) = 2.0.
    assert load.model_dump(exclude_none=True) == {
        "source": "llama.cpp",
        "read_from": "endpoint",
        "samples": 3,
        "running_mean": 1.6667,
        "running_max": 2.0,
        "waiting_mean": 1.3333,
        "waiting_max": 3.0,
        "busy_slots_per_decode": 2.0,
    }
    assert server_load(["refused"], 10.0) is None
    assert server_load([parse_exposition("process_cpu_seconds_total 3\n")], 10.0) is None


def test_vllm_load_with_kv_cache_and_preemptions_under_its_current_and_older_names() -> None:
    labels = '{engine="0",model_name="llama3"}'
    current = [
        parse_exposition(
            f"vllm:num_requests_running{labels} {running}\nvllm:num_requests_waiting{labels} {waiting}\n"
            f"vllm:kv_cache_usage_perc{labels} {kv}\nvllm:num_preemptions_total{labels} {preempted}\n"
            f"vllm:request_inference_time_seconds_sum{labels} {running_s}\n"
            f"vllm:request_queue_time_seconds_sum{labels} {queued_s}\n"
        )
        for running, waiting, kv, preempted, running_s, queued_s in (
            (60, 0, 0.5, 2, 100.0, 5.0),
            (64, 12, 0.995, 9, 712.0, 41.5),
        )
    ]
    load = server_load(current, 10.0)
    assert load is not None
    assert (load.source, load.running_max, load.waiting_max, load.kv_cache_usage_max, load.preemptions) == (
        "vLLM",
        64.0,
        12.0,
        0.995,
        7.0,
    )
    # Over the 10 s interval its requests spent 612 s running and 36.5 s queued: 61.2 and 3.65 at every moment.
    assert (load.running_time_weighted, load.waiting_time_weighted) == (61.2, 3.65)
    older = parse_exposition(f"vllm:num_requests_running{labels} 8\nvllm:gpu_cache_usage_perc{labels} 0.25\n")
    load = server_load([older], 10.0)
    assert load is not None and (load.kv_cache_usage_max, load.waiting_max, load.preemptions) == (0.25, None, None)
    assert (load.running_time_weighted, load.waiting_time_weighted) == (None, None)


def test_sglang_and_tgi_are_recognised_by_their_own_gauges() -> None:
    sglang = server_load(
        [parse_exposition('sglang:num_running_reqs{model_name="q"} 5\nsglang:num_queue_reqs 2\n')], 10.0
    )
    tgi = server_load([parse_exposition("tgi_batch_current_size 16\ntgi_queue_size 4\n")], 10.0)
    assert sglang is not None and (sglang.source, sglang.running_max, sglang.waiting_max) == ("SGLang", 5.0, 2.0)
    assert tgi is not None and (tgi.source, tgi.running_max, tgi.waiting_max) == ("TGI", 16.0, 4.0)


def test_a_reading_that_comes_late_is_no_reading_of_its_edge() -> None:
    """The counters at each window edge, read by the generator: a server that answers its /metrics 1.5 s after
    the edge of a 1 s window, past the next edge, gives no reading of that edge (it says how late), so the
    self-check never compares two late readings as a server that counted nothing; one that answers within the
    window gives its counters."""
    import http.server
    import threading
    import time

    import gevent

    class Metrics(http.server.BaseHTTPRequestHandler):
        delay_s = 0.0

        def do_GET(self) -> None:
            time.sleep(self.delay_s)
            body = b"llamacpp:tokens_predicted_total 7\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    found = {}
    for delay in (0.5, 1.5):
        handler = type("Handler", (Metrics,), {"delay_s": delay})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        readings: dict = {}
        reader = gevent.spawn(read_server_at_edges, url, time.time(), 1.0, 0, readings)
        gevent.wait([reader], timeout=1.9)  # the edge at 0 s read (or not), the next one not yet
        reader.kill()
        server.shutdown()
        found[delay] = readings[0]
    assert found[0.5] == {"llamacpp:tokens_predicted_total": 7.0}
    assert isinstance(found[1.5], str) and found[1.5].startswith(f"{url}: the counters at 0 s were read 1.")
    assert found[1.5].endswith(" s late")
