"""The Planner: canvases for every template within the template table, wired so outputs carry forward and ending
in the template's deliverable; explicit blocks; subtasks; a model's plan checked, repaired or asked again."""

from __future__ import annotations

import json
import uuid

import pytest

from canvas_core.agents.catalog import DELIVERABLE_TITLES, TEMPLATE_DELIVERABLE
from canvas_core.agents.personas import PERSONAS
from canvas_core.blocks.context import Usage
from canvas_core.models.catalog import TEMPLATE_BLOCKS, BlockType, TaskType, Template
from canvas_core.models.items import RunItem, Upload
from canvas_core.planner import (
    MAX_BLOCKS,
    MAX_PLAN_ATTEMPTS,
    Plan,
    parent_task_id,
    persona_task_id,
    plan_canvas,
    tool_call_task_id,
    tool_call_tasks,
)
from canvas_core.pricing import usage_credits
from canvas_core.providers.offline import OfflineProvider
from tests.fakes.recording_provider import RecordingProvider, throttled

pytestmark = pytest.mark.unit

INSTRUCTIONS = "Audience: city council members. Be rigorous and cite every claim."


def make_run(prompt="A short report about tide pools.", template="auto", blocks=None, uploads=(), instructions=None):
    return RunItem(
        run_id=str(uuid.uuid4()),
        account_id="acct",
        canvas_id=str(uuid.uuid4()),
        prompt=prompt,
        template=template,
        blocks=blocks,
        agent_instructions=instructions,
        uploads=list(uploads),
        created_at_ms=0,
        estimated_duration_ms=0,
    )


def upload(name: str, extension: str) -> Upload:
    return Upload(
        file_id=str(uuid.uuid4()), name=name, extension=extension, content_type="x", size_bytes=1, s3_key=f"k/{name}"
    )


def types(plan: Plan) -> list[str]:
    return [n.type.removesuffix("-block") for n in plan.nodes]


def assert_well_formed(plan: Plan, run: RunItem) -> None:
    """Positions in run order, edges that go forward and match the inputs, every block's output reaching the
    answer or a deliverable, and a task tree of a parent and one persona-task per block."""
    nodes = plan.nodes
    assert [n.position for n in nodes] == list(range(len(nodes)))
    position = {n.block_id: n.position for n in nodes}
    assert {(e.source_id, e.target_id) for e in plan.edges} == {(i, n.block_id) for n in nodes for i in n.inputs}
    assert all(position[e.source_id] < position[e.target_id] for e in plan.edges)
    # no loose ends: what nothing reads is the answer or a deliverable
    read = {e.source_id for e in plan.edges}
    sinks = {n.type for n in nodes if n.block_id not in read}
    assert sinks <= {"text-block"} | {b.value for b in DELIVERABLE_TITLES}, sinks
    assert len(nodes) <= MAX_BLOCKS
    parent, *personas = plan.tasks
    assert parent.task_type == TaskType.PARENT and parent.task_id == parent_task_id(run.canvas_id)
    assert [t.block_id for t in personas] == [n.block_id for n in nodes]
    assert all(t.task_type == TaskType.PERSONA and t.parent_id == parent.task_id for t in personas)
    assert all(t.task_id == persona_task_id(run.canvas_id, t.block_id) for t in personas)
    assert all(n.persona in PERSONAS for n in nodes)


EXPECTED = {
    "auto": ["prompt", "text"],
    "deep_research": ["web-research", "prompt", "prompt", "text", "memo"],
    "report": ["prompt", "text", "document"],
    "slides": ["prompt", "text", "presentation"],
    "memo": ["prompt", "text", "memo"],
    "excel": ["prompt", "text", "excel"],  # no table-block: without material it could only restate the prompt
    "app": ["prompt", "text", "app"],
    "landing_page": ["prompt", "text", "image", "landing-page"],
}


