"""The catalogue of latency figures: each figure named once, with what it measures and where it lives.

Every part that handles a figure reads its row here: the recorder (which histogram a metric name means, as
measured and as corrected for coordinated omission), the goodput judgement (one request's own value), the
results document (its fields), the decisions (which distribution an objective or a stopping rule watches),
the status (its p50/p99 columns), the API (which names an objective may use) and the reports (its label).
A new figure is a row here, the measurement that makes it (kaliper.loadgen.tokens: the RequestTokens attribute
its row names, and for an instant where a stream in flight has reached it) and its fields in the results and
status schemas (tests/test_figures.py names any that are missing).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str
    """As the API names it (an objective's or a stopping rule's metric) and as status columns start."""
    label: str
    """As reports print it."""
    meaning: str
    """What it measures, in a line."""
    window: str
    """The per-window histogram measured from the actual send (the Window's for latency, else the TokenWindow's)."""
    report: str
    """The results field users read: corrected where a corrected form exists."""
    window_corrected: str | None = None
    """The per-window histogram measured from the intended send under open loop; None: it does not depend on
    when a request was meant to leave."""
    report_service: str | None = None
    """The results field measured from the actual send, where it differs from `report`."""
    request: str | None = None
    """One request's own value (a RequestTokens attribute, seconds), by which goodput judges it; None for
    latency, which the request's send and end times give, and for a figure goodput does not judge."""
    request_corrected: str | None = None
    samples: str | None = None
    """The RequestTokens attribute whose values (one, or a list of gaps) the window's histogram records for a
    successful answer; None for latency, which the recorder measures itself."""
    instant: bool = False
    """A moment a request reaches (its first token): a request still in flight when its stage ends has it
    where it reached it (kaliper.loadgen.tokens.Reached holds the same attributes as `request`)."""
    absent_fails: bool = False
    """A request without its own value (no first token) did not meet an objective on this figure."""
    objective: bool = True
    """May be an SLO's or a stopping rule's metric."""
    status: bool = True
    """Has p50 and p99 columns in the status."""
    token: bool = True
    """A token-stream figure (streamed generation only)."""
    reasoning: bool = False
    """Differs from ttft only where the model thinks: the one-line summaries show it only then."""


LATENCY = Figure(
    "latency",
    "latency",
    "the whole request, from its send (from its intended send under open loop) until the answer ended",
    window="service",
    window_corrected="corrected",
    report="latency",
    report_service="service_time",
    status=False,  # the status has its own latency summary, with every listed percentile
    token=False,
)


def _first_token(name: str, meaning: str, reasoning: bool = False) -> Figure:
    """A moment a stream reaches: measured from the actual and (open loop) the intended send, a request in
    flight keeps it where it reached it, one that never reached it failed; every field it lives in is named
    after it (ttft: the TokenWindow's ttft and ttft_corrected, the results' ttft and ttft_service, the
    RequestTokens' ttft_s and ttft_corrected_s)."""
    return Figure(
        name,
        name,
        meaning,
        window=name,
        window_corrected=f"{name}_corrected",
        report=name,
        report_service=f"{name}_service",
        request=f"{name}_s",
        request_corrected=f"{name}_corrected_s",
        samples=f"{name}_s",
        instant=True,
        absent_fails=True,
        reasoning=reasoning,
    )


TTFT = _first_token(
    "ttft", "time to first token: until the first chunk carrying generated content (thinking included) arrived"
)
TTFOT = _first_token(
    "ttfot",
    "time to first output token: until the first chunk carrying answer arrived, after a reasoning model's "
    "thinking (ttft where the model does not think)",
    reasoning=True,
)
ITL = Figure(
    "itl",
    "itl",
    "every gap between successive content chunks, as they arrived (a request's own: its largest gap)",
    window="itl_chunk",
    report="itl_chunk",
    request="largest_gap_s",
    samples="gaps_s",
)
ITL_PER_TOKEN = Figure(
    "itl_token",
    "itl per token",
    "the gaps between content chunks per token, where each chunk's tokens are known",
    window="itl_token",
    report="itl_token",
    samples="per_token_gaps_s",
    objective=False,
    status=False,
)
TPOT = Figure(
    "tpot",
    "tpot",
    "time per output token after the first: (end-to-end - ttft) / (output tokens - 1)",
    window="tpot",
    report="tpot",
    request="tpot_s",
    samples="tpot_s",
)

FIGURES: dict[str, Figure] = {f.name: f for f in (LATENCY, TTFT, TTFOT, ITL, ITL_PER_TOKEN, TPOT)}
TOKEN_FIGURES = tuple(f for f in FIGURES.values() if f.token)
OBJECTIVE_NAMES = tuple(f.name for f in FIGURES.values() if f.objective)
STATUS_FIGURES = tuple(f for f in FIGURES.values() if f.status)
STATUS_PERCENTILES = (50, 99)


def figure(name: str) -> Figure:
    return FIGURES[name]


def status_figures_shown(thought: bool) -> tuple[Figure, ...]:
    """The status figures a report shows for a stage: the reasoning ones only where the model thought (they
    equal ttft otherwise)."""
    return tuple(row for row in STATUS_FIGURES if thought or not row.reasoning)


def token_histograms() -> tuple[str, ...]:
    """The TokenWindow's histograms from the actual send (the corrected ones exist only under open loop)."""
    return tuple(f.window for f in TOKEN_FIGURES)


def token_names_text() -> str:
    """The token figures an objective may name, in words: "ttft, itl and tpot"."""
    names = [f.name for f in TOKEN_FIGURES if f.objective]
    return ", ".join(names[:-1]) + " and " + names[-1]
