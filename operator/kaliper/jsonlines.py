"""JSON Lines as every reader of them takes them: blank lines skipped, each other line one JSON value, and a
line that is not JSON refused with its file, line and column in the reader's own error."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


def json_lines(lines: Iterable[str], source: object, error: type[Exception]) -> Iterator[tuple[str, Any]]:
    """(where, value) of each non-blank line, `where` naming `source` and the line's number for the
    caller's own messages; raises `error` at the first line that is not JSON."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}, line {number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
        yield where, value