@pytest.mark.parametrize("template", [t.value for t in Template])
def test_each_template_gets_a_canvas_within_its_block_types_ending_in_its_deliverable(template):
    # Given
    run = make_run(prompt=f"A short {template} about tide pools.", template=template)
    # When
    plan = plan_canvas(run, OfflineProvider())
    # Then
    assert types(plan) == EXPECTED[template]
    assert {n.type for n in plan.nodes} <= {b.value for b in TEMPLATE_BLOCKS[Template(template)]}
    deliverable = TEMPLATE_DELIVERABLE.get(Template(template), BlockType.TEXT)
    assert plan.nodes[-1].type == deliverable.value
    assert_well_formed(plan, run)
    assert [n.block_id for n in plan.nodes if n.block_id not in {e.source_id for e in plan.edges}] == [
        plan.nodes[-1].block_id
    ]
    assert [n.name for n in plan.nodes if n.type == "text-block"] == ["Answer"]
    assert plan.problems == [] and plan.method == "rules"
    assert (plan.models_used, plan.credits) == ([], 0)


def test_deep_research_has_researcher_analyst_reviewer_and_writer():
    plan = plan_canvas(make_run(template="deep_research"), OfflineProvider())
    assert [n.persona for n in plan.nodes] == ["Researcher", "Analyst", "Reviewer", "Writer", "Writer"]
    research, analysis, review, answer, memo = plan.nodes
    assert analysis.inputs == [research.block_id]
    assert review.inputs == [analysis.block_id]
    assert answer.inputs == [analysis.block_id, review.block_id]
    # the memo reads the research itself besides the answer
    assert memo.inputs == [research.block_id, answer.block_id] and memo.name == "Research memo"


def test_explicit_blocks_override_the_template():
    # Given a report template, but the blocks given explicitly
    run = make_run(template="report", blocks=["prompt-block", "text-block"])
    # When
    plan = plan_canvas(run, OfflineProvider())
    # Then one block per listed type, the analysis feeding the Writer, and no document-block
    assert types(plan) == ["prompt", "text"]
    assert plan.edges[0].source_id == plan.nodes[0].block_id and plan.edges[0].target_id == plan.nodes[1].block_id
    assert_well_formed(plan, run)


def test_explicit_blocks_are_wired_by_stage():
    run = make_run(prompt="Chart city budgets", blocks=["excel-block", "text-block", "table-block", "web-block"])
    plan = plan_canvas(run, OfflineProvider())
    assert types(plan) == ["web", "table", "text", "excel"]
    assert_well_formed(plan, run)


def test_explicit_deliverable_alone_is_planned_alone():
    plan = plan_canvas(make_run(prompt="Write a report", blocks=["document-block"]), OfflineProvider())
    assert types(plan) == ["document"] and plan.edges == []


@pytest.mark.parametrize("block_type", [b.value for b in BlockType if b != BlockType.FILE])
def test_a_type_asked_for_alone_is_planned(block_type):
    # Given a run asking for one type by name (a type no rule places, as a new one, works on the request)
    run = make_run(prompt="Everything about the tide pools of the north shore", blocks=[block_type])
    # When it is planned without a model
    plan = plan_canvas(run, OfflineProvider())
    # Then it has a block of that type, run by a persona there is
    assert block_type in {n.type for n in plan.nodes}
    assert all(n.persona in PERSONAS for n in plan.nodes)


def test_uploads_become_blocks_first_and_feed_the_analysis_whatever_the_template():
    # Given a report (whose types include neither file- nor image-blocks) with a document and an image
    run = make_run(template="report", uploads=[upload("notes.txt", "txt"), upload("pixel.png", "png")])
    # When
    plan = plan_canvas(run, OfflineProvider())
    # Then
    assert types(plan) == ["file", "image", "prompt", "text", "document"]
    notes, pixel, analysis = plan.nodes[:3]
    assert notes.upload_id == run.uploads[0].file_id and pixel.upload_id == run.uploads[1].file_id
    assert (notes.persona, pixel.persona) == ("Librarian", "Designer")
    assert analysis.inputs == [notes.block_id, pixel.block_id]
    assert_well_formed(plan, run)


