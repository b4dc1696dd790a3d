"""Logging for the whole package, set up once: JSON lines in a cluster, readable lines on a terminal.

structlog renders both Kaliper's own events and those of libraries that log through the standard library
(kopf, urllib3), and a redaction step keeps credentials out of every line.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, Literal

import structlog

LogFormat = Literal["auto", "json", "console"]
REDACTED = "***"
# Keys whose values are credentials wherever they appear (event fields, nested headers dicts).
_SECRET_KEY = re.compile(r"(authorization|token|password|passwd|secret|api[-_]?key|cookie|credential)", re.I)


def redact(value: Any) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced, at any depth."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if _SECRET_KEY.search(str(k)) else redact(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value


def redacted_url(url: str) -> str:
    """A URL without the password of its user part (https://user:***@host/), for status, reports and errors."""
    return re.sub(r"^(\w+://[^/@:]*:)[^/@]*@", rf"\g<1>{REDACTED}@", url)


def _redact_event(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    return redact(event)


def resolve_format(fmt: LogFormat) -> Literal["json", "console"]:
    """auto: JSON inside a Kubernetes pod (log collectors parse it), console elsewhere."""
    if fmt != "auto":
        return fmt
    return "json" if os.environ.get("KUBERNETES_SERVICE_HOST") else "console"


QUIET_LIBRARIES = ("httpx", "httpcore")


def configure_logging(level: str = "info", fmt: LogFormat = "auto", stream: Any = None) -> None:
    """Set up structlog and the standard library's root logger. Safe to call again (tests do)."""
    stream = stream or sys.stderr
    renderer: Any
    if resolve_format(fmt) == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,  # exc_info=True: the traceback as text, redacted like the rest
        _redact_event,
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request at INFO ("HTTP Request: GET <url> ..."): a readiness probe every 0.1 s, each
    # Prometheus query, a model URL that may carry a signed token. Its warnings and errors still show.
    for chatty in QUIET_LIBRARIES:
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)
