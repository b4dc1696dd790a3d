"""The generator checks itself against the server: counters a generation server exports on its Prometheus
endpoint, read at the edges of the measured interval, set beside what the generator measured over the same
interval. Parsing and comparing are pure; `scrape` is the only I/O.

Which counters and gauges a server exports is said by its runtime module (`token_counters`, `load_gauges`
in kaliper.runtimes), by the metric names the server's own code uses; labels such as model_name are summed
over. How busy the server was (ServerLoad) comes from those gauges read at every window edge: requests
running and queued (and, where the server sums the seconds its requests spent in each, their time-weighted
means), llama.cpp's running average of busy slots per decode call, the KV cache's share in use,
preemptions and the prefix cache's hit rate."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from kaliper.report.schema import ServerCheck, ServerComparison, ServerLoad, TokenFigures
from kaliper.runtimes import LoadGauges, TokenCounters, load_gauges, token_counters

Counters = dict[str, float]


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
    """Which server's token counters the exposition holds (its display name), or None."""
    return next((name for name, c in token_counters().items() if c.output_tokens in counters), None)


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


def _figures(counters: TokenCounters, before: Counters, after: Counters, tokens: TokenFigures) -> list[_Figure]:
    figures = []
    if (output := _delta(before, after, counters.output_tokens)) is not None:
        figures.append(_Figure("outputTokens", "output tokens", output, tokens.output_tokens))
    first, *more = counters.input_tokens
    if (prompt := _delta(before, after, first)) is not None:
        prompt += sum(_delta(before, after, name) or 0.0 for name in more)
        figures.append(_Figure("inputTokens", counters.input_definition, prompt, tokens.input_tokens))
    seconds = _delta(before, after, counters.generation_seconds) if counters.generation_seconds else None
    if seconds is not None and tokens.itl_chunk.count and tokens.itl_chunk.mean_ms is not None:
        # The server times generation from the first token to the last, which is the sum of the gaps between
        # content chunks the generator saw (their mean times their count).
        client_s = tokens.itl_chunk.mean_ms * tokens.itl_chunk.count / 1000
        figures.append(_Figure("generationSeconds", "seconds from first to last token, summed", seconds, client_s))
    ttft = _histogram_mean_s(before, after, counters.ttft_histogram) if counters.ttft_histogram else None
    if ttft is not None and tokens.ttft_service.mean_ms is not None:
        figures.append(_Figure("meanTtftMs", "mean time to first token, ms", ttft * 1000, tokens.ttft_service.mean_ms))
    itl = next(
        (m for name in counters.itl_histograms if (m := _histogram_mean_s(before, after, name)) is not None), None
    )
    if itl is not None and tokens.itl_token.mean_ms is not None:
        figures.append(_Figure("meanItlMs", "mean gap between output tokens, ms", itl * 1000, tokens.itl_token.mean_ms))
    return figures


def server_check(url: str, before: Counters | str, after: Counters | str, tokens: TokenFigures) -> ServerCheck:
    """What the server counted over the measured interval beside what the generator measured."""
    if isinstance(before, str) or isinstance(after, str):
        return ServerCheck(url=url, unavailable=before if isinstance(before, str) else str(after))
    source = dialect(after)
    if source is None:
        known = " or ".join(token_counters())
        return ServerCheck(url=url, unavailable=f"{url} exports no {known} generation metrics")
    figures = _figures(token_counters()[source], before, after, tokens)
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


def _busy_slots_per_decode(gauges: LoadGauges, before: Counters, after: Counters) -> float | None:
    """llama.cpp exports the average since it started (busy slots summed over decode calls / decode calls):
    over the interval, the difference of the sums over the difference of the calls."""
    if gauges.busy_slots is None:
        return None
    name, calls = gauges.busy_slots
    if name not in after or calls not in after:
        return None
    decodes = after[calls] - before.get(calls, 0.0)
    if decodes <= 0:
        return None
    busy = after[name] * after[calls] - before.get(name, 0.0) * before.get(calls, 0.0)
    return round(busy / decodes, 4)


def _prefix_cache_hit_rate(gauges: LoadGauges, before: Counters, after: Counters) -> float | None:
    if gauges.prefix_cache is None:
        return None
    queries, hits = (_delta(before, after, name) for name in gauges.prefix_cache)
    return round(hits / queries, 4) if queries and hits is not None else None


def _time_weighted(gauges: LoadGauges, before: Counters, after: Counters, interval_s: float) -> list[float | None]:
    """Requests running and queued on average over the interval: the seconds spent in each state, summed by
    the server over the requests that finished, risen over the interval, per second of it."""
    if gauges.seconds_in_state is None or interval_s <= 0:
        return [None, None]
    rises = (_delta(before, after, name) for name in gauges.seconds_in_state)
    return [round(r / interval_s, 4) if r is not None else None for r in rises]


def server_load(readings: list[Counters | str], interval_s: float) -> ServerLoad | None:
    """How busy the server was over the measured interval (`interval_s` long), from its metrics read at every
    window edge (the first and last are the interval's edges); None when no reading has gauges this module
    knows."""
    found = [r for r in readings if not isinstance(r, str)]
    if not found:
        return None
    source = next((name for name, gauges in load_gauges().items() if gauges.marker in found[-1]), None)
    if source is None:
        return None
    gauges = load_gauges()[source]
    running_mean, running_max = _mean_max(found, gauges.running)
    waiting_mean, waiting_max = _mean_max(found, gauges.waiting)
    kv = [v for r in found if (v := _first(r, gauges.kv_cache)) is not None]
    preempted = [_first(r, gauges.preemptions) for r in (found[0], found[-1])]
    first, last = preempted
    running_weighted, waiting_weighted = _time_weighted(gauges, found[0], found[-1], interval_s)
    return ServerLoad(
        source=source,
        samples=len(found),
        running_mean=running_mean,
        running_max=running_max,
        waiting_mean=waiting_mean,
        waiting_max=waiting_max,
        running_time_weighted=running_weighted,
        waiting_time_weighted=waiting_weighted,
        busy_slots_per_decode=_busy_slots_per_decode(gauges, found[0], found[-1]),
        kv_cache_usage_max=max(kv) if kv else None,
        preemptions=last - (first or 0.0) if last is not None else None,
        prefix_cache_hit_rate=_prefix_cache_hit_rate(gauges, found[0], found[-1]),
    )
