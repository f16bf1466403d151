"""The rules of review without AWS: what an approval's body may hold, why a run that waited ended, and what a planned
block is expected to spend."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from canvas_core import settings
from canvas_core.estimates import TYPICAL_BLOCK_USAGE, estimate_block_credits
from canvas_core.models.base import refusal
from canvas_core.models.catalog import BlockType
from canvas_core.orchestration import review_failure
from canvas_core.pricing import usage_credits
from canvas_core.reviews import ApproveRunForm

pytestmark = pytest.mark.unit

BLOCK = "0b9e3c4d-8f21-4a6b-b1c2-5d7e9f0a1b2c"


def refused(body: dict) -> str:
    with pytest.raises(ValidationError) as error:
        ApproveRunForm.model_validate(body)
    reason = refusal(error.value.errors())
    assert reason is not None and reason.status_code == 400
    return reason.message


def test_an_approval_holds_instructions_by_block_as_an_object_or_as_json_text_in_a_form():
    # A JSON body's object, trimmed and cleaned, blank ones dropped
    body = {"instructions": {BLOCK: "  Three bullets\x00 only  ", "other": "   "}}
    assert ApproveRunForm.model_validate(body).instructions == {BLOCK: "Three bullets only"}
    # A form's field holding the object as JSON text, and no body at all
    form = {"instructions": json.dumps({BLOCK: "Shorter"}), "files": []}
    assert ApproveRunForm.model_validate(form).instructions == {BLOCK: "Shorter"}
    assert ApproveRunForm.model_validate({"files": []}).instructions == {}


@pytest.mark.parametrize("value", [["a"], "not json", json.dumps([1]), {BLOCK: 3}, "[" * 300 + "]" * 300])
def test_instructions_of_another_shape_are_refused(value):
    assert refused({"instructions": value}).startswith("Invalid instructions: expected an object of block ids")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"instruction": {BLOCK: "Shorter"}}, "'instruction'"),
        ({"instructions": {BLOCK: "Shorter"}, "approve": "yes"}, "'approve'"),
        ({"files": ["x"]}, "'files'"),
    ],
)
def test_an_approval_with_a_field_it_does_not_take_is_refused_not_approved_as_planned(body, named):
    # A misspelt field would otherwise approve the plan, and spend, without the instructions meant
    assert refused(body) == f"Unknown field {named}: the body takes only instructions"


def test_instructions_past_the_limit_are_refused_naming_the_block():
    message = refused({"instructions": {BLOCK: "x" * 10_001}})
    assert message == f"Invalid instructions: those for {BLOCK} are 10001 characters (maximum 10000)"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(86_400, "24 hours"), (3_600, "1 hour"), (5_400, "90 minutes"), (2, "2 seconds"), (None, "the time allowed")],
)
def test_a_review_that_timed_out_says_how_long_it_waited(seconds, text):
    reason = review_failure({"Error": "States.Timeout", "Cause": ""}, seconds)
    assert reason.startswith(f"The run was not approved within {text}")
    assert reason.endswith("; its blocks did not run")


def test_a_wait_that_failed_otherwise_says_why():
    cause = json.dumps({"errorMessage": "Run x ended before it could wait for approval"})
    assert review_failure({"Error": "RunStateError", "Cause": cause}, 60) == (
        "The run stopped while it waited for approval: Run x ended before it could wait for approval"
    )


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch):
    def use(name: str, **model_ids: str) -> None:
        monkeypatch.setenv("MODEL_PROVIDER", name)
        for variable, model in model_ids.items():
            monkeypatch.setenv(variable, model)
        settings.reset()

    yield use
    settings.reset()


def test_a_blocks_estimate_is_its_types_typical_use_at_its_roles_model(provider, model_env):
    # Given Bedrock with a priced writer model, and a search provider
    provider(
        "bedrock",
        WRITER_MODEL_ID="anthropic.claude-sonnet-4",
        RESEARCHER_MODEL_ID="amazon.nova-lite",
        SEARCH_PROVIDER="searxng",
    )

    # Then a writer's document is priced at the writer's model, with its file; a researcher's search at its own, with
    # the pages its budget lets it read (WEB_RESEARCH_MAX_PAGES, 5)
    tokens_in, tokens_out, searches, pages, files = TYPICAL_BLOCK_USAGE[BlockType.DOCUMENT]
    assert estimate_block_credits("document-block", "Writer") == usage_credits(
        [("anthropic.claude-sonnet-4", tokens_in, tokens_out)], searches, pages, files
    )
    tokens_in, tokens_out, searches, _, files = TYPICAL_BLOCK_USAGE[BlockType.WEB_RESEARCH]
    assert estimate_block_credits("web-research-block", "Researcher") == usage_credits(
        [("amazon.nova-lite", tokens_in, tokens_out)], searches, 5, files
    )
    # And a dearer model makes a dearer estimate
    assert estimate_block_credits("document-block", "Writer") > estimate_block_credits("document-block", "Researcher")


def test_with_the_offline_provider_a_blocks_estimate_is_what_it_uses_besides_models(provider, model_env):
    # Given the offline provider, whatever model ids are configured, and a search provider
    provider("offline", WRITER_MODEL_ID="anthropic.claude-sonnet-4", SEARCH_PROVIDER="searxng")

    # Then only searches, pages and files are priced, as the offline models cost nothing; research as far as its
    # budget goes (DEEP_RESEARCH_MAX_PAGES, 20)
    assert estimate_block_credits("prompt-block", "Analyst") == 0
    _, _, searches, _, files = TYPICAL_BLOCK_USAGE[BlockType.DEEP_RESEARCH]
    assert estimate_block_credits("deep-research-block", "Researcher") == usage_credits([], searches, 20, files) > 0
    assert estimate_block_credits("presentation-block", "Designer") == usage_credits([], 0, 0, 1)


def test_a_block_is_estimated_for_what_it_is_charged_for(provider, model_env):
    # Given the offline provider and no search provider (the default)
    provider("offline")

    # Then research that cannot search is estimated at nothing (web research fails uncharged, deep research reads its
    # files), a page fetched is a credit, and each file a block writes is priced: a generated image's too, not a
    # described upload
    assert estimate_block_credits("web-research-block", "Researcher") == 0
    assert estimate_block_credits("deep-research-block", "Researcher") == 0
    assert estimate_block_credits("web-block", "Researcher") == usage_credits([], 0, 1, 0)
    assert estimate_block_credits("image-block", "Designer") == usage_credits([], 0, 0, 1)
    assert estimate_block_credits("image-block", "Designer", uploaded=True) == 0
    # And a budget of no pages is estimated at none
    provider("offline", SEARCH_PROVIDER="searxng", WEB_RESEARCH_MAX_PAGES="0", WEB_RESEARCH_QUERIES="1")
    assert estimate_block_credits("web-research-block", "Researcher") == usage_credits([], 1, 0, 0)


def test_every_block_type_has_a_typical_use():
    assert set(TYPICAL_BLOCK_USAGE) == set(BlockType)
