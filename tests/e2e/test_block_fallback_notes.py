"""Over HTTP against the embedded stack with the openai provider pointed at the fake OpenAI-compatible server: an
app the model answered without HTML is the built-in one, the run ends completed, and its errors say why, naming
the block."""

from __future__ import annotations

import httpx

from canvas_local.stack import LocalStack
from tests.component.test_block_fallback_notes import APP_ASK, prose_for_the_app
from tests.e2e.conftest import KEY_A, poll_until_finished
from tests.fakes.model_servers import FakeOpenAI

NOTE = "The model's answer held no HTML document; the built-in app was used"


def test_an_app_answered_without_html_completes_with_the_reason_in_the_runs_errors():
    # Given the stack served by a model that answers the app-block with prose
    with FakeOpenAI(reply=prose_for_the_app) as model:
        overrides = {
            "LogLevel": "WARNING",
            "OpenAIBaseUrl": model.base_url,
            "PlannerModelId": "gpt-4.1-mini",
            "WriterModelId": "gpt-4o",
            "ResearcherModelId": "gpt-4o",
        }
        with (
            LocalStack(api_keys=[KEY_A], provider="openai", parameter_overrides=overrides) as stack,
            httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY_A}, timeout=30) as http,
        ):
            # When
            created = http.post(
                "/v1/run", data={"prompt": "An app to track the tides", "blocks": '["app-block"]'}
            ).json()["data"]
            data = poll_until_finished(http, created["run_id"])
            dag = http.get(f"/v1/canvas/{data['canvas_id']}/dag").json()["data"]
    # Then the model was asked for the app, the run completed with its page, and its errors say why it is the
    # built-in one
    assert any(APP_ASK in c.prompt for c in model.calls)
    assert data["status"] == "completed"
    assert [a["name"].rsplit(".", 1)[1] for a in data["result"]["artifacts"]] == ["html"]
    app = next(n for n in dag["nodes"] if n["type"] == "app-block")
    assert app["status"] == "completed"
    noted = [e for e in data["errors"] if e.get("block_id") == app["id"]]
    assert noted == [
        {"error": f"{app['name']}: {NOTE}", "block_id": app["id"], "block_type": "app-block", "recoverable": True}
    ]
