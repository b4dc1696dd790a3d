"""The HTML reports as a newcomer opens them: in a real browser (headless chromium), at 1,280 px nothing
reaches past the window's edge (every folded detail opened too) and every chart is drawn; at 1,400 px, a
screenshot. The pages: a ProfileRun's with long messages, capacities and a baseline comparison, and a
ModelOptimization's with a failed candidate. And the documentation site's pages (tests/test_docs_site.py
builds it): at 1,280 px nothing past the edge, and three screenshots in the test's output folder."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kaliper.api.profilerun import Capacity
from kaliper.report.optimization_html import write_optimization_html
from kaliper.report.profile_html import write_html
from kaliper.report.schema import FigureComparison, RecommendationReport
from tests.support.browser import layout, screenshot
from tests.support.docs_site import PAGES, REPO, build_site
from tests.support.sample_reports import demo_report, seven_trials


def profile_page(path: Path) -> Path:
    report = seven_trials()
    report.capacities = [
        Capacity(
            parameters={"cpu": cpu},
            level_name="concurrency",
            met=4,
            not_met=5,
            trial=trial,
            probes=2,
            unit_cost=cost,
            unit_cost_low=cost * 0.9,
            unit_cost_high=cost * 1.15,
        )
        for trial, cpu, cost in ((0, "250m", 0.01), (1, "500m", 0.02), (3, "1", 0.04))
    ]
    report.recommendation = RecommendationReport(
        cpu_request="230m", cpu_limit="250m", memory_request="116Mi", memory_limit="139Mi", replicas=3,
        replicas_low=3, replicas_high=4, rationale="3 replicas, 95% interval 3-4",
    )  # fmt: skip
    report.comparison = [
        FigureComparison(
            parameters={"cpu": cpu, "concurrency": "4"}, figure=figure, unit=unit, baseline=value,
            baseline_low=value * 0.95, baseline_high=value * 1.05, value=value * 1.2, low=value * 1.1,
            high=value * 1.3, change=0.2, verdict="worse",
        )
        for cpu in ("250m", "500m", "750m", "1", "1500m", "2")
        for figure, unit, value in (("latency p99", "ms", 20.0), ("throughput", "req/s", 100.0))
    ]  # fmt: skip
    return write_html(report, path)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pages")
    return {
        "profile": profile_page(folder / "profile.html"),
        "optimization": write_optimization_html(demo_report(), folder / "optimization.html"),
    }


# Charts each page draws: latency vs throughput, cost at capacity, cost vs p99, CPU, memory and the two
# figures against the baseline; latency vs accuracy, vs size, and kernel time per operator type.
CHARTS = {"profile": 7, "optimization": 3}


@pytest.mark.parametrize("name", ["profile", "optimization"])
def test_nothing_reaches_past_a_1280_px_window_and_every_chart_draws(
    name: str, pages: dict[str, Path], tmp_path: Path
) -> None:
    found = layout(pages[name], 1280, tmp_path)
    assert found.wide == [] and found.scroll_width == found.width == 1280
    assert found.charts == CHARTS[name]


@pytest.mark.parametrize("name", ["profile", "optimization"])
def test_a_screenshot_at_1400_px(name: str, pages: dict[str, Path], tmp_path: Path) -> None:
    shot = screenshot(pages[name], 1400, 2000, tmp_path / f"{name}.png")
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (1400, 2000)  # the IHDR's width and height


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    done = build_site(REPO / "mkdocs.yml", out)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("page", PAGES)
def test_no_documentation_page_reaches_past_a_1280_px_window(page: str, site: Path) -> None:
    found = layout(site / page, 1280, (site / page).parent)  # beside the page: its styles and scripts load
    assert found.wide == [] and found.scroll_width == found.width == 1280


def test_screenshots_of_three_documentation_pages(site: Path, tmp_path: Path) -> None:
    for page in ("index.html", "how-to/gitops.html", "security.html"):
        shot = screenshot(site / page, 1280, 900, tmp_path / page.replace("/", "-").replace(".html", ".png"))
        header = shot.read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", header[16:24]) == (1280, 900)
        print(f"screenshot of {page}: {shot}")
