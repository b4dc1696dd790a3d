"""The generator checks itself against the server: counters a generation server exports on its Prometheus
endpoint, read at the edges of the measured interval, set beside what the generator measured over the same
interval. Parsing and comparing are pure; `scrape` is the only I/O.

Known servers, by the metric names their own code exports (labels such as model_name are summed over):
- llama.cpp's llama-server (--metrics): counters of prompt tokens (processed and cached), predicted tokens,
  and the seconds spent on each. It counts a request's predicted tokens when it finishes, as the generator
  counts a stream when it ends, so the two count the same answers except those ending within a hair of an
  edge; it counts prompt tokens when it reads the prompt, so requests in flight at an edge differ there.
- vLLM: prompt and generation token counters, and histograms of time to first token and of the gap between
  output tokens (inter_token_latency_seconds since v0.11, time_per_output_token_seconds before). vLLM
  counts generated tokens as it makes them, so streams in flight at the edges count there in part.

How busy the server was (ServerLoad) comes from gauges read at every window edge: requests running and
queued for a slot (llama.cpp's requests_processing and requests_deferred, vLLM's num_requests_running and
num_requests_waiting, SGLang's num_running_reqs and num_queue_reqs, TGI's batch_current_size and
queue_size), llama.cpp's running average of busy slots per decode call, the KV cache's share in use (vLLM's
kv_cache_usage_perc, gpu_cache_usage_perc before v0.10; SGLang's token_usage) and vLLM's preemptions."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from kaliper.report.schema import ServerCheck, ServerComparison, ServerLoad, TokenFigures

Counters = dict[str, float]

LLAMA_CPP = "llama.cpp"
VLLM = "vLLM"
SGLANG = "SGLang"
TGI = "TGI"


@dataclass(frozen=True)
class LoadGauges:
    """One server's gauges of how busy it is (first name found wins, for metrics renamed across versions)."""

    marker: str  # a metric only this server exports
    running: tuple[str, ...]
    waiting: tuple[str, ...]
    kv_cache: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()  # a counter


LOAD_GAUGES = {
    LLAMA_CPP: LoadGauges(
        "llamacpp:requests_processing", ("llamacpp:requests_processing",), ("llamacpp:requests_deferred",)
    ),
    VLLM: LoadGauges(
        "vllm:num_requests_running",
        ("vllm:num_requests_running",),
        ("vllm:num_requests_waiting",),
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    ),
    SGLANG: LoadGauges(
        "sglang:num_running_reqs", ("sglang:num_running_reqs",), ("sglang:num_queue_reqs",), ("sglang:token_usage",)
    ),
    TGI: LoadGauges("tgi_queue_size", ("tgi_batch_current_size",), ("tgi_queue_size",)),
}


def parse_exposition(text: str) -> Counters:
    """Every sample of a Prometheus text exposition, summed by metric name (labels dropped)."""
    values: Counters = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, rest = line[: line.index("{")], line[line.rindex("}") + 1 :]
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        if not fields:
            continue
        try:
            values[name] = values.get(name, 0.0) + float(fields[0])
        except ValueError:
            continue
    return values


def dialect(counters: Counters) -> str | None:
    if "llamacpp:tokens_predicted_total" in counters:
        return LLAMA_CPP
    if "vllm:generation_tokens_total" in counters:
        return VLLM
    return None


