"""The frame both HTML reports share: one self-contained page (plotly inlined, so it opens offline), one
stylesheet, cells escaped one way, written as UTF-8 whatever the locale (the pages carry µ, ★, en dashes)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

STYLE = """body{font-family:sans-serif;margin:2em;max-width:1600px} table{border-collapse:collapse;margin-bottom:1em}
td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top} td.message{min-width:20em;max-width:40em;
white-space:pre-wrap;overflow-wrap:anywhere} .swatch{display:inline-block;width:0.8em;height:0.8em;
margin-right:0.4em} .alert{color:#b00020;font-weight:bold;font-size:1.1em} .notice{color:#555}
tr.chosen{background:#e8f5e9;font-weight:bold} tr.failed{color:#b00020} tr.reference{color:#555}
.scroll{overflow-x:auto} td.number{text-align:right;white-space:nowrap} td.parameters{max-width:22em;
overflow-wrap:anywhere} td[title],span[title]{cursor:help} .verdict{font-weight:bold}
.v-Met{color:#1b7f3b} .v-NotMet,.v-Failed{color:#b00020} .v-Inconclusive{color:#a15c00} .v-Skipped{color:#777}
.answer{border:2px solid #1b7f3b;border-radius:6px;padding:0.5em 1em;margin:1em 0;max-width:1200px}
.answer th{text-align:left;white-space:nowrap;background:#f4f4f4} .answer td,.answer li{overflow-wrap:anywhere}
details{margin:0.3em 0} details li,details pre{white-space:pre-wrap;overflow-wrap:anywhere}"""


def cell(text: str, css: str = "", title: str = "") -> str:
    """A table cell holding `text`, escaped, with an optional class and `title` shown on hover."""
    style = f' class="{css}"' if css else ""
    hover = f' title="{html.escape(title)}"' if title else ""
    return f"<td{style}{hover}>{html.escape(text)}</td>"


def header_row(headers: Sequence[str]) -> str:
    return "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"


def page(title: str, body: str) -> str:
    """The whole page around `body` (already HTML), titled `title` (text)."""
    from plotly.offline import get_plotlyjs

    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<script type="text/javascript">{get_plotlyjs()}</script>
<style>{STYLE}</style></head>
<body>{body}</body></html>
"""


def write_page(text: str, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