def test_a_prompt_in_parts_gets_one_subtask_each():
    # Given a prompt with three numbered parts
    prompt = "About tide pools:\n1. Which animals live there?\n2. How do tides shape them?\n3. What threatens them?"
    # When
    plan = plan_canvas(make_run(prompt=prompt), OfflineProvider())
    # Then one prompt-block per part, each read by the Writer
    parts = [n for n in plan.nodes if n.type == "prompt-block"]
    assert [p.name for p in parts] == [
        "Part 1: Which animals live there?",
        "Part 2: How do tides shape them?",
        "Part 3: What threatens them?",
    ]
    assert parts[0].instructions.startswith("Which animals live there?")
    assert plan.nodes[-1].type == "text-block" and plan.nodes[-1].inputs == [p.block_id for p in parts]


def test_questions_become_subtasks_too():
    plan = plan_canvas(make_run(prompt="Why do tides happen? When are they highest?"), OfflineProvider())
    assert types(plan) == ["prompt", "prompt", "text"]


def test_auto_reads_the_prompt_for_links_research_and_deliverables():
    # Given a prompt that links a page and a video, asks for current sources and for slides
    prompt = (
        "Research the latest findings on tide pool warming and make slides. "
        "See https://example.org/tides and https://www.youtube.com/watch?v=abc123"
    )
    run = make_run(prompt=prompt, instructions=INSTRUCTIONS)
    # When
    plan = plan_canvas(run, OfflineProvider())
    # Then
    assert types(plan) == ["web", "yt", "web-research", "prompt", "prompt", "text", "presentation"]
    web, video = plan.nodes[:2]
    assert (web.url, video.url) == ("https://example.org/tides", "https://www.youtube.com/watch?v=abc123")
    assert plan.nodes[4].persona == "Reviewer"  # the instructions ask for rigour
    assert_well_formed(plan, run)


@pytest.mark.parametrize(
    "prompt,last",
    [
        ("Write a short report on tide pools.", "document"),
        ("Please turn these notes into a slide deck and a memo.", "memo"),
        ("Build a spreadsheet of tide pool animals.", "excel"),
        ("Make a landing page for guided tide pool walks.", "landing-page"),
        ("Summarize the report I sent about tide pools.", "text"),
        ("Which app do rangers use to log tide pools?", "text"),
    ],
)
def test_auto_plans_the_deliverables_the_prompt_asks_to_be_made(prompt, last):
    run = make_run(prompt=prompt)
    plan = plan_canvas(run, OfflineProvider())
    assert types(plan)[-1] == last
    assert_well_formed(plan, run)


def test_templates_without_web_research_do_not_search():
    plan = plan_canvas(make_run(prompt="Research the latest on tide pools", template="memo"), OfflineProvider())
    assert "web-research" not in types(plan)


def test_a_large_request_stays_within_the_size_limit():
    # Given ten uploads, links, research words and a prompt of many parts
    parts = "\n".join(f"- Part {i}: compare tide pool {i} in a table" for i in range(12))
    links = " ".join(f"https://example.org/{i}" for i in range(8))
    run = make_run(
        prompt=f"Research and list:\n{parts}\n{links}",
        uploads=[upload(f"f{i}.txt", "txt") for i in range(10)],
        instructions="rigorous",
    )
    # When
    plan = plan_canvas(run, OfflineProvider())
    # Then
    assert len(plan.nodes) <= MAX_BLOCKS and plan.problems == []
    assert types(plan).count("prompt") == 7  # six parts, the last holding the rest, and the review
    assert_well_formed(plan, run)


def test_planning_again_writes_the_same_ids():
    run = make_run(template="deep_research", uploads=[upload("a.txt", "txt")])
    first, again = plan_canvas(run, OfflineProvider()), plan_canvas(run, OfflineProvider())
    assert [n.model_dump() for n in first.nodes] == [n.model_dump() for n in again.nodes]
    assert [t.task_id for t in first.tasks] == [t.task_id for t in again.tasks]


