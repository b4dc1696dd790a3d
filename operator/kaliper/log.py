"""Logging for the whole package, set up once: JSON lines in a cluster, readable lines on a terminal.

structlog renders both Kaliper's own events and those of libraries that log through the standard library
(kopf, urllib3), and a redaction step keeps credentials out of every line.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
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
    handler.addFilter(RepeatedRetries())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request at INFO ("HTTP Request: GET <url> ..."): a readiness probe every 0.1 s, each
    # Prometheus query, a model URL that may carry a signed token. Its warnings and errors still show.
    for chatty in QUIET_LIBRARIES:
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))
    # urllib3 warns of each retry of a connection inside one call ("Retrying (Retry(total=2...))"); the call's
    # own failure is what the operator handles and logs.
    logging.getLogger("urllib3.connectionpool").setLevel(max(logging.ERROR, root.level))
    # kopf says "Handler 'x' succeeded." for every watch event (every pod's every change): at debug only. The
    # operator's own lines say what it did; kopf's warnings and errors still show.
    if root.level > logging.DEBUG:
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


class RepeatedRetries(logging.Filter):
    """Lets through one line per kind of repeated library failure a minute, and says how many more there were.

    During an API server outage kopf logs every failed attempt of its watch and event requests ("Request attempt
    #3/9 failed; will retry: GET <url> -> <error>") and every watch-event handler that met the outage ("Handler
    'x' failed with an exception and will ignore it", with a traceback): thousands of lines an hour. A kind is
    the message with its numbers, URL query and error details taken out; the first of a kind passes, the same
    kind again within `every_s` is counted, and the next one let through says how many were held back. A
    handler's ApiServerAway loses its traceback: the operator's own lines say the API server is away."""

    def __init__(self, every_s: float = 60.0, clock: Any = None) -> None:
        super().__init__()
        self.every_s, self._clock = every_s, clock or time.monotonic
        self._seen: dict[str, tuple[float, int]] = {}  # kind -> (when its last line passed, held back since)

    @staticmethod
    def kind(record: logging.LogRecord) -> str | None:
        message = record.getMessage()
        if record.exc_info and type(record.exc_info[1]).__name__ == "ApiServerAway":
            head = message.split(":", 1)[0]  # "Handler 'x' failed with an exception and will ignore it"
            record.msg, record.args = f"{head}: the API server is away", ()
            record.exc_info = record.exc_text = None
            return head
        if not message.startswith("Request attempt #"):
            return None
        message = message.split(" -> ", 1)[0]  # the error's details
        message = re.sub(r"\?\S*", "", message)  # a watch's resourceVersion and timeouts
        return re.sub(r"#\d+(/\d+)?", "#", message)

    def filter(self, record: logging.LogRecord) -> bool:
        kind = self.kind(record)
        if kind is None:
            return True
        now = self._clock()
        passed_at, held = self._seen.get(kind, (None, 0))
        if passed_at is not None and now - passed_at < self.every_s:
            self._seen[kind] = (passed_at, held + 1)
            return False
        self._seen[kind] = (now, 0)
        if held and passed_at is not None:
            record.msg, record.args = (
                f"{record.getMessage()} ({held} more like it in the last {now - passed_at:.0f} s)",
                (),
            )
        return True


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.stdlib.get_logger(name)