def scrape(url: str, timeout_s: float = 2.0) -> Counters | str:
    """The server's counters, or why there are none (the run goes on without the check)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return parse_exposition(response.read().decode("utf-8", "replace"))
    except Exception as exc:  # a missing or failing endpoint only costs the check
        return f"{url}: {exc}"


@dataclass(frozen=True)
class _Figure:
    name: str
    definition: str
    server: float
    client: float


def _delta(before: Counters, after: Counters, name: str) -> float | None:
    if name not in after:
        return None
    return after[name] - before.get(name, 0.0)


def _histogram_mean_s(before: Counters, after: Counters, base: str) -> float | None:
    count = _delta(before, after, f"{base}_count")
    total = _delta(before, after, f"{base}_sum")
    return total / count if count and total is not None else None


def _llama_cpp(before: Counters, after: Counters, tokens: TokenFigures) -> list[_Figure]:
    figures = []
    if (predicted := _delta(before, after, "llamacpp:tokens_predicted_total")) is not None:
        figures.append(_Figure("outputTokens", "output tokens", predicted, tokens.output_tokens))
    prompt = _delta(before, after, "llamacpp:prompt_tokens_total")
    if prompt is not None:
        cached = _delta(before, after, "llamacpp:prompt_tokens_cached_total") or 0.0
        definition = "input tokens (processed + cached)"
        figures.append(_Figure("inputTokens", definition, prompt + cached, tokens.input_tokens))
    seconds = _delta(before, after, "llamacpp:tokens_predicted_seconds_total")
    if seconds is not None and tokens.itl_chunk.count and tokens.itl_chunk.mean_ms is not None:
        # llama.cpp times generation from the first token to the last, which is the sum of the gaps between
        # content chunks the generator saw (their mean times their count).
        client_s = tokens.itl_chunk.mean_ms * tokens.itl_chunk.count / 1000
        figures.append(_Figure("generationSeconds", "seconds from first to last token, summed", seconds, client_s))
    return figures


def _vllm(before: Counters, after: Counters, tokens: TokenFigures) -> list[_Figure]:
    figures = []
    if (generated := _delta(before, after, "vllm:generation_tokens_total")) is not None:
        figures.append(_Figure("outputTokens", "output tokens", generated, tokens.output_tokens))
    if (prompt := _delta(before, after, "vllm:prompt_tokens_total")) is not None:
        figures.append(_Figure("inputTokens", "input tokens", prompt, tokens.input_tokens))
    ttft = _histogram_mean_s(before, after, "vllm:time_to_first_token_seconds")
    if ttft is not None and tokens.ttft_service.mean_ms is not None:
        figures.append(_Figure("meanTtftMs", "mean time to first token, ms", ttft * 1000, tokens.ttft_service.mean_ms))
    itl = _histogram_mean_s(before, after, "vllm:inter_token_latency_seconds")
    if itl is None:
        itl = _histogram_mean_s(before, after, "vllm:time_per_output_token_seconds")
    if itl is not None and tokens.itl_token.mean_ms is not None:
        figures.append(_Figure("meanItlMs", "mean gap between output tokens, ms", itl * 1000, tokens.itl_token.mean_ms))
    return figures


def server_check(url: str, before: Counters | str, after: Counters | str, tokens: TokenFigures) -> ServerCheck:
    """What the server counted over the measured interval beside what the generator measured."""
    if isinstance(before, str) or isinstance(after, str):
        return ServerCheck(url=url, unavailable=before if isinstance(before, str) else str(after))
    source = dialect(after)
    if source is None:
        return ServerCheck(url=url, unavailable=f"{url} exports no llama.cpp or vLLM generation metrics")
    figures = (_llama_cpp if source == LLAMA_CPP else _vllm)(before, after, tokens)
    return ServerCheck(
        url=url,
        source=source,
        comparisons=[
            ServerComparison(
                figure=f.name,
                definition=f.definition,
                server=round(f.server, 6),
                generator=round(f.client, 6),
                difference=round((f.client - f.server) / f.server, 6) if f.server else None,
            )
            for f in figures
        ],
    )


def _first(counters: Counters, names: tuple[str, ...]) -> float | None:
    return next((counters[name] for name in names if name in counters), None)


def _mean_max(readings: list[Counters], names: tuple[str, ...]) -> tuple[float | None, float | None]:
    values = [v for r in readings if (v := _first(r, names)) is not None]
    if not values:
        return None, None
    return round(sum(values) / len(values), 4), max(values)


def _busy_slots_per_decode(before: Counters, after: Counters) -> float | None:
    """llama.cpp exports the average since it started (busy slots summed over decode calls / decode calls):
    over the interval, the difference of the sums over the difference of the calls."""
    name, calls = "llamacpp:n_busy_slots_per_decode", "llamacpp:n_decode_total"
    if name not in after or calls not in after:
        return None
    decodes = after[calls] - before.get(calls, 0.0)
    if decodes <= 0:
        return None
    busy = after[name] * after[calls] - before.get(name, 0.0) * before.get(calls, 0.0)
    return round(busy / decodes, 4)


def server_load(readings: list[Counters | str]) -> ServerLoad | None:
    """How busy the server was over the measured interval, from its metrics read at every window edge (the
    first and last are the interval's edges); None when no reading has gauges this module knows."""
    found = [r for r in readings if not isinstance(r, str)]
    if not found:
        return None
    source = next((name for name, gauges in LOAD_GAUGES.items() if gauges.marker in found[-1]), None)
    if source is None:
        return None
    gauges = LOAD_GAUGES[source]
    running_mean, running_max = _mean_max(found, gauges.running)
    waiting_mean, waiting_max = _mean_max(found, gauges.waiting)
    kv = [v for r in found if (v := _first(r, gauges.kv_cache)) is not None]
    preempted = [_first(r, gauges.preemptions) for r in (found[0], found[-1])]
    first, last = preempted
    return ServerLoad(
        source=source,
        samples=len(found),
        running_mean=running_mean,
        running_max=running_max,
        waiting_mean=waiting_mean,
        waiting_max=waiting_max,
        busy_slots_per_decode=_busy_slots_per_decode(found[0], found[-1]) if source == LLAMA_CPP else None,
        kv_cache_usage_max=max(kv) if kv else None,
        preemptions=last - (first or 0.0) if last is not None else None,
    )
