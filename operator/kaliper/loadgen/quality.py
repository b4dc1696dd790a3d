"""A configuration's answers to the quality dataset (a ProfileRun's spec.quality): asked once its stages are over,
with no load running, so scoring never shares the clock with latency; one row at a time, greedily (temperature
0, unstreamed), each answer kept as the server gave it. Scoring them is the plan's (kaliper.profiling.quality),
which compares configurations."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from kaliper.loadgen.config import LoadGenConfig, LoadGenError, QualityAsk, request_headers
from kaliper.report.schema import QualityAnswers

ROW_EXAMPLE = '{"prompt": "What is 2 + 2?", "expected": "4"}'
TIMEOUT_S = 120.0  # one greedy answer of at most maxTokens tokens


def read_rows(ask: QualityAsk) -> list[tuple[str, str | None]]:
    """(prompt, expected) of the dataset's first rows; LoadGenError naming the line that is not a row."""
    rows: list[tuple[str, str | None]] = []
    try:
        lines = Path(ask.file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadGenError(f"quality.dataset: cannot read {ask.file}: {exc}") from exc
    for number, text in enumerate(lines, start=1):
        if len(rows) >= ask.rows:
            break
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadGenError(f"quality.dataset line {number}: not JSON ({exc.msg}); write {ROW_EXAMPLE}") from exc
        prompt, expected = (row.get("prompt"), row.get("expected")) if isinstance(row, dict) else (None, None)
        if not isinstance(prompt, str) or not (expected is None or isinstance(expected, str | int | float)):
            raise LoadGenError(f"quality.dataset line {number}: a row is {ROW_EXAMPLE}")
        rows.append((prompt, None if expected is None else str(expected)))
    if not rows:
        raise LoadGenError(f"quality.dataset {ask.file} has no rows; write one per line: {ROW_EXAMPLE}")
    return rows


def request_body(config: LoadGenConfig, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One greedy, unstreamed request for the row's answer, in the run's protocol."""
    body: dict[str, Any] = {"model": config.request.model_name, "max_tokens": max_tokens, "temperature": 0}
    if config.request.protocol == "openai-chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return {**body, "stream": False}


def answer_text(config: LoadGenConfig, document: dict[str, Any]) -> str:
    choice = document["choices"][0]
    if config.request.protocol == "openai-chat":
        return choice["message"].get("content") or ""
    return choice["text"]


def ask(config: LoadGenConfig) -> QualityAnswers:
    """Every row's answer from the target, in order; a failed request leaves its row unanswered (None)."""
    assert config.quality is not None
    rows = read_rows(config.quality)
    headers = {**request_headers(config), "Content-Type": "application/json"}
    answers: list[str | None] = []
    failed, first_failure = 0, None
    started = time.monotonic()
    with httpx.Client(timeout=TIMEOUT_S) as client:
        for prompt, _ in rows:
            try:
                response = client.post(
                    config.target, json=request_body(config, prompt, config.quality.max_tokens), headers=headers
                )
                response.raise_for_status()
                answers.append(answer_text(config, response.json()))
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
                failed += 1
                first_failure = first_failure or f"{type(exc).__name__}: {exc}"[:512]
                answers.append(None)
    return QualityAnswers(
        rows=len(rows),
        expected=[expected for _, expected in rows],
        answers=answers,
        failed=failed,
        first_failure=first_failure,
        seconds=round(time.monotonic() - started, 3),
    )
