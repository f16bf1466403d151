"""The persona agents and the Writer: the requester's instructions in every persona's prompt, sources numbered
and cited across blocks, the final output built from the block outputs; and the duration estimate."""

from __future__ import annotations

import uuid

import pytest

from canvas_core.agents.material import number_sources, renumber, strip_sources_section
from canvas_core.agents.writer import final_output
from canvas_core.blocks import prompt, text
from canvas_core.blocks.context import BlockContext
from canvas_core.estimates import BLOCK_MS, FINALIZE_MS, PER_BLOCK_OVERHEAD_MS, PER_FILE_MS, PLAN_MS
from canvas_core.estimates import estimate_duration_ms as estimate
from canvas_core.models.catalog import BlockType, NodeStatus
from canvas_core.models.items import Artifact, EdgeItem, NodeItem, RunItem, Source
from canvas_core.planner import plan_canvas
from canvas_core.providers.offline import NOTICE, OfflineProvider
from tests.fakes.recording_provider import RecordingProvider

pytestmark = pytest.mark.unit

INSTRUCTIONS = "Audience: city council members. Cite every claim."
CANVAS = str(uuid.uuid4())


def make_run(instructions=INSTRUCTIONS, prompt="Should the city fund tide pool monitoring?") -> RunItem:
    return RunItem(
        run_id=str(uuid.uuid4()),
        account_id="acct",
        canvas_id=CANVAS,
        prompt=prompt,
        template="auto",
        agent_instructions=instructions,
        created_at_ms=0,
        estimated_duration_ms=0,
    )


def node(name, type="prompt-block", content="", sources=(), position=0, persona=None, **extra) -> NodeItem:
    return NodeItem(
        canvas_id=CANVAS,
        block_id=str(uuid.uuid5(uuid.UUID(CANVAS), name)),
        name=name,
        type=type,
        status=NodeStatus.COMPLETED,
        content=content,
        sources=list(sources),
        position=position,
        persona=persona,
        **extra,
    )


NOTES = Source(title="notes.txt", file_name="notes.txt")
BUDGET = Source(title="City budget 2026", url="https://city.example/budget")
SURVEY = Source(title="Shore survey", url="https://shore.example/survey", page=4)


def context(target: NodeItem, inputs: list[NodeItem], provider, run: RunItem | None = None) -> BlockContext:
    return BlockContext(run=run or make_run(), node=target, inputs=inputs, files=None, provider=provider)


def test_every_persona_prompt_carries_the_requesters_instructions():
    # Given the canvas the Planner made, run block by block with a recording provider
    run = make_run(prompt="Research tide pool health:\n1. What is measured?\n2. What does it cost?")
    plan = plan_canvas(run, OfflineProvider())
    provider = RecordingProvider()
    done: dict[str, NodeItem] = {}
    for planned in plan.nodes:
        inputs = [done[i] for i in planned.inputs]
        module = {"prompt-block": prompt, "text-block": text}.get(planned.type)
        if module is None:  # gathering blocks are other modules' business; stand in for their output
            output_content, output_sources = f"{planned.name} found things [1].", [BUDGET]
        else:
            output = module.run(context(planned, inputs, provider, run))
            output_content, output_sources = output.content, output.sources
        done[planned.block_id] = planned.model_copy(update={"content": output_content, "sources": output_sources})
    # Then every persona's system prompt names it and carries the instructions, and its role picks the model
    personas = [n.persona for n in plan.nodes if n.type in ("prompt-block", "text-block")]
    assert personas == ["Analyst", "Analyst", "Reviewer", "Writer"]
    assert [c.role for c in provider.calls] == ["analyst", "analyst", "reviewer", "writer"]
    for call, persona in zip(provider.calls, personas, strict=True):
        assert f"You are the {persona} agent" in call.system
        assert INSTRUCTIONS in call.system
    # And the blocks of other types get the same persona prompt through their context
    other = context(plan.nodes[0], [], provider, run).system_prompt()
    assert "You are the Researcher agent" in other and INSTRUCTIONS in other


def test_the_writer_numbers_sources_across_inputs_and_lists_them():
    # Given an analysis citing its own two sources, and a file with one of them again plus another
    analysis = node("Analysis", content="Monitoring costs 40k a year [2]. Notes agree [1].", sources=[NOTES, BUDGET])
    survey = node("Survey", type="web-block", content="Shores warmed 2 degrees [1].", sources=[SURVEY, NOTES])
    answer = node("Answer", type="text-block", persona="Writer", instructions="Write the answer to: fund it?")
    provider = RecordingProvider(answers=["Fund it: it costs 40k [2] and shores warm [3].\n\nSources:\n[1] x"])
    # When
    output = text.run(context(answer, [analysis, survey], provider))
    # Then the model saw the material with one numbering, and the citations renumbered to it
    [call] = provider.calls
    assert "Question: Should the city fund tide pool monitoring?" in call.prompt
    assert "## Analysis (sources [1] [2])\nMonitoring costs 40k a year [2]. Notes agree [1]." in call.prompt
    assert "## Survey (sources [1] [3])\nShores warmed 2 degrees [3]." in call.prompt
    assert "[3] Shore survey, page 4 - https://shore.example/survey" in call.prompt
    assert "Cite it with the numbers of its sources" in call.system
    # And the answer ends with the one list of sources (the model's own list is replaced)
    assert output.sources == [NOTES, BUDGET, SURVEY]
    assert output.content == (
        "Fund it: it costs 40k [2] and shores warm [3].\n\n"
        "Sources\n[1] notes.txt\n[2] City budget 2026 - https://city.example/budget\n"
        "[3] Shore survey, page 4 - https://shore.example/survey"
    )