# ---- with a model


def plan_json(*steps: dict) -> str:
    return "```json\n" + json.dumps({"steps": list(steps)}) + "\n```"


def step(id, type, inputs=(), title=None, persona=None):
    return {"id": id, "type": type, "title": title or f"Step {id}", "persona": persona, "inputs": list(inputs)}


def test_the_model_plans_with_the_requesters_instructions_and_its_plan_is_used():
    # Given a model that plans research, analysis and the answer
    provider = RecordingProvider(
        answers=[
            plan_json(
                step("r", "web-research-block", title="Research council budgets", persona="Researcher"),
                step("a", "prompt-block", ["r", "upload1"], title="Weigh the options", persona="Analyst"),
                step("w", "text-block", ["a"], title="Answer", persona="Writer"),
                step("m", "memo", ["w"], title="Council memo"),
            )
        ]
    )
    run = make_run(
        prompt="Should the city fund tide pool monitoring?",
        template="deep_research",
        uploads=[upload("budget.csv", "csv")],
        instructions=INSTRUCTIONS,
    )
    # When
    plan = plan_canvas(run, provider)
    # Then the Planner's prompts carried the instructions, the constraint, the prompt and the uploads
    [call] = provider.calls
    assert call.role == "planner"
    assert INSTRUCTIONS in call.system
    assert "memo-block" in call.system and "document-block" not in call.system
    assert "Should the city fund tide pool monitoring?" in call.prompt and "upload1: budget.csv" in call.prompt
    # And its plan is the canvas
    assert plan.method == "model" and plan.problems == []
    assert [(n.type, n.name, n.persona) for n in plan.nodes] == [
        ("file-block", "budget.csv", "Librarian"),
        ("web-research-block", "Research council budgets", "Researcher"),
        ("prompt-block", "Weigh the options", "Analyst"),
        ("text-block", "Answer", "Writer"),
        ("memo-block", "Council memo", "Writer"),
    ]
    assert_well_formed(plan, run)
    # And the deliverable reads the upload itself, though the model's plan had it read only the answer
    assert plan.nodes[-1].inputs == [plan.nodes[3].block_id, plan.nodes[0].block_id]
    # And planning's usage is priced
    assert plan.models_used == ["test/recording-model:planner"]
    tokens_in, tokens_out = len((call.system + " " + call.prompt).split()), len(provider.answers[0].split())
    assert plan.credits == usage_credits([("test/recording-model:planner", tokens_in, tokens_out)]) > 0


def test_a_malformed_plan_is_repaired():
    # Given a memo plan with a type the template forbids, a cycle, an unknown input, a step reading itself,
    # a loose end, a duplicate id, and neither Writer nor memo
    provider = RecordingProvider(
        answers=[
            plan_json(
                step("a", "prompt-block", ["c", "ghost"]),
                step("b", "document-block", ["a"]),
                step("c", "prompt-block", ["b", "c"]),
                step("c", "yt-block"),
                step("d", "web-block"),
            )
        ]
    )
    run = make_run(template="memo", instructions=INSTRUCTIONS)
    # When
    plan = plan_canvas(run, provider)
    # Then the plan was repaired, not discarded
    assert plan.method == "model" and len(provider.calls) == 1
    problems = " | ".join(plan.problems)
    for expected in (
        "step 'b' dropped: document-block is not allowed here",
        "read an unknown step 'ghost'",
        "read its own output",
        "step id 'c' is used twice; renamed to 'c-2'",
        "ends in a memo-block; one was added",
        "no Writer",
        "was in a cycle",
    ):
        assert expected in problems
    assert {n.type for n in plan.nodes} <= {b.value for b in TEMPLATE_BLOCKS[Template.MEMO]}
    assert types(plan)[-2:] == ["text", "memo"]
    assert_well_formed(plan, run)


