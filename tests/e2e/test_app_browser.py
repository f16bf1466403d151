"""The web app deliverable (render_app) in headless Chromium at a laptop's and a phone's width: its chart's labels
and figures never run into each other, and the page is no wider than the window. The page is opened from a file, as
a downloaded deliverable is. Screenshots go to $CANVAS_SCREENSHOTS (default: a temporary folder), never into the
tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canvas_core.render.html import AppSpec, render_app
from canvas_core.render.structure import parse_markdown
from tests.e2e import browser
from tests.e2e.browser import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SCREENSHOTS = browser.screenshots_folder("canvas-app-screenshots")
NAMES = ["Basic", "Professional Plus", "Team Collaboration", "Enterprise Unlimited", "Education Campus", "Nonprofit"]


def app_with_rows(rows: int, tmp_path: Path) -> Path:
    table = "\n".join(
        f"| {NAMES[i % len(NAMES)]} {i // len(NAMES) or ''} | {9 + 37 * i} | {1 + 50 * i} |" for i in range(rows)
    )
    material = parse_markdown(f"Plans compared.\n\n| Product | Monthly price | Users |\n|---|---|---|\n{table}\n")
    page = tmp_path / "app.html"
    page.write_text(
        render_app(
            AppSpec(
                title="Plans",
                task="Compare the plans",
                sections=material.sections,
                tables=material.tables(),
                references=[],
            )
        ),
        "utf-8",
    )
    return page


# Each text's drawn box as four corners on the page (its box in its own coordinates through its transform, so a
# slanted label is the slanted box it is), and whether two such boxes intersect (no axis of either separates them).
CORNERS_AND_OVERLAPS = """
const corners = (t) => { const b = t.getBBox(), m = t.getScreenCTM();
  return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]].map(([x, y]) =>
    [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]); };
const separated = (p, q) => [p, q].some((poly) => poly.some((a, i) => {
  const b = poly[(i + 1) % 4], axis = [a[1] - b[1], b[0] - a[0]];
  const along = (r) => r.map(([x, y]) => x * axis[0] + y * axis[1]);
  const [u, v] = [along(p), along(q)];
  return Math.max(...u) <= Math.min(...v) + 0.5 || Math.max(...v) <= Math.min(...u) + 0.5; }));
"""


# The toolbar's labels drawn on another line than the list each names.
LABELS_APART = (
    "return [...document.querySelectorAll('.toolbar label.inline')].filter((label) => {"
    " const l = label.getBoundingClientRect(), c = document.getElementById(label.htmlFor).getBoundingClientRect();"
    " return l.bottom <= c.top || c.bottom <= l.top; }).map((label) => label.textContent);"
)


def overlapping(driver: Any, selector: str) -> list[tuple[str, str]]:
    """Pairs of the chart's texts (of `selector`) whose drawn boxes intersect."""
    return driver.execute_script(
        CORNERS_AND_OVERLAPS + "const texts = [...document.querySelectorAll(arguments[0])].map((t) =>"
        " [t.textContent, corners(t)]);"
        "const pairs = [];"
        "texts.forEach(([a, p], i) => texts.slice(i + 1).forEach(([b, q]) => {"
        " if (!separated(p, q)) pairs.push([a, b]); }));"
        "return pairs;",
        selector,
    )


@pytest.mark.parametrize("rows", [3, 6, 12, 24])
def test_the_apps_chart_and_toolbar_labels_never_overlap_or_part_on_a_laptop_or_a_phone(driver, tmp_path, rows):
    # Given a web app of a table of products (names of every length), drawn as a chart
    page = app_with_rows(rows, tmp_path)
    try:
        for width, height in ((1366, 768), (390, 844)):
            # When it is opened in a window of that width
            driver.set_window_size(width, height)
            driver.get(page.as_uri())
            wait_until(lambda: driver.find_elements("css selector", ".chart svg .bar-label"), what="the chart")
            browser.screenshot(driver, SCREENSHOTS, f"app-{rows}-rows-{width}")

            # Then no two of its bars' names, nor two of its figures, intersect, and a name is shown at least for
            # every other bar
            assert overlapping(driver, ".chart svg .bar-label") == [], f"{width} px"
            assert overlapping(driver, ".chart svg .value") == [], f"{width} px"
            shown = len(driver.find_elements("css selector", ".chart svg .bar-label"))
            assert shown >= rows / 2 or width < 1000, (shown, rows)
            assert shown >= min(rows, 8) / 2, (shown, rows)
            # And the labels stay within the chart, and the page within the window
            assert driver.execute_script(
                CORNERS_AND_OVERLAPS + "const box = document.querySelector('.chart svg').getBoundingClientRect();"
                "return [...document.querySelectorAll('.chart svg .bar-label')].every((t) =>"
                " corners(t).every(([x, y]) => x >= box.left - 0.5 && x <= box.right + 0.5 && y <= box.bottom + 0.5));"
            ), f"{width} px"
            assert driver.execute_script("return document.scrollingElement.scrollWidth <= window.innerWidth")
            # And at this width and those near it, each toolbar label sits on the line of the list it names
            for near in range(width - 30, width + 31, 3):
                driver.set_window_size(near, height)
                assert driver.execute_script(LABELS_APART) == [], f"{near} px"
    finally:
        driver.set_window_size(1400, 1000)
