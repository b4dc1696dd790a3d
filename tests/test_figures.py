"""The catalogue of figures (kaliper.measure.figures) is where each figure is named, and every part that
handles a figure has the fields its row names: a new row without them fails here, naming what is missing."""

from __future__ import annotations

import dataclasses
from typing import get_args

from kaliper.api.profilerun import LatencyObjective, StreamingMetric, TokenSummary
from kaliper.loadgen.recorder import Window
from kaliper.loadgen.tokens import Reached, RequestTokens, TokenWindow
from kaliper.measure.figures import FIGURES, OBJECTIVE_NAMES, STATUS_FIGURES, token_names_text
from kaliper.report.schema import StageResult, TokenFigures


def test_the_catalogue_names_the_figures_users_know() -> None:
    assert list(FIGURES) == ["latency", "ttft", "ttfot", "itl", "itl_token", "tpot"]
    assert OBJECTIVE_NAMES == ("latency", "ttft", "ttfot", "itl", "tpot")
    assert get_args(StreamingMetric) == ("latency", "ttft", "ttfot", "itl", "tpot")
    assert [row.name for row in STATUS_FIGURES] == ["ttft", "ttfot", "itl", "tpot"]
    assert token_names_text() == "ttft, ttfot, itl and tpot"
    assert [row.name for row in FIGURES.values() if row.instant] == ["ttft", "ttfot"]  # a stream in flight has them
    assert LatencyObjective.model_json_schema()["properties"]["metric"]["enum"] == [
        "latency",
        "ttft",
        "ttfot",
        "itl",
        "tpot",
    ]


def test_every_row_has_its_fields_wherever_the_figure_is_handled() -> None:
    missing = []
    window_fields = {f.name for f in dataclasses.fields(Window)}
    token_window_fields = {f.name for f in dataclasses.fields(TokenWindow)}
    request_fields = {f.name for f in dataclasses.fields(RequestTokens)} | {"largest_gap_s"}
    for row in FIGURES.values():
        windows, reports = (
            (token_window_fields, TokenFigures.model_fields) if row.token else (window_fields, StageResult.model_fields)
        )
        for name in (row.window, row.window_corrected):
            if name is not None and name not in windows:
                missing.append(f"{row.name}: window histogram {name}")
        for name in (row.report, row.report_service):
            if name is not None and name not in reports:
                missing.append(f"{row.name}: results field {name}")
        for name in (row.request, row.request_corrected, row.samples):
            if name is not None and name not in request_fields:
                missing.append(f"{row.name}: request value {name}")
        if row.token and row.samples is None:
            missing.append(f"{row.name}: the request values its histogram records (samples)")
        if row.instant:
            missing += [
                f"{row.name}: reached value {name}"
                for name in (row.request, row.request_corrected)
                if name not in {f.name for f in dataclasses.fields(Reached)}
            ]
        if row.status:
            missing += [
                f"{row.name}: status column {c}"
                for c in (f"{row.name}_p50_ms", f"{row.name}_p99_ms")
                if c not in TokenSummary.model_fields
            ]
    assert missing == []
