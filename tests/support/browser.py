"""A report page opened in a real browser (Debian's chromium, headless; `make system-deps` installs it): a
screenshot, and every element that reaches past the window's right edge, as a newcomer opening the page
would see them."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

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


def _headless(*arguments: str, width: int, height: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # running as root
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            "--virtual-time-budget=5000",  # timers run (the check waits on one) without waiting in real time
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def layout(page: Path, width: int, workdir: Path) -> Layout:
    """Where the page's elements end in a window `width` px wide."""
    checked = workdir / f"{page.stem}-checked.html"
    checked.write_text(page.read_text(encoding="utf-8").replace("</body>", _CHECK + "</body>"), encoding="utf-8")
    process = _headless("--dump-dom", checked.as_uri(), width=width, height=900)
    found = re.search(r'<pre id="kaliper-layout">(.*?)</pre>', process.stdout)
    assert found is not None, f"the page's check did not run: {process.stderr[-2000:]}"
    data = json.loads(html.unescape(found.group(1)))
    return Layout(data["width"], data["scrollWidth"], data["wide"], data["charts"])


def screenshot(page: Path, width: int, height: int, out: Path) -> Path:
    process = _headless(f"--screenshot={out}", page.as_uri(), width=width, height=height)
    assert out.exists() and out.stat().st_size > 0, f"no screenshot: {process.stderr[-2000:]}"
    return out