def test_an_answer_that_is_not_a_plan_is_asked_again_with_the_reason():
    # Given prose first, then a plan
    provider = RecordingProvider(
        answers=["I would research first and then write.", plan_json(step("a", "prompt-block"), step("w", "text"))]
    )
    # When
    plan = plan_canvas(make_run(), provider)
    # Then
    assert len(provider.calls) == 2 and plan.method == "model"
    assert "could not be used: the answer holds no valid JSON" in provider.calls[1].prompt
    assert "I would research first" in provider.calls[1].prompt
    assert types(plan) == ["prompt", "text"]
    assert plan.credits == usage_credits(
        [
            ("test/recording-model:planner", len((c.system + " " + c.prompt).split()), len(a.split()))
            for c, a in zip(
                provider.calls, ["I would research first and then write.", provider.answers[0]], strict=True
            )
        ]
    )


def test_a_plan_of_only_forbidden_types_is_asked_again():
    provider = RecordingProvider(
        answers=[plan_json(step("x", "excel-block")), plan_json(step("a", "app-block"), step("w", "text-block"))]
    )
    plan = plan_canvas(make_run(template="app"), provider)
    assert "excel-block is not allowed here" in provider.calls[1].prompt
    assert "no usable step" in provider.calls[1].prompt
    assert types(plan) == ["text", "app"] and plan.nodes[1].inputs == [plan.nodes[0].block_id]


def test_a_model_that_never_plans_gives_way_to_the_rules_after_bounded_attempts():
    provider = RecordingProvider(answers=['{"steps": "not a list"}'])
    plan = plan_canvas(make_run(template="slides"), provider)
    assert len(provider.calls) == MAX_PLAN_ATTEMPTS
    assert "does not match the schema" in provider.calls[1].prompt
    assert plan.method.startswith("rules") and types(plan) == EXPECTED["slides"]
    assert plan.models_used == ["test/recording-model:planner"] and plan.credits > 0


def test_a_planner_out_of_time_plans_by_rules_rather_than_ask_again(monkeypatch):
    # Given the planning budget already spent after the first (unusable) answer
    monkeypatch.setattr("canvas_core.planner.PLAN_BUDGET_SECONDS", -1)
    provider = RecordingProvider(answers=["no plan here"])
    # When
    plan = plan_canvas(make_run(template="memo"), provider)
    # Then
    assert len(provider.calls) == 1
    assert plan.method.startswith("rules") and types(plan) == EXPECTED["memo"]


def test_a_failing_planner_model_gives_way_to_the_rules():
    provider = RecordingProvider(fail_with=throttled())
    plan = plan_canvas(make_run(template="report"), provider)
    assert len(provider.calls) == 1
    assert plan.method.startswith("rules") and types(plan) == EXPECTED["report"]
    assert (plan.models_used, plan.credits) == ([], 0)


def test_a_plan_too_large_is_cut_to_the_limit():
    steps = [step(f"s{i}", "prompt-block") for i in range(60)] + [step("w", "text-block")]
    plan = plan_canvas(make_run(), RecordingProvider(answers=[plan_json(*steps)]))
    assert len(plan.nodes) == MAX_BLOCKS
    assert any(f"at most {MAX_BLOCKS}" in p for p in plan.problems)
    assert plan.nodes[-1].type == "text-block" and len(plan.nodes[-1].inputs) == MAX_BLOCKS - 1


# ---- tool calls


def test_each_tool_call_of_a_block_is_a_tool_call_task():
    # Given a block that called a model twice, searched once and fetched two pages
    run = make_run()
    node = plan_canvas(run, OfflineProvider()).nodes[0]
    usage = Usage(calls=[("m1", 10, 5), ("m2", 7, 3)], searches=1, pages_fetched=2)
    # When
    tasks = tool_call_tasks(node, usage)
    # Then
    assert [t.name for t in tasks] == [
        "Model call: m1 (10 tokens in, 5 out)",
        "Model call: m2 (7 tokens in, 3 out)",
        "Web search 1 of 1",
        "Page fetch 1 of 2",
        "Page fetch 2 of 2",
    ]
    assert tasks[0].task_id == tool_call_task_id(run.canvas_id, node.block_id)
    assert len({t.task_id for t in tasks}) == 5
    assert all(t.parent_id == persona_task_id(run.canvas_id, node.block_id) for t in tasks)
    assert all(t.task_type == TaskType.TOOL_CALL and t.status.value == "completed" for t in tasks)
    assert tool_call_tasks(node, Usage()) == []


