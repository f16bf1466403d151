"""A model answer cut off at its output cap is never taken as complete, through a whole run: the Planner's falls
back to planning by rules and a block's fails the block, and the run's errors say which cap cut it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from canvas_core.adapters.store import Store
from tests.component.test_credits import drive, get_run, start_run
from tests.fakes.model_servers import PLANNER_MARK, FakeOpenAI, default_reply

pytestmark = pytest.mark.component

LONG = " ".join(f"point{i}" for i in range(400))


@pytest.fixture
def openai(aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        for name, value in {
            "MODEL_PROVIDER": "openai",
            "OPENAI_BASE_URL": fake.base_url,
            "PLANNER_MODEL_ID": "gpt-4.1-mini",
            "WRITER_MODEL_ID": "gpt-4o",
            "MODEL_RETRY_BACKOFF_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        yield fake


def test_a_plan_cut_at_the_planners_cap_is_not_used_and_the_run_says_so(
    openai, account, function, context, monkeypatch
):
    # Given a Planner cap shorter than the plan the model writes
    monkeypatch.setenv("PLANNER_MAX_OUTPUT_TOKENS", "10")
    created = start_run(function, context, account.api_key, {"prompt": "Explain tides"})
    # When
    drive(function, context, account.account_id, created)
    # Then the Planner was asked once (a cut answer is not asked for again) and the canvas was planned by rules
    planner_calls = [c for c in openai.calls if PLANNER_MARK in c.system]
    assert len(planner_calls) == 1 and planner_calls[0].body["max_tokens"] == 10
    data = get_run(function, context, account.api_key, created["run_id"])
    notes = [e["error"] for e in data["errors"] if "Planner" in e["error"]]
    assert len(notes) == 1
    assert "cut off at the output cap of 10 tokens" in notes[0] and "PLANNER_MAX_OUTPUT_TOKENS" in notes[0]
    assert notes[0].endswith("planned by rules")
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert nodes  # the rules planned a canvas


def test_an_answer_cut_at_the_writers_cap_fails_its_block_and_the_run_says_so(
    openai, account, function, context, monkeypatch
):
    # Given a writer whose answers are longer than its cap
    monkeypatch.setenv("WRITER_MAX_OUTPUT_TOKENS", "50")
    openai.replies(lambda call: LONG if "Writer agent" in call.system else default_reply(call))
    created = start_run(
        function,
        context,
        account.api_key,
        {"prompt": "Explain tides", "blocks": json.dumps(["prompt-block", "text-block"])},
    )
    # When
    drive(function, context, account.account_id, created)
    # Then the writer's block failed with the reason, and its cut answer is nowhere in the run
    data = get_run(function, context, account.api_key, created["run_id"])
    assert data["status"] in ("partial", "failed")
    cut = [e for e in data["errors"] if "cut off at the output cap of 50 tokens" in e["error"]]
    assert cut and cut[0]["block_type"] == "text-block" and "WRITER_MAX_OUTPUT_TOKENS" in cut[0]["error"]
    assert "point49" not in str(data.get("result", {}).get("final_output", ""))
