"""A report page opened in a real browser (Debian's chromium, headless; `make system-deps` installs it): a
screenshot, and every element that reaches past the window's right edge, as a newcomer opening the page
would see them. One browser per test process serves every page (Browser)."""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kaliper.processes import dies_with_this_process

# Run after the page (and plotly's charts) has drawn, with every folded <details> opened: every element whose
# box ends right of the window (unless a frame inside the window scrolls it sideways), the page's width (wider
# than the window: it scrolls sideways), the charts drawn.
_CHECK = """<script>
window.addEventListener("load", () => setTimeout(() => {
  for (const folded of document.querySelectorAll("details")) folded.open = true;
  const width = window.innerWidth;
  const wide = [];
  // Inside a frame that scrolls sideways within the window (a wide table's), an element is scrolled to, not cut.
  const framed = (element) => {
    for (let up = element.parentElement; up && up !== document.body; up = up.parentElement) {
      const overflow = getComputedStyle(up).overflowX;
      if ((overflow === "auto" || overflow === "scroll") && up.getBoundingClientRect().right <= width + 0.5) {
        return true;
      }
    }
    return false;
  };
  for (const element of document.body.querySelectorAll("*")) {
    const box = element.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 0.5 && !framed(element)) {
      wide.push(`${element.tagName.toLowerCase()}.${element.className.baseVal ?? element.className}`
        + ` right edge ${Math.round(box.right)} px`);
    }
  }
  const found = {width: width, scrollWidth: document.documentElement.scrollWidth, wide: wide.slice(0, 20),
                 charts: [...document.querySelectorAll(".plotly-graph-div")]
                   .filter(chart => chart.querySelector(".main-svg")).length};
  const out = document.createElement("pre");
  out.id = "kaliper-layout";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
}, 500));
</script>"""


@dataclass(frozen=True)
class Layout:
    width: int
    """The window's inner width, px."""
    scroll_width: int
    """The page's full width: more than `width` when it scrolls sideways."""
    wide: list[str]
    """Elements reaching past the right edge (tag.class and where they end), at most 20."""
    charts: int
    """Charts plotly drew."""


def chromium() -> str:
    found = shutil.which("chromium")
    assert found is not None, "chromium is not installed: `make system-deps` installs Debian's package"
    return found


class Browser:
    """One headless chromium, driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: no port
    opened), each page in a tab of its own sized to the window asked. One browser serves every page of a test
    process: a chromium started per page was about 16 processes and 2 s of CPU each, some 35 times a run."""

    def __init__(self) -> None:
        self._profile = tempfile.mkdtemp(prefix="kaliper-chromium-")
        to_browser, self._commands = os.pipe()
        self._replies, from_browser = os.pipe()

        tie_to_this_process = dies_with_this_process(signal.SIGKILL)

        def on_fds_3_and_4() -> None:  # in the child: chromium reads commands on fd 3, answers on fd 4
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)
            tie_to_this_process()

        self._process = subprocess.Popen(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", f"--user-data-dir={self._profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=on_fds_3_and_4, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._next_id = b"", 0

    def _message(self, timeout: float) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._replies], [], [], timeout)
            chunk = os.read(self._replies, 1 << 16) if ready else b""
            assert chunk, f"chromium gave no answer within {timeout} s (exit code {self._process.poll()})"
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        """A command's result (events that arrive meanwhile are dropped: the pages are waited on by polling)."""
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            command["sessionId"] = session
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        while (message := self._message(timeout)).get("id") != self._next_id:
            pass
        assert "error" not in message, f"{method}: {message['error']}"
        return message["result"]

    @contextmanager
    def page(self, url: str, width: int, height: int) -> Iterator[str]:
        """A tab `width` x `height` px showing `url` once it has loaded; yields its session for `call`."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
            self.call("Emulation.setDeviceMetricsOverride", metrics, session)
            self.call("Page.navigate", {"url": url}, session)
            self.poll(session, "document.readyState === 'complete' || null", "the page to load")
            yield session
        finally:
            self.call("Target.closeTarget", {"targetId": target})

    def poll(self, session: str, expression: str, what: str, timeout: float = 30) -> object:
        """The expression's value in the page once it is not null."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            evaluated = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
            value = evaluated["result"].get("value")
            if value is not None:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("Browser.close", timeout=10)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(10)
        self._process.kill()
        self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)


@functools.cache
def browser() -> Browser:
    """This process's browser, closed when it exits."""
    started = Browser()
    atexit.register(started.close)
    return started


def layout(page: Path, width: int, workdir: Path) -> Layout:
    """Where the page's elements end in a window `width` px wide."""
    checked = workdir / f"{page.stem}-checked.html"
    checked.write_text(page.read_text(encoding="utf-8").replace("</body>", _CHECK + "</body>"), encoding="utf-8")
    with browser().page(checked.as_uri(), width, 900) as session:
        found = browser().poll(
            session, "document.getElementById('kaliper-layout')?.textContent ?? null", f"{page.name}'s check to run"
        )
    data = json.loads(str(found))
    return Layout(data["width"], data["scrollWidth"], data["wide"], data["charts"])


def screenshot(page: Path, width: int, height: int, out: Path) -> Path:
    """The window `width` x `height` px once the page has loaded, as a PNG."""
    with browser().page(page.as_uri(), width, height) as session:
        charts_drawn = (
            "document.querySelectorAll('.plotly-graph-div .main-svg').length >= "
            "document.querySelectorAll('.plotly-graph-div').length || null"
        )
        browser().poll(session, charts_drawn, f"{page.name}'s charts to be drawn")
        shot = browser().call("Page.captureScreenshot", {"format": "png"}, session)["data"]
    out.write_bytes(base64.b64decode(shot))
    return out
