"""The developer portal and the canvas viewer in headless Chromium against the embedded stack: sign in with a key,
create a key and use it on /v1, revoke it and see 401, add a webhook endpoint, ping it (the receiver gets the
ping), rotate its secret and remove it, and watch a running canvas's blocks change status without a reload.
Screenshots go to $CANVAS_SCREENSHOTS (default: a temporary folder), never into the tree."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.dags import Block, Dag, scripted
from canvas_local.stack import LocalStack
from tests.e2e import browser
from tests.e2e.browser import by_id, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

KEY = "sk_canvas_e2e_portal_holder_" + "p" * 24
SCREENSHOTS = browser.screenshots_folder("canvas-portal-screenshots")


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # Webhook endpoints on loopback (the test's receiver) are allowed here; SSRF protection refuses them otherwise.
    overrides = {"WebhookAllowPrivateAddresses": "true", "WebhookRetryTimeScale": "0.0001"}
    with LocalStack(api_keys=[KEY], parameter_overrides=overrides) as started:
        yield started


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    received: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hooks", received
    server.shutdown()


def screenshot(driver: Any, name: str) -> Path:
    return browser.screenshot(driver, SCREENSHOTS, name)


def sign_in(driver: Any, stack: LocalStack) -> None:
    driver.get(f"{stack.base_url}/portal")
    wait_until(lambda: by_id(driver, "sign-in").is_displayed() or by_id(driver, "signed-in").is_displayed())
    if by_id(driver, "signed-in").is_displayed():
        return
    by_id(driver, "api-key").send_keys(KEY)
    driver.find_element("css selector", "#sign-in-form button[type=submit]").click()
    wait_until(lambda: by_id(driver, "signed-in").is_displayed(), what="signing in")


def test_signing_in_keeps_the_key_server_side_behind_a_strict_cookie(stack, driver):
    # When the holder signs in
    sign_in(driver, stack)

    # Then the page shows the account, and the session is an HttpOnly, Secure, SameSite=Strict cookie
    # (Chromium keeps Secure cookies on http://127.0.0.1 and http://localhost, which it treats as secure)
    assert by_id(driver, "account-id").text == stack.accounts[KEY]
    [cookie] = [c for c in driver.get_cookies() if c["name"] == "canvas_session"]
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
    assert KEY not in cookie["value"]
    # And the page's script cannot read it
    assert "canvas_session" not in driver.execute_script("return document.cookie")
    wait_until(lambda: by_id(driver, "credits-balance").text == "5,000", what="the balance")


def test_a_key_made_in_the_portal_works_until_revoked_there(stack, driver):
    sign_in(driver, stack)
    # When a key is created
    by_id(driver, "create-key").click()
    new_key = wait_until(lambda: by_id(driver, "new-key").is_displayed() and by_id(driver, "new-key-value").text)
    assert new_key.startswith("sk_canvas_")
    rows = wait_until(lambda: len(driver.find_elements("css selector", "#keys-body tr")) == 2 and True)
    assert rows
    screenshot(driver, "portal-new-key")

    # Then it works against /v1
    with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": new_key}, timeout=30) as client:
        assert client.get("/v1/runs").status_code == 200
        # When it is revoked from the page (its row's button, confirmed)
        key_id = next(
            k["id"] for k in client.get("/v1/api_keys").json()["data"]["keys"] if k["last_four"] == new_key[-4:]
        )
        driver.find_element("css selector", f'#keys-body button[data-key-id="{key_id}"]').click()
        driver.switch_to.alert.accept()
        wait_until(
            lambda: "revoked" in driver.find_element("css selector", f'#keys-body tr[data-key-id="{key_id}"]').text,
            what="the key shown revoked",
        )
        # Then its next use is refused
        refused = client.get("/v1/runs")
    assert refused.status_code == 401 and refused.json() == {"success": False, "error": "Invalid or revoked API key"}


def test_an_endpoint_added_in_the_portal_is_pinged(stack, driver, receiver):
    url, received = receiver
    sign_in(driver, stack)
    # When an endpoint is added
    by_id(driver, "endpoint-url").send_keys(url)
    driver.find_element("css selector", "#endpoint-form button[type=submit]").click()
    secret = wait_until(lambda: by_id(driver, "new-secret").is_displayed() and by_id(driver, "new-secret-value").text)
    assert secret.startswith("whsec_")
    row = wait_until(lambda: driver.find_element("css selector", "#endpoints-body tr[data-endpoint-id]"))
    assert url in row.text

    # And pinged
    row.find_element("xpath", ".//button[text()='Ping']").click()
    wait_until(lambda: "Ping sent: evt_" in by_id(driver, "notice").text, what="the ping")

    # Then the receiver gets a webhook.ping, and the deliveries list shows it
    wait_until(lambda: any(b'"webhook.ping"' in body for body in received), timeout=30, what="the delivery")

    def delivered() -> bool:
        # The endpoints table is drawn anew as the portal refreshes it: the row is found again each time.
        current = driver.find_element("css selector", "#endpoints-body tr[data-endpoint-id]")
        current.find_element("xpath", ".//button[text()='Deliveries']").click()
        time.sleep(0.3)
        return (
            "webhook.ping" in by_id(driver, "deliveries-body").text and "200" in by_id(driver, "deliveries-body").text
        )

    wait_until(delivered, timeout=30, what="the delivery listed")
    screenshot(driver, "portal-webhooks")

    # When its secret is rotated, a new one is shown once
    driver.find_element("css selector", "#endpoints-body tr[data-endpoint-id]").find_element(
        "xpath", ".//button[text()='Rotate secret']"
    ).click()
    driver.switch_to.alert.accept()
    wait_until(lambda: by_id(driver, "new-secret-value").text not in ("", secret), what="the new secret")
    assert by_id(driver, "new-secret-value").text.startswith("whsec_")

    # And when it is removed, it is gone
    driver.find_element("css selector", "#endpoints-body tr[data-endpoint-id]").find_element(
        "xpath", ".//button[text()='Remove']"
    ).click()
    driver.switch_to.alert.accept()
    wait_until(lambda: "No endpoints yet." in by_id(driver, "endpoints-body").text, what="the endpoint removed")


def node_statuses(driver: Any) -> dict[str, str]:
    return driver.execute_script(
        "const s = {}; for (const g of document.querySelectorAll('g.node')) {"
        " s[g.dataset.nodeId] = g.getAttribute('class').split(' ').find(c => c.startsWith('status-')); } return s;"
    )


def test_the_viewer_shows_blocks_changing_status_without_a_reload(stack, driver):
    sign_in(driver, stack)
    prompt = "portal e2e: a canvas watched live"
    # Given a running canvas of three blocks, one after the other, each taking 2.5 s
    with scripted({prompt: Dag([Block(2.5), Block(2.5), Block(2.5)], [(0, 1), (1, 2)])}):
        with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client:
            run_id = client.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]

        # When its viewer is opened, and marked so that a reload would show
        driver.get(f"{stack.base_url}/runs/{run_id}")
        driver.execute_script("window.loadedOnce = true;")
        wait_until(lambda: len(node_statuses(driver)) == 3, what="the canvas drawn")

        # Then statuses move on in place: a block running, later all completed, the page never reloaded
        seen: list[dict[str, str]] = []
        shot = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            statuses = node_statuses(driver)
            seen.append(statuses)
            if not shot and "status-running" in statuses.values():
                driver.find_element("css selector", "g.node.status-running").click()
                screenshot(driver, "viewer-running")
                shot = True
            if set(statuses.values()) == {"status-completed"}:
                break
            time.sleep(0.3)
        assert driver.execute_script("return window.loadedOnce === true"), "the page reloaded"

    assert any("status-running" in s.values() for s in seen), seen
    assert set(seen[-1].values()) == {"status-completed"}, seen[-1]
    running_blocks = {block for s in seen for block, status in s.items() if status == "status-running"}
    assert len(running_blocks) >= 2, "statuses were not updated while the run went on"
    wait_until(lambda: by_id(driver, "run-status").text == "completed", what="the run shown completed")
    screenshot(driver, "viewer-completed")
    # And the side panel shows the clicked block's content and credits
    assert "done after" in by_id(driver, "node-content").text


def test_the_portal_lists_the_accounts_runs_each_opening_its_viewer(stack, driver):
    # Given a finished run of the account
    with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client:
        run_id = client.post("/v1/run", data={"prompt": "portal e2e: listed"}).json()["data"]["run_id"]
        deadline = time.monotonic() + 60
        while client.get(f"/v1/run/{run_id}").json()["data"]["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
    sign_in(driver, stack)
    driver.get(f"{stack.base_url}/portal")

    # When its row's link is followed
    link = wait_until(lambda: driver.find_element("css selector", f'#runs-body tr[data-run-id="{run_id}"] a'))
    assert "portal e2e: listed" in driver.find_element("css selector", f'#runs-body tr[data-run-id="{run_id}"]').text
    wait_until(lambda: by_id(driver, "runs-month").text.isdigit(), what="the month's runs shown")
    assert int(by_id(driver, "runs-month").text) >= 1
    screenshot(driver, "portal-runs")
    link.click()

    # Then the viewer shows that run, its answer and its artifacts
    wait_until(lambda: driver.current_url.endswith(f"/runs/{run_id}"), what="the viewer opened")
    wait_until(lambda: by_id(driver, "run-status").text == "completed", what="the run shown completed")
    assert driver.find_elements("css selector", "g.node")
    assert (
        driver.find_elements("css selector", "#artifacts a[download]")
        or "No artifacts" in by_id(driver, "artifacts").text
    )


def test_the_viewer_of_another_accounts_run_is_not_found(stack, driver):
    # Given a run of another account
    other_key = "sk_canvas_e2e_portal_other_" + "o" * 24
    from canvas_local.stack import seed_account

    seed_account(other_key)
    with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": other_key}, timeout=30) as client:
        run_id = client.post("/v1/run", data={"prompt": "someone else's run"}).json()["data"]["run_id"]
    sign_in(driver, stack)

    # When the signed-in holder opens it
    driver.get(f"{stack.base_url}/runs/{run_id}")

    # Then it is not found
    assert f"Run not found: {run_id}" in driver.find_element("tag name", "body").text


def test_the_viewers_rerun_runs_a_block_again_in_a_new_run_that_marks_the_reused_blocks(stack, driver):
    # Given a finished chain of three scripted blocks (a block's instructions are its script)
    prompt = "portal e2e: a block re-run from the viewer"
    with scripted({prompt: Dag([Block(), Block(), Block()], [(0, 1), (1, 2)])}) as script:
        with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client:
            source_id = client.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
            wait_until(
                lambda: client.get(f"/v1/run/{source_id}").json()["data"]["status"] == "completed",
                timeout=60,
                what="the run completed",
            )
            canvas_id = client.get(f"/v1/run/{source_id}").json()["data"]["canvas_id"]
            first, middle, last = client.get(f"/v1/canvas/{canvas_id}/dag").json()["data"]["nodes"]
        sign_in(driver, stack)
        driver.get(f"{stack.base_url}/runs/{source_id}")
        wait_until(lambda: by_id(driver, "run-status").text == "completed", what="the run shown completed")

        # When the middle block is selected, given new instructions and re-run
        driver.find_element("css selector", f'g.node[data-node-id="{middle["id"]}"]').click()
        form = wait_until(lambda: by_id(driver, "rerun-form").is_displayed() and by_id(driver, "rerun-form"))
        instructions = by_id(driver, "rerun-instructions")
        # (starting from the block's own instructions: its script, as bench/dags.py plans it)
        assert instructions.get_attribute("value") == json.dumps(Block().__dict__)
        instructions.clear()
        instructions.send_keys('{"credits": 2}')
        screenshot(driver, "viewer-rerun-form")
        form.find_element("css selector", "button[type=submit]").click()

        # Then the viewer shows the new run, which completes: the first block reused (marked so), the others run again
        wait_until(lambda: not driver.current_url.endswith(f"/runs/{source_id}"), what="the new run opened")
        rerun_id = driver.current_url.rsplit("/", 1)[1]
        wait_until(lambda: by_id(driver, "run-status").text == "completed", timeout=60, what="the re-run completed")
    reused = driver.execute_script(
        "return [...document.querySelectorAll('g.node')].filter(g => g.classList.contains('reused'))"
        ".map(g => g.dataset.nodeId)"
    )
    assert reused == [first["id"]]
    assert "reused" in driver.find_element("css selector", f'g.node[data-node-id="{first["id"]}"] .kind').text
    assert [script.attempts[n["id"]] for n in (first, middle, last)] == [1, 2, 2]
    assert "A re-run of an earlier run from its block Block 1" in by_id(driver, "run-rerun-of").text
    assert "2 credits" in by_id(driver, "run-progress").text
    # And the page, a reused block's details and its Re-run form open, has no serious accessibility violation
    driver.find_element("css selector", f'g.node[data-node-id="{first["id"]}"]').click()
    wait_until(lambda: by_id(driver, "node-reused").is_displayed() and by_id(driver, "rerun-form").is_displayed())
    if not browser.axe_missing():
        assert browser.axe_violations(driver) == []
    screenshot(driver, "viewer-rerun")
    # And the new run is the API's too, with what it re-ran
    with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client:
        rerun_of = client.get(f"/v1/run/{rerun_id}").json()["data"]["metadata"]["rerun_of"]
    assert rerun_of == {"run_id": source_id, "canvas_id": canvas_id, "block_id": middle["id"]}


def test_a_rerun_posted_without_the_sessions_csrf_token_is_refused(stack, driver):
    # Given a signed-in browser and a finished run
    with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client:
        run_id = client.post("/v1/run", data={"prompt": "portal e2e: csrf"}).json()["data"]["run_id"]
        wait_until(
            lambda: client.get(f"/v1/run/{run_id}").json()["data"]["status"] != "running", timeout=60, what="the run"
        )
        canvas_id = client.get(f"/v1/run/{run_id}").json()["data"]["canvas_id"]
        block_id = client.get(f"/v1/canvas/{canvas_id}/dag").json()["data"]["nodes"][0]["id"]
        runs_before = client.get("/v1/runs", params={"limit": 100}).json()["data"]["runs"]
    sign_in(driver, stack)

    # When the page posts a re-run with its session cookie but without the CSRF token
    status = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        f"fetch('/portal/api/canvas/{canvas_id}/blocks/{block_id}/rerun', {{method: 'POST',"
        " headers: {'Content-Type': 'application/json'}, body: JSON.stringify({instructions: 'x'}),"
        " credentials: 'same-origin'}).then(r => done(r.status));"
    )

    # Then it is refused, and no run started
    assert status == 403
    with httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30) as client:
        assert client.get("/v1/runs", params={"limit": 100}).json()["data"]["runs"] == runs_before


def test_signing_out_ends_the_session(stack, driver):
    sign_in(driver, stack)
    by_id(driver, "sign-out").click()
    wait_until(lambda: by_id(driver, "sign-in").is_displayed(), what="signing out")
    driver.get(f"{stack.base_url}/portal")
    wait_until(lambda: by_id(driver, "sign-in").is_displayed(), what="the sign-in form after a reload")
    assert not [c for c in driver.get_cookies() if c["name"] == "canvas_session"]


def blocks_outside_the_graph(driver: Any) -> list[str]:
    """The blocks drawn (even in part) outside the graph's box or the window, sideways: none can be seen whole
    without scrolling the box."""
    return driver.execute_script(
        "const box = document.getElementById('graph').getBoundingClientRect();"
        "const right = Math.min(box.right, document.documentElement.clientWidth);"
        "return [...document.querySelectorAll('g.node')].filter((g) => {"
        " const r = g.querySelector('rect').getBoundingClientRect();"
        " return r.left < Math.max(box.left, 0) - 0.5 || r.right > right + 0.5; }).map((g) => g.dataset.nodeId);"
    )


@pytest.mark.parametrize(
    ("shape", "dag"),
    [
        ("a chain of six", Dag([Block() for _ in range(6)], [(i, i + 1) for i in range(5)])),
        (
            "a fan of five after two",
            Dag([Block() for _ in range(8)], [(0, 1), (1, 2), (2, 3), (2, 4), (2, 5), (2, 6), (2, 7), (0, 7)]),
        ),
    ],
)
def test_the_viewer_shows_every_block_of_a_deep_canvas_on_a_laptop_and_a_phone(stack, driver, shape, dag):
    # Given a finished canvas of five or more steps
    prompt = f"portal e2e: {shape}"
    api = httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30)
    with scripted({prompt: dag}), api as client:
        run_id = client.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
        wait_until(
            lambda: client.get(f"/v1/run/{run_id}").json()["data"]["status"] == "completed",
            timeout=60,
            what="the run completed",
        )
    sign_in(driver, stack)
    try:
        for width, height in ((1366, 768), (390, 844)):
            # When its viewer is opened in a window of that size, and its last block tapped
            driver.set_window_size(width, height)
            driver.get(f"{stack.base_url}/runs/{run_id}")
            wait_until(lambda: len(driver.find_elements("css selector", "g.node")) == len(dag.blocks))
            wait_until(lambda: by_id(driver, "run-status").text == "completed", what="the run shown completed")
            driver.execute_script(
                "const nodes = document.querySelectorAll('g.node');"
                "nodes[nodes.length - 1].dispatchEvent(new MouseEvent('click', {bubbles: true}));"
            )
            wait_until(lambda: by_id(driver, "node-details").is_displayed(), what="the block's details")
            screenshot(driver, f"viewer-{shape.replace(' ', '-')}-{width}")

            # Then every block lies within the graph's box and the window, and the page is no wider than the window
            assert blocks_outside_the_graph(driver) == [], f"{width} px"
            assert driver.execute_script("return document.scrollingElement.scrollWidth <= window.innerWidth")
            # And the block's details are beside the canvas, or on a phone right under it, above the answer and tasks
            where = driver.execute_script(
                "const box = (id) => document.getElementById(id).closest('.card').getBoundingClientRect();"
                "return { graph: box('graph'), panel: box('panel'), tasks: box('tasks'), width: window.innerWidth };"
            )
            graph, panel, tasks = where["graph"], where["panel"], where["tasks"]
            if width >= 1000:
                assert panel["left"] >= graph["right"] and panel["top"] < graph["bottom"]
            else:
                assert graph["bottom"] <= panel["top"] < graph["bottom"] + 40 and panel["bottom"] <= tasks["top"]
                assert panel["right"] <= where["width"]
    finally:
        driver.set_window_size(1400, 1000)