def test_a_model_cannot_point_a_block_at_an_upload_or_flood_it_with_text():
    # Given a plan whose image step claims an upload, with very long instructions
    image = {**step("i", "image-block"), "upload_id": "someone-elses-file", "instructions": "x" * 10_000}
    provider = RecordingProvider(answers=[plan_json(image, step("w", "text-block", ["i"]))])
    # When
    plan = plan_canvas(make_run(), provider)
    # Then the image is a generated one, and its instructions are cut
    generated = plan.nodes[0]
    assert generated.type == "image-block" and generated.upload_id is None
    assert len(generated.instructions) == 4000


# ---- the deliverable reads the material itself ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "deliverable"),
    [("slides", "presentation-block"), ("report", "document-block"), ("excel", "excel-block"), ("app", "app-block")],
)
def test_each_deliverable_reads_the_uploads_directly(template, deliverable):
    # Given a workbook, a CSV and a photo uploaded with a template's request
    uploads = [upload("sales.xlsx", "xlsx"), upload("tickets.csv", "csv"), upload("photo.png", "png")]
    run = make_run(prompt="Show our sales and tickets", template=template, uploads=uploads)
    # When
    plan = plan_canvas(run, OfflineProvider())
    # Then the deliverable reads every upload, not only the answer written about them
    [target] = [n for n in plan.nodes if n.type == deliverable]
    assert {n.block_id for n in plan.nodes[:3]} <= set(target.inputs)
    assert any(
        plan.nodes[i].type == "text-block" for i in range(len(plan.nodes)) if plan.nodes[i].block_id in target.inputs
    )
    assert_well_formed(plan, run)


def test_an_image_asked_for_reads_the_tables_and_a_landing_page_uses_the_uploaded_image():
    # Given a chart asked for over an uploaded table
    chart = plan_canvas(make_run(prompt="Make a chart image of the sales table", uploads=[upload("s.xlsx", "xlsx")]))
    # Then the image-block reads the upload (and the table built from it), not only the answer
    [image] = [n for n in chart.nodes if n.type == "image-block"]
    [table] = [n for n in chart.nodes if n.type == "table-block"]
    assert chart.nodes[0].block_id in image.inputs and table.block_id in image.inputs
    # Given a landing page with an uploaded logo
    landing = plan_canvas(
        make_run(prompt="A page for our bakery", template="landing_page", uploads=[upload("logo.png", "png")])
    )
    # Then no hero image is generated: the page reads the logo
    assert [n.type for n in landing.nodes].count("image-block") == 1
    assert landing.nodes[0].block_id in landing.nodes[-1].inputs


def test_the_deliverable_is_told_its_outline():
    from canvas_core.prompt_format import outline_in

    run = make_run(prompt="Make a deck of five slides comparing solar, wind and hydro power", template="slides")
    deck = plan_canvas(run, OfflineProvider()).nodes[-1]
    assert outline_in(deck.instructions) == (["Solar", "Wind", "Hydro power"], 5)


@pytest.mark.parametrize(
    ("prompt", "pages"),
    [
        ("Summarize http://[::1]:3941/e please", ["http://[::1]:3941/e"]),
        ("Summarize http://[bad and http://[::1", []),
        ("Summarize http://example.com:99999/x and https://[fe80::1%25eth0]/y", ["https://[fe80::1%25eth0]/y"]),
    ],
)
def test_a_link_however_malformed_is_planned_or_left_out_never_an_error(prompt, pages):
    plan = plan_canvas(make_run(prompt=prompt), OfflineProvider())
    assert [n.url for n in plan.nodes if n.type == "web-block"] == pages
