from __future__ import annotations

import io
import json
import logging

import httpx

from kaliper.log import REDACTED, configure_logging, get_logger, redact, redacted_url, resolve_format


def test_json_lines_with_secrets_redacted() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    get_logger("kaliper.test").info(
        "sending", url="http://x", headers={"Authorization": "Bearer s3cret", "Accept": "json"}, api_key="k"
    )
    logging.getLogger("kopf.objects").warning("from the standard library", extra={})
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["event"] == "sending"
    assert lines[0]["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert lines[0]["api_key"] == REDACTED
    assert lines[0]["level"] == "info" and "timestamp" in lines[0]
    assert lines[1]["event"] == "from the standard library" and lines[1]["logger"] == "kopf.objects"
    assert "s3cret" not in stream.getvalue()


def test_console_format_is_plain_text() -> None:
    stream = io.StringIO()
    configure_logging("debug", "console", stream=stream)
    get_logger("kaliper.test").debug("hello", trial=3)
    text = stream.getvalue()
    assert "hello" in text and "trial=3" in text
    assert not text.lstrip().startswith("{")


def test_auto_format_is_json_inside_a_pod(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert resolve_format("auto") == "console"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert resolve_format("auto") == "json"


def test_redact_reaches_nested_lists() -> None:
    assert redact({"items": [{"token": "t", "name": "n"}]}) == {"items": [{"token": REDACTED, "name": "n"}]}


def test_httpx_requests_are_not_logged_at_info() -> None:
    # httpx writes "HTTP Request: GET <url> ..." at INFO for every request (a readiness probe every 0.1 s).
    stream = io.StringIO()
    configure_logging("info", "json", stream)
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    with httpx.Client(transport=transport) as client:
        assert client.get("http://127.0.0.1:9/v2/health/ready?token=s3cret").status_code == 200
    get_logger("kaliper.test").info("probed")
    assert [json.loads(line)["event"] for line in stream.getvalue().splitlines()] == ["probed"]


def test_a_urls_password_is_redacted_and_nothing_else() -> None:
    assert redacted_url("https://kaliper:s3cret@prometheus:9090/api") == "https://kaliper:***@prometheus:9090/api"
    assert redacted_url("http://prometheus.monitoring:9090") == "http://prometheus.monitoring:9090"
    assert redacted_url("http://kaliper@prometheus/") == "http://kaliper@prometheus/"  # a user alone is no secret
