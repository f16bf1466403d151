"""Headless Chromium for the browser tests: Debian's chromium driven through its own chromedriver, so nothing is
downloaded (selenium's driver manager is never asked); a fresh profile each time. `make browser` installs both.
axe-core (`make axe`, into .cache/axe) checks a page's accessibility from inside it. With them, what the browser tests
share: waiting for the page, finding an element, saving a screenshot."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
AXE = Path(__file__).resolve().parents[2] / ".cache" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
# The impacts a page may not have: axe-core's two highest of minor, moderate, serious, critical.
BLOCKING_IMPACTS = ("serious", "critical")
# The rules run: WCAG 2.0, 2.1 and 2.2 at levels A and AA, and axe-core's best practices.
AXE_TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


def missing() -> str | None:
    """Why the browser cannot start, or None."""
    absent = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    return f"{' and '.join(absent)} missing: run `make browser`" if absent else None


def axe_missing() -> str | None:
    """Why axe-core cannot be injected, or None."""
    return None if AXE.exists() else f"{AXE} missing: run `make axe`"


@cache
def _axe_source() -> str:
    return AXE.read_text("utf-8")


def axe_violations(driver: Any, impacts: tuple[str, ...] = BLOCKING_IMPACTS) -> list[str]:
    """axe-core's rules (AXE_TAGS) run on the page as it is now: one line per violation of
    those impacts (rule, impact, help, the first offending elements). WebDriver's scripts run outside the page's
    Content-Security-Policy, so the page's own policy stays as it is served."""
    if not driver.execute_script("return typeof window.axe === 'object'"):
        driver.execute_script(_axe_source())
    driver.set_script_timeout(60)
    result = driver.execute_async_script(
        "const [tags, done] = arguments;"
        "axe.run(document, { resultTypes: ['violations'], runOnly: { type: 'tag', values: tags } })"
        ".then((r) => done(r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,"
        " targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ') + ': ' + (n.failureSummary || '')) }))),"
        " (e) => done([{ id: 'axe-error', impact: 'critical', help: String(e), targets: [] }]));",
        list(AXE_TAGS),
    )
    return [f"{v['id']} ({v['impact']}): {v['help']} at {v['targets']}" for v in result if v["impact"] in impacts]


@contextmanager
def chromium() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="canvas-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_until(check: Callable[[], Any], timeout: float = 20, what: str = "the page") -> Any:
    """`check()`'s first true value, looked at every 0.1 s; its exception or an AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if value := check():
                return value
        except Exception:  # the element is not there yet
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        time.sleep(0.1)


def by_id(driver: Any, element_id: str) -> Any:
    return driver.find_element("id", element_id)


def screenshots_folder(name: str) -> Path:
    """Where a test file's screenshots go: $CANVAS_SCREENSHOTS/`name` (default: in the temporary folder), never
    into the tree."""
    return Path(os.environ.get("CANVAS_SCREENSHOTS") or tempfile.gettempdir()) / name


def screenshot(driver: Any, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    return path
