"""The Planner's plan as a structured answer: a schema of this request's block types, the personas and the ids the
code gives (`upload1`, `step1`, ...), sent to an OpenAI-compatible endpoint as its response_format; a plan of that
shape is used as it is, one of the older free shape still read; semantic repairs (a cycle, an unknown input, a file
the request asked for and the plan left out) are made and said in the run's errors."""

from __future__ import annotations

import json

import pytest

from canvas_core.planner import plan_canvas
from canvas_core.providers.openai import OpenAIProvider
from tests.fakes.model_servers import PLANNER_MARK, FakeOpenAI
from tests.fakes.recording_provider import RecordingProvider
from tests.unit.test_planner import make_run, types, upload

pytestmark = pytest.mark.unit


def structured(*steps: dict) -> str:
    return json.dumps({"steps": list(steps)})


def step(kind: str, title: str, persona: str, reads: list[str] | None = None) -> dict:
    return {"type": kind, "title": title, "persona": persona, "instructions": f"Do: {title}", "reads": reads or []}


def test_a_plan_of_the_schema_is_used_with_the_ids_the_code_gives():
    # Given a model answering a plan of the schema's shape, reading an upload and an earlier step
    provider = RecordingProvider(
        answers=[
            structured(
                step("prompt-block", "Read the survey", "Analyst", ["upload1"]),
                step("text-block", "Answer", "Writer", ["step1"]),
            )
        ]
    )
    run = make_run(prompt="What does the survey say?", uploads=[upload("survey.csv", "csv")])
    # When
    plan = plan_canvas(run, provider)
    # Then it is the canvas, wired as it said, with nothing repaired and nothing for the run's errors
    assert plan.method == "model" and plan.problems == [] and plan.notes == []
    assert types(plan) == ["file", "prompt", "text"]
    file_block, analysis, answer = plan.nodes
    assert analysis.inputs == [file_block.block_id] and answer.inputs == [analysis.block_id]
    # And the Planner was given the schema: the allowed types as an enum, the ids it may read
    prompt = provider.calls[0].prompt
    assert '"enum":["upload1","step1"' in prompt and '"prompt-block"' in prompt


def test_a_file_the_request_asks_for_and_the_plan_leaves_out_is_added_and_said():
    # Given a request for a report and a deck, and a model that plans only the deck
    provider = RecordingProvider(
        answers=[
            structured(
                step("prompt-block", "Findings", "Analyst"),
                step("text-block", "Answer", "Writer", ["step1"]),
                step("presentation-block", "Deck", "Designer", ["step2"]),
            )
        ]
    )
    run = make_run(prompt="Make a report and a slide deck on tide pool visitors.")
    # When
    plan = plan_canvas(run, provider)
    # Then the report is added, reading the answer, and the run's errors will say so
    assert plan.method == "model"
    assert sorted(types(plan)[-2:]) == ["document", "presentation"]
    report = next(n for n in plan.nodes if n.type == "document-block")
    assert report.inputs == [next(n.block_id for n in plan.nodes if n.type == "text-block")]
    assert len(plan.notes) == 1 and "document-block, which the plan left out; added" in plan.notes[0]


def test_a_cycle_and_an_unknown_input_are_repaired_and_said():
    provider = RecordingProvider(
        answers=[
            structured(
                step("prompt-block", "One", "Analyst", ["step2"]),
                step("prompt-block", "Two", "Analyst", ["step1", "step9"]),
                step("text-block", "Answer", "Writer", ["step2"]),
            )
        ]
    )
    plan = plan_canvas(make_run(prompt="Why do tides happen?"), provider)
    assert plan.method == "model"
    [note] = plan.notes
    assert note.startswith("The Planner's plan was repaired: ")
    assert "unknown step 'step9'" in note and "cycle" in note


def test_openai_is_sent_the_plan_schema_as_its_response_format_and_its_answer_is_used():
    # Given an OpenAI-compatible endpoint that answers plans of the schema
    plan_answer = structured(
        step("prompt-block", "Key facts", "Analyst"), step("text-block", "Answer", "Writer", ["step1"])
    )

    def reply(call) -> str:
        return plan_answer if PLANNER_MARK in call.system else "An answer [1]."

    with FakeOpenAI(reply=reply) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, model_id="small", structured_output="json_schema")
        # When a slides run is planned
        plan = plan_canvas(make_run(prompt="Three slides on tides.", template="slides"), provider)
        [call] = fake.calls
    # Then the request constrained the answer to this template's types, and the plan was used (the deck added last)
    schema = call.body["response_format"]["json_schema"]["schema"]
    step_schema = schema["$defs"]["PlannedStep"]
    assert "presentation-block" in step_schema["properties"]["type"]["enum"]
    assert "excel-block" not in step_schema["properties"]["type"]["enum"]
    assert schema["properties"]["steps"]["maxItems"] == 12
    assert plan.method == "model" and types(plan) == ["prompt", "text", "presentation"]
