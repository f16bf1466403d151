"""A block that falls back when a model's answer is unusable completes all the same, and the run's errors say why,
through a whole run against the fake OpenAI-compatible server: the app-block whose model answered no HTML ships
its built-in app, and the run ends completed with that reason among its errors, naming the block."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from canvas_core.adapters.store import Store
from tests.component.test_credits import drive, get_run, start_run
from tests.fakes.model_servers import PLANNER_MARK, Call, FakeOpenAI, default_reply

pytestmark = pytest.mark.component

APP_PLAN = {
    "steps": [
        {"id": "s1", "type": "app-block", "title": "Tide tracker", "persona": "Engineer", "inputs": []},
    ]
}
APP_ASK = "single-file web app"


def prose_for_the_app(call: Call) -> str:
    """A small model's way with the app: a plan for the Planner, and prose, not a page, for the app."""
    if PLANNER_MARK in call.system:
        return "```json\n" + json.dumps(APP_PLAN) + "\n```"
    if APP_ASK in call.prompt:
        return "Sure! Your app would list the tides of the week and let you tick off the ones you watched."
    return default_reply(call)


@pytest.fixture
def openai(aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(reply=prose_for_the_app) as fake:
        for name, value in {
            "MODEL_PROVIDER": "openai",
            "OPENAI_BASE_URL": fake.base_url,
            "PLANNER_MODEL_ID": "gpt-4.1-mini",
            "WRITER_MODEL_ID": "gpt-4o",
            "MODEL_RETRY_BACKOFF_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        yield fake


def test_an_app_answered_without_html_ships_the_built_in_app_and_the_run_says_why(openai, account, function, context):
    # Given a model that answers the app-block with prose
    created = start_run(
        function, context, account.api_key, {"prompt": "An app to track the tides", "blocks": '["app-block"]'}
    )
    # When
    drive(function, context, account.account_id, created)
    # Then the model was asked for the app, and the run completed with the built-in page as its file
    assert any(APP_ASK in c.prompt for c in openai.calls)
    data = get_run(function, context, account.api_key, created["run_id"])
    assert data["status"] == "completed"
    assert [a["name"].rsplit(".", 1)[1] for a in data["result"]["artifacts"]] == ["html"]
    # and its errors name the block and why it fell back, the block still completed
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    app = next(n for n in nodes if n.type == "app-block")
    assert app.status.value == "completed"
    assert app.notes == ["The model's answer held no HTML document; the built-in app was used"]
    notes = [e for e in data["errors"] if e.get("block_id") == app.block_id]
    assert notes == [
        {
            "error": f"{app.name}: The model's answer held no HTML document; the built-in app was used",
            "block_id": app.block_id,
            "block_type": "app-block",
            "recoverable": True,
        }
    ]


def test_an_app_the_model_wrote_leaves_no_note(openai, account, function, context):
    # Given a model that answers the app-block with a working page
    page = (
        "<!DOCTYPE html><html><head><title>Tides</title></head><body><button id='go'>Go</button>"
        "<p id='out'></p><script>document.getElementById('go').addEventListener('click', () => "
        "{ document.getElementById('out').textContent = 'High tide at 6'; });</script></body></html>"
    )
    openai.replies(lambda call: page if APP_ASK in call.prompt else prose_for_the_app(call))
    created = start_run(
        function, context, account.api_key, {"prompt": "An app to track the tides", "blocks": '["app-block"]'}
    )
    # When
    drive(function, context, account.account_id, created)
    # Then the run completed with the model's page and nothing in its errors about the app
    data = get_run(function, context, account.api_key, created["run_id"])
    assert data["status"] == "completed"
    assert not [e for e in data.get("errors", []) if e.get("block_type") == "app-block"]
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert [n.notes for n in nodes if n.type == "app-block"] == [[]]


def test_a_text_block_the_model_answered_with_nothing_answers_from_its_inputs_and_the_run_says_why(
    openai, account, function, context
):
    from canvas_core.agents.writer import WRITER_DUTY
    from canvas_core.blocks.text import EMPTY_ANSWER

    # Given a model that answers the Writer with white space, and every other call as usual
    openai.replies(lambda call: "  \n" if WRITER_DUTY in call.system else default_reply(call))
    created = start_run(
        function,
        context,
        account.api_key,
        {"prompt": "What moved the harbour channel east, and when?", "blocks": '["text-block"]'},
    )
    # When
    drive(function, context, account.account_id, created)
    # Then the Writer was asked, the run completed with an answer that is not empty, and its errors say why
    assert any(WRITER_DUTY in c.system for c in openai.calls)
    data = get_run(function, context, account.api_key, created["run_id"])
    assert data["status"] == "completed"
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    text = next(n for n in nodes if n.type == "text-block")
    assert text.status.value == "completed" and (text.content or "").strip()
    assert "no language model was called" not in (text.content or "")
    assert text.notes == [EMPTY_ANSWER]
    assert {
        "error": f"{text.name}: {EMPTY_ANSWER}",
        "block_id": text.block_id,
        "block_type": "text-block",
        "recoverable": True,
    } in data["errors"]
