"""The canvas viewer's review and cancel in headless Chromium against the embedded stack: a run waiting for approval
shows its plan (each block with its estimated credits, and the total) with Approve and Cancel; Approve runs it;
Cancel ends a running run; neither is accepted without the session's CSRF token."""

from __future__ import annotations

import httpx
import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.browser import by_id, wait_until
from tests.e2e.test_portal_browser import KEY, screenshot, sign_in, stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

__all__ = ["stack"]  # the stack, shared with the portal's browser tests' fixtures


def api(stack) -> httpx.Client:
    return httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=30)


def test_the_viewer_shows_a_waiting_runs_plan_and_approve_runs_it(stack, driver):
    # Given a run created with review, of two scripted blocks, waiting for approval
    prompt = "viewer e2e: reviewed"
    with scripted({prompt: Dag([Block(0.05, credits=3), Block(0.05, credits=4)], [(0, 1)])}):
        with api(stack) as client:
            run_id = client.post("/v1/run", data={"prompt": prompt, "review": "true"}).json()["data"]["run_id"]
            wait_until(
                lambda: client.get(f"/v1/run/{run_id}").json()["data"].get("awaiting_approval"),
                timeout=60,
                what="the run waiting for approval",
            )
            waiting = client.get(f"/v1/run/{run_id}").json()["data"]
        sign_in(driver, stack)

        # When its viewer is opened
        driver.get(f"{stack.base_url}/runs/{run_id}")

        # Then it shows the plan: each block with its estimate, the total, and Approve and Cancel
        wait_until(lambda: by_id(driver, "review").is_displayed(), what="the plan shown")
        plan = [item.text for item in driver.find_elements("css selector", "#review-plan li")]
        assert len(plan) == 2, plan
        assert all(
            line.startswith(f"Block {i} (text-block): ") and line.endswith(" credits") for i, line in enumerate(plan)
        )
        assert f"estimated {waiting['estimated_credits']} credits" in by_id(driver, "review-summary").text
        assert by_id(driver, "cancel-run").is_displayed()
        screenshot(driver, "viewer-review")

        # When Approve is clicked
        by_id(driver, "approve-run").click()

        # Then the run goes on to its end, charged for its two blocks, and the plan and Cancel are gone
        wait_until(lambda: by_id(driver, "run-status").text == "completed", timeout=60, what="the run completed")
    assert not by_id(driver, "review").is_displayed()
    assert not by_id(driver, "cancel-run").is_displayed()
    with api(stack) as client:
        assert client.get(f"/v1/run/{run_id}").json()["data"]["metadata"]["credits_consumed"] == 7


def test_cancel_in_the_viewer_ends_a_running_run(stack, driver):
    # Given a run whose first block finished and whose second is still working
    prompt = "viewer e2e: cancelled"
    with scripted({prompt: Dag([Block(0.0, credits=2), Block(hang=True, credits=9)], [(0, 1)])}):
        with api(stack) as client:
            run_id = client.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
            canvas_id = client.get(f"/v1/run/{run_id}").json()["data"]["canvas_id"]
            wait_until(
                lambda: (
                    [n["status"] for n in client.get(f"/v1/canvas/{canvas_id}/dag").json()["data"]["nodes"]]
                    == ["completed", "running"]
                ),
                timeout=60,
                what="the second block running",
            )
        sign_in(driver, stack)
        driver.get(f"{stack.base_url}/runs/{run_id}")
        wait_until(lambda: by_id(driver, "cancel-run").is_displayed(), what="Cancel shown")
        assert not by_id(driver, "review").is_displayed()

        # When Cancel is clicked
        by_id(driver, "cancel-run").click()

        # Then the run ends partial, saying why, and Cancel is gone
        wait_until(lambda: by_id(driver, "run-status").text == "partial", timeout=30, what="the run shown partial")
        assert "Cancelled by the client" in by_id(driver, "run-errors").text
        assert not by_id(driver, "cancel-run").is_displayed()
        screenshot(driver, "viewer-cancelled")
    with api(stack) as client:
        ended = client.get(f"/v1/run/{run_id}").json()["data"]
    assert ended["status"] == "partial"
    assert ended["metadata"]["credits_consumed"] == 2


def test_approve_and_cancel_without_the_sessions_csrf_token_are_refused(stack, driver):
    # Given a run waiting for approval and a signed-in browser
    with scripted({"viewer e2e: csrf": Dag([Block(0.0)])}):
        with api(stack) as client:
            run_id = client.post("/v1/run", data={"prompt": "viewer e2e: csrf", "review": "true"}).json()["data"][
                "run_id"
            ]
            wait_until(
                lambda: client.get(f"/v1/run/{run_id}").json()["data"].get("awaiting_approval"),
                timeout=60,
                what="the run waiting for approval",
            )
        sign_in(driver, stack)

        # When the page posts an approval and a cancel with its session cookie but without the CSRF token
        statuses = [
            driver.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                f"fetch('/portal/api/runs/{run_id}/{action}', {{method: 'POST', credentials: 'same-origin'}})"
                ".then(r => done(r.status));"
            )
            for action in ("approve", "cancel")
        ]

        # Then both are refused, and the run still waits
        assert statuses == [403, 403]
        with api(stack) as client:
            assert client.get(f"/v1/run/{run_id}").json()["data"]["awaiting_approval"] is True
            assert client.post(f"/v1/run/{run_id}/cancel").status_code == 200
