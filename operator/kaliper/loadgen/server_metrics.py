"""The generator checks itself against the server: counters a generation server exports on its Prometheus
endpoint, read at the edges of the measured interval, set beside what the generator measured over the same
interval. Parsing and comparing are pure; `scrape` is the only I/O.

Which counters and gauges a server exports is said by its runtime module (`token_counters`, `load_gauges`
in kaliper.runtimes), by the metric names the server's own code uses; labels such as model_name are summed
over. How busy the server was (ServerLoad) comes from those gauges read at every window edge, computed as
for Prometheus's scrapes of several pods (kaliper.runtimes.server_load)."""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass

import gevent

from kaliper.report.schema import ServerCheck, ServerComparison, ServerLoad, TokenFigures
from kaliper.runtimes import TokenCounters, load_gauges, token_counters
from kaliper.runtimes.server_load import server_load as load_from_samples

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


def server_load(readings: list[Counters | str], window_s: float) -> ServerLoad | None:
    """How busy the server was over the measured interval, from its metrics read at every window edge
    (`window_s` apart; a reading that failed is left out), as kaliper.runtimes.server_load computes it for
    one pod; None when no reading has gauges a runtime names."""
    found = [(edge * window_s, r) for edge, r in enumerate(readings) if not isinstance(r, str)]
    if not found:
        return None
    source = next((name for name, gauges in load_gauges().items() if gauges.marker in found[-1][1]), None)
    if source is None:
        return None

    def read(name: str) -> dict[str, list[tuple[float, float]]]:
        points = [(t, reading[name]) for t, reading in found if name in reading]
        return {"": points} if points else {}

    return load_from_samples(source, load_gauges()[source], read, "endpoint")


def read_server_at_edges(
    url: str | None, start_wall: float, window_s: float, first_edge: int, readings: dict[int, Counters | str]
) -> None:
    """The server's counters at every window edge from `first_edge` (the end of the warm-up) on, so that the
    self-check covers exactly the measured windows, whichever the last one turns out to be. A reading answered
    after the next edge (the server slow to answer, or this process too busy to ask) is no reading of its edge:
    it says so, rather than stand for counters at a time they were not read (two readings that late read as a
    server that counted nothing). One answered within the window stands: a busy vLLM answers its /metrics up to
    1.5 s late on two cores, at both edges alike."""
    if url is None:
        return
    edge = first_edge
    while True:
        at = start_wall + edge * window_s
        gevent.sleep(max(0.0, at - time.time()))
        counters = scrape(url)
        late = time.time() - at
        if late > window_s and not isinstance(counters, str):
            counters = f"{url}: the counters at {edge * window_s:g} s were read {late:.1f} s late"
        readings[edge] = counters
        edge += 1
