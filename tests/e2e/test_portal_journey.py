"""A first visit to the portal and the viewer in headless Chromium, by keyboard alone, at a laptop's width (1366 px)
and a phone's (390 px): a run's viewer opened signed out leads to the sign-in and back, the run's reasons and its
markdown answer are shown, then a key is made, an endpoint added, and the holder signs out. axe-core checks every
page on the way (no serious or critical violation), and no page is wider than the window. Screenshots go to
$CANVAS_SCREENSHOTS/canvas-journey-screenshots (default: the temporary folder), never into the tree."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from bench.dags import Block, Dag, scripted
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.errors import BlockFatalError
from canvas_local.stack import LocalStack
from tests.e2e import browser
from tests.e2e.browser import by_id, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

KEY = "sk_canvas_e2e_journey_holder_" + "j" * 24
SCREENSHOTS = browser.screenshots_folder("canvas-journey-screenshots")
PROMPT = "journey e2e: a run with a reason and a markdown answer"
FAILURE = "Block 0 could not read its source on purpose"
# The answer the run ends with: every construct the viewer renders, and what it must never turn into HTML.
ANSWER = """# Tide pools

Tide pools hold **anemones**, *sea stars* and `barnacles`; see [the survey](https://example.org/survey).

- first point
- second point
  - a nested point

| site | species |
|---|--:|
| North | 12 |

<script>window.injected = true</script><img src=x onerror="window.injected = true">
[a trap](javascript:window.injected=true)
"""


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # An endpoint on loopback is accepted here; the SSRF guard refuses it otherwise (--webhook-allow-private-addresses).
    with LocalStack(api_keys=[KEY], parameter_overrides={"WebhookAllowPrivateAddresses": "true"}) as started:
        yield started


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    for reason in (browser.missing(), browser.axe_missing()):
        if reason:
            pytest.fail(reason)
    with browser.chromium() as started:
        yield started


@pytest.fixture(scope="module")
def partial_run(stack: LocalStack) -> str:
    """A run whose first block fails and whose second writes ANSWER: it ends `partial`, answered in markdown."""
    with scripted({PROMPT: Dag([Block(fail="always"), Block()])}) as script:

        def run(ctx: BlockContext) -> BlockOutput:
            if ctx.node.name == "Block 0":
                raise BlockFatalError(FAILURE)
            return BlockOutput(content=ANSWER)

        script.run = run  # type: ignore[method-assign]
        with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client:
            run_id: str = client.post("/v1/run", data={"prompt": PROMPT}).json()["data"]["run_id"]
            deadline = time.monotonic() + 60
            while client.get(f"/v1/run/{run_id}").json()["data"]["status"] == "running":
                assert time.monotonic() < deadline, "the run did not end"
                time.sleep(0.2)
            assert client.get(f"/v1/run/{run_id}").json()["data"]["status"] == "partial"
    return run_id


def screenshot(driver: Any, name: str) -> None:
    browser.screenshot(driver, SCREENSHOTS, name)


def sign_in_afresh(driver: Any, stack: LocalStack) -> None:
    """Sign the holder in from a fresh start (no session cookie), with the key typed and Enter."""
    driver.delete_all_cookies()
    driver.get(f"{stack.base_url}/portal")
    wait_until(lambda: by_id(driver, "sign-in").is_displayed(), what="the sign-in form")
    by_id(driver, "api-key").send_keys(KEY + "\n")
    wait_until(lambda: by_id(driver, "signed-in").is_displayed(), what="signing in")


def check_page(driver: Any, name: str) -> None:
    """What every page must be: no serious or critical axe-core violation, nothing wider than the window."""
    screenshot(driver, name)
    violations = browser.axe_violations(driver)
    assert not violations, f"{name}:\n" + "\n".join(violations)
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name}: the page is {overflow} px wider than the window"


def press(driver: Any, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(*keys).perform()


def focused(driver: Any) -> Any:
    return driver.switch_to.active_element


def tab_to(driver: Any, css: str, limit: int = 60) -> Any:
    """Press Tab until the element `css` has the focus, and check the focus shows."""
    from selenium.webdriver.common.keys import Keys

    target = driver.find_element("css selector", css)
    for _ in range(limit):
        press(driver, Keys.TAB)
        if focused(driver) == target:
            # An outline; a block of the canvas (SVG) shows its focus as its box's accent border instead.
            ring = driver.execute_script(
                "const e = document.activeElement, rect = e.querySelector(':scope > rect');"
                "if (rect) { const s = getComputedStyle(rect); return [s.stroke, s.strokeWidth]; }"
                "const s = getComputedStyle(e); return [s.outlineStyle, s.outlineWidth];"
            )
            assert ring in (["rgb(47, 91, 234)", "3.5px"], ["solid", "3px"]), f"{css} has no visible focus: {ring}"
            return target
    raise AssertionError(f"Tab never reached {css}")


@pytest.mark.parametrize("width", [1366, 390])
def test_a_first_visit_by_keyboard_is_accessible_at(width, stack, driver, partial_run):
    from selenium.webdriver.common.keys import Keys

    driver.set_window_size(width, 900)
    driver.delete_all_cookies()
    run_id = partial_run

    # Given a run's viewer opened signed out
    driver.get(f"{stack.base_url}/runs/{run_id}")

    # Then the portal's sign-in asks, and says it will come back
    wait_until(lambda: by_id(driver, "sign-in").is_displayed(), what="the sign-in form")
    assert driver.current_url.endswith(f"/portal?next={quote(f'runs/{run_id}', safe='')}")
    assert "taken back" in by_id(driver, "notice").text
    check_page(driver, f"{width}-1-sign-in")

    # When the key is typed into the first field Tab reaches, and Enter pressed
    tab_to(driver, "#api-key")
    press(driver, KEY, Keys.ENTER)

    # Then the viewer the visit started from opens, signed in
    wait_until(lambda: driver.current_url.endswith(f"/runs/{run_id}"), what="the return to the viewer")
    wait_until(lambda: by_id(driver, "run-status").text == "partial", what="the run shown partial")

    # And why the run is partial is at the top, without clicking a block
    reasons = by_id(driver, "run-errors")
    assert reasons.is_displayed() and FAILURE in reasons.text
    assert "Why the run is partial" in reasons.text
    above = driver.execute_script(
        "return document.getElementById('run-errors').getBoundingClientRect().top"
        " < document.getElementById('graph').getBoundingClientRect().top"
    )
    assert above, "the reasons are not above the canvas"

    # And the answer is rendered from markdown, whole, with no HTML or unsafe link of its own
    answer = by_id(driver, "final-output")
    assert answer.find_element("css selector", "h3").text == "Tide pools"
    assert answer.find_element("css selector", "strong").text == "anemones"
    assert answer.find_element("css selector", "em").text == "sea stars"
    assert answer.find_element("css selector", "code").text == "barnacles"
    assert answer.find_element("css selector", "ul ul li").text == "a nested point"
    assert answer.find_element("css selector", "table td.align-right").text == "12"
    [link] = answer.find_elements("css selector", "a")
    assert link.get_attribute("href") == "https://example.org/survey" and link.text == "the survey"
    assert not answer.find_elements("css selector", "script, img")
    assert '<script>window.injected = true</script><img src=x onerror="window.injected = true">' in answer.text
    assert "a trap" in answer.text and driver.execute_script("return window.injected === undefined")
    cut = driver.execute_script("const a = arguments[0]; return a.scrollHeight - a.clientHeight;", answer)
    assert cut <= 1, f"the answer box hides {cut} px of the answer"
    check_page(driver, f"{width}-2-viewer")

    # When the failed block is chosen from the reasons with the keyboard
    tab_to(driver, "#run-errors-list button")
    press(driver, Keys.ENTER)

    # Then its details show, its error among them
    wait_until(lambda: by_id(driver, "node-name").text == "Block 0", what="the failed block's details")
    assert FAILURE in by_id(driver, "node-error").text

    # And a block of the canvas is a button the keyboard reaches: Space shows the other one
    tab_to(driver, 'g.node[data-status="completed"]')
    assert focused(driver).get_attribute("role") == "button"
    press(driver, Keys.SPACE)
    wait_until(lambda: by_id(driver, "node-name").text == "Block 1", what="the chosen block's details")

    # And its content is rendered from markdown as the answer is, with nothing of it become HTML
    content = by_id(driver, "node-content")
    assert content.find_element("css selector", "strong").text == "anemones"
    assert not content.find_elements("css selector", "script, img")
    assert driver.execute_script("return window.injected === undefined")
    driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    check_page(driver, f"{width}-3-viewer-block")

    # When the holder goes back to the portal and makes a key, by keyboard
    driver.get(f"{stack.base_url}/portal")
    wait_until(lambda: by_id(driver, "signed-in").is_displayed(), what="the signed-in portal")
    wait_until(lambda: driver.find_elements("css selector", "#keys-body tr"), what="the keys listed")
    tab_to(driver, "#create-key")
    press(driver, Keys.ENTER)

    # Then it is shown once
    assert wait_until(lambda: by_id(driver, "new-key-value").text).startswith("sk_canvas_")
    check_page(driver, f"{width}-4-new-key")

    # When an endpoint's URL is typed and Enter pressed
    endpoint = f"http://127.0.0.1:9/journey-{width}"
    tab_to(driver, "#endpoint-url")
    press(driver, endpoint, Keys.ENTER)

    # Then its signing secret is shown once and it is listed
    assert wait_until(lambda: by_id(driver, "new-secret-value").text).startswith("whsec_")
    wait_until(lambda: endpoint in by_id(driver, "endpoints-body").text, what="the endpoint listed")
    check_page(driver, f"{width}-5-endpoint")

    # When the holder signs out with the keyboard
    tab_to(driver, "#sign-out")
    press(driver, Keys.ENTER)

    # Then the sign-in form is back, and the session is gone
    wait_until(lambda: by_id(driver, "sign-in").is_displayed(), what="signing out")
    assert not [c for c in driver.get_cookies() if c["name"] == "canvas_session"]
    check_page(driver, f"{width}-6-signed-out")


@pytest.mark.parametrize(
    "next_page",
    [
        "https://evil.example/runs/x",
        "//evil.example/runs/x",
        "/\\evil.example/runs/x",
        "\\\\evil.example/runs/x",
        "javascript:alert(1)",
        "runs/../../elsewhere",
        "/v1/account",
        "portal/api/keys",
        "https://evil.example@{host}/v1/account",
    ],
)
def test_signing_in_follows_only_a_next_page_of_the_portal_or_viewer(next_page, stack, driver):
    # Given a signed-in holder
    sign_in_afresh(driver, stack)

    # When the portal is opened with a `next` that leaves the portal and the viewer
    host = stack.base_url.split("://", 1)[1]
    driver.get(f"{stack.base_url}/portal?next={quote(next_page.format(host=host), safe='')}")

    # Then the portal stays
    wait_until(lambda: by_id(driver, "credits-balance").text.replace(",", "").isdigit(), what="the portal shown")
    time.sleep(0.3)
    assert driver.current_url.split("?", 1)[0] == f"{stack.base_url}/portal"


def test_a_next_page_of_the_viewer_is_followed_once_signed_in(stack, driver, partial_run):
    # Given a signed-in holder
    sign_in_afresh(driver, stack)

    # When the portal is opened with the viewer's page as `next`, given as an absolute path
    driver.get(f"{stack.base_url}/portal?next={quote(f'/runs/{partial_run}', safe='')}")

    # Then the viewer opens
    wait_until(lambda: driver.current_url == f"{stack.base_url}/runs/{partial_run}", what="the viewer")


# Markdown an answer may hold that must never become HTML of its own, a script, or a link to anything but
# http, https or mailto.
HOSTILE_MARKDOWN = [
    "<script>window.injected = true</script>",
    '<img src=x onerror="window.injected = true">',
    '<a href="javascript:window.injected=true">click</a>',
    "[x](javascript:window.injected=true)",
    "[x](JaVaScRiPt:window.injected=true)",
    "[x]( javascript:window.injected=true )",
    "[x](<javascript:window.injected=true>)",
    "[x](java\tscript:window.injected=true)",
    "[x](java&#115;cript:window.injected=true)",
    "[x](data:text/html;base64,PHNjcmlwdD53aW5kb3cuaW5qZWN0ZWQ9dHJ1ZTwvc2NyaXB0Pg==)",
    "[x](vbscript:msgbox)",
    "[x](//evil.example/path)",
    "[x](/portal/api/keys)",
    "<javascript:window.injected=true>",
    "![x](javascript:window.injected=true)",
    "[**bold** x](javascript:window.injected=true)",
    "| <b>a</b> | b |\n|---|---|\n| <i onclick='x'>c</i> | [d](javascript:x) |",
    "```html\n<script>window.injected = true</script>\n```",
    "- <svg onload=window.injected=true>\n  - <iframe src=javascript:x>",
    "> <style>body{display:none}</style>",
]
ALLOWED_TAGS = {
    "H1", "H2", "H3", "H4", "H5", "H6", "P", "STRONG", "EM", "DEL", "CODE", "PRE", "UL", "OL", "LI", "BLOCKQUOTE",
    "HR", "BR", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "DIV", "SPAN", "A",
}  # fmt: skip


def rendered(driver: Any, text: str) -> dict[str, Any]:
    """The elements CanvasMarkdown.render makes of `text` on the viewer's page: tags, attributes, links, text."""
    return driver.execute_script(
        "const box = document.createElement('div'); box.append(CanvasMarkdown.render(arguments[0]));"
        "const all = [...box.querySelectorAll('*')];"
        "return { tags: all.map((e) => e.tagName), attributes: all.flatMap((e) => e.getAttributeNames()),"
        " links: [...box.querySelectorAll('a')].map((a) => a.getAttribute('href')), text: box.textContent };",
        text,
    )


def test_the_answers_markdown_never_becomes_html_or_an_unsafe_link(stack, driver, partial_run):
    # Given the viewer's page, signed in
    sign_in_afresh(driver, stack)
    driver.get(f"{stack.base_url}/runs/{partial_run}")
    wait_until(lambda: by_id(driver, "run-status").text == "partial", what="the viewer")

    for text in HOSTILE_MARKDOWN:
        # When markdown with HTML or an unsafe link is rendered
        made = rendered(driver, text)

        # Then it holds only the renderer's own elements and attributes, and no link but a safe one
        assert set(made["tags"]) <= ALLOWED_TAGS, (text, made["tags"])
        assert not [a for a in made["attributes"] if a.startswith("on") or a in ("src", "style")], (text, made)
        assert all(link.startswith(("https:", "http:", "mailto:")) for link in made["links"]), (text, made["links"])
        assert "javascript" not in " ".join(made["links"]).lower(), text
    # And nothing of it ran
    assert driver.execute_script("return window.injected === undefined")

    # And what it may hold renders: a safe link, a mail link, emphasis inside a table cell
    made = rendered(driver, "[a](https://example.org/a?b=1) and <mailto:team@example.org>")
    assert made["links"] == ["https://example.org/a?b=1", "mailto:team@example.org"]
    made = rendered(driver, "| a |\n|---|\n| **b** |")
    assert made["tags"] == ["DIV", "TABLE", "THEAD", "TR", "TH", "TBODY", "TR", "TD", "STRONG"]


def test_the_pages_for_what_cannot_be_shown_are_accessible(stack, driver):
    # Given a signed-in holder
    sign_in_afresh(driver, stack)

    for width in (1366, 390):
        driver.set_window_size(width, 900)
        for path in ("/portal/no-such-page", "/runs/6f1c2a0e-3b7d-4c55-9a0e-2f4b8d1c7e90", "/runs/not-a-uuid"):
            # When a page that cannot be shown is opened
            driver.get(f"{stack.base_url}{path}")

            # Then it says so in an accessible page that leads back to the portal
            wait_until(lambda: driver.find_elements("css selector", "a[href$='portal']"), what=f"the page of {path}")
            check_page(driver, f"{width}-error{path.replace('/', '-')}")


def test_a_failed_runs_reason_is_at_the_top_of_its_viewer(stack, driver):
    # Given a run whose only block fails
    prompt = "journey e2e: a run that fails"
    with (
        scripted({prompt: Dag([Block(fail="always")])}),
        httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client,
    ):
        run_id = client.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
        deadline = time.monotonic() + 60
        while (run := client.get(f"/v1/run/{run_id}").json()["data"])["status"] == "running":
            assert time.monotonic() < deadline, "the run did not end"
            time.sleep(0.2)
    assert run["status"] == "failed"
    sign_in_afresh(driver, stack)

    # When its viewer is opened
    driver.get(f"{stack.base_url}/runs/{run_id}")
    wait_until(lambda: by_id(driver, "run-status").text == "failed", what="the run shown failed")

    # Then the reason the run reports is shown at the top, without a click, and no answer below
    reasons = by_id(driver, "run-errors")
    assert reasons.is_displayed() and "Why the run failed" in reasons.text
    for error in run["errors"]:
        assert error["error"].split(": ", 1)[-1] in reasons.text
    assert not by_id(driver, "result").is_displayed()
    check_page(driver, "failed-run")