def test_the_offline_writer_answers_from_the_material_with_citations():
    notes = node(
        "notes.txt", type="file-block", content="Launch is planned for March. Beta in January.", sources=[NOTES]
    )
    analysis_out = prompt.run(context(node("Analysis", instructions="When is the launch?"), [notes], OfflineProvider()))
    analysis = node("Analysis", content=analysis_out.content, sources=analysis_out.sources)
    answer = text.run(context(node("Answer", type="text-block", persona="Writer"), [analysis], OfflineProvider()))
    assert answer.content.startswith(NOTICE)
    assert "Question: Should the city fund tide pool monitoring?" in answer.content
    assert "- Launch is planned for March [1]." in answer.content
    assert answer.content.endswith("Sources\n[1] notes.txt")


def test_final_output_is_the_writers_answer_with_the_files_named():
    analysis = node("Analysis", content="Draft", position=0)
    answer = node("Answer", type="text-block", content="The answer [1].\n\nSources\n[1] notes.txt", position=1)
    artifact = Artifact(id="a1", type="docx", name="report.docx", s3_key="k", size_bytes=10)
    report = node("Report", type="document-block", content="Report written", position=2, artifacts=[artifact])
    edges = [EdgeItem(source_id=analysis.block_id, target_id=answer.block_id)]
    edges.append(EdgeItem(source_id=answer.block_id, target_id=report.block_id))
    assert final_output([analysis, answer, report], edges) == (
        "The answer [1].\n\nSources\n[1] notes.txt\n\nFiles: report.docx"
    )


def test_without_the_writer_the_final_output_gathers_what_finished_with_numbered_sources():
    # Given a partial run: two files finished, the analysis reading them did not
    a = node("a.txt", type="file-block", content="Tides follow the moon [1].", sources=[NOTES])
    b = node("b.html", type="web-block", content="Budgets are tight [1].", sources=[BUDGET])
    analysis_id = str(uuid.uuid4())
    edges = [
        EdgeItem(source_id=a.block_id, target_id=analysis_id),
        EdgeItem(source_id=b.block_id, target_id=analysis_id),
    ]
    # When
    text_out = final_output([a, b], edges)
    # Then
    assert text_out == (
        "a.txt:\nTides follow the moon [1].\n\nb.html:\nBudgets are tight [2].\n\n"
        "Sources\n[1] notes.txt\n[2] City budget 2026 - https://city.example/budget"
    )
    assert final_output([node("only", content="Just this.")], []) == "Just this."
    assert final_output([], []) == ""


def test_without_the_writer_the_offline_notice_is_said_once():
    from canvas_core.providers.offline import NOTICE

    a = node("Part 1", content=f"{NOTICE}\n\nTask: one\n\n- Tides follow the moon [1].", sources=[NOTES])
    b = node("Part 2", content=f"{NOTICE}\n\nTask: two\n\n- Budgets are tight [1].", sources=[BUDGET])
    text_out = final_output([a, b], [])
    assert text_out.count(NOTICE) == 1 and text_out.startswith(NOTICE)
    assert "Tides follow the moon [1]." in text_out and "Budgets are tight [2]." in text_out


def test_material_helpers():
    assert renumber("a [1] b [2] c [9]", {1: 3, 2: 1}) == "a [3] b [1] c [9]"
    assert strip_sources_section("Body [1].\n\n**Sources**\n[1] A\n2. B") == "Body [1]."
    assert strip_sources_section("Body.\n\nSources\nnot a list of sources") == "Body.\n\nSources\nnot a list of sources"
    sources, sections = number_sources([node("x", content="c [1]", sources=[BUDGET]), node("y", content="d")])
    assert sources == [BUDGET] and [s.refs for s in sections] == [[1], []]


# ---- the duration estimate


def path_ms(*blocks: BlockType) -> int:
    return sum(BLOCK_MS[b] + PER_BLOCK_OVERHEAD_MS for b in blocks)


def test_the_estimate_follows_the_longest_path_of_the_typical_canvas():
    B = BlockType
    assert estimate("auto", None, 0) == PLAN_MS + path_ms(B.PROMPT, B.TEXT) + FINALIZE_MS
    assert estimate("report", None, 0) == PLAN_MS + path_ms(B.PROMPT, B.TEXT, B.DOCUMENT) + FINALIZE_MS
    deep = path_ms(B.WEB_RESEARCH, B.PROMPT, B.PROMPT, B.TEXT, B.MEMO)
    assert estimate("deep_research", None, 0) == PLAN_MS + deep + FINALIZE_MS
    # without files to tabulate the excel canvas has no table-block: its workbook is drafted from the answer
    assert estimate("excel", None, 0) == PLAN_MS + path_ms(B.PROMPT, B.TEXT, B.EXCEL) + FINALIZE_MS


def test_with_the_offline_provider_the_estimate_is_seconds_not_minutes():
    # Given the offline provider, which calls no model
    for template in ("auto", "report", "deep_research", "slides"):
        offline = estimate(template, None, 1, offline=True)
        # Then the estimate is a few seconds, and still longer for a longer canvas
        assert 1_000 <= offline <= 5_000, (template, offline)
        assert offline < estimate(template, None, 1) / 20
    assert estimate("deep_research", None, 0, offline=True) > estimate("auto", None, 0, offline=True)


def test_the_estimate_grows_with_files_and_follows_explicit_blocks():
    assert estimate("auto", None, 3) - estimate("auto", None, 0) == 3 * PER_FILE_MS
    explicit = estimate("report", ["prompt-block", "text-block"], 0)
    assert explicit == estimate("auto", None, 0)
    assert estimate("auto", ["deep-research-block", "text-block"], 0) > estimate("deep_research", None, 0)
