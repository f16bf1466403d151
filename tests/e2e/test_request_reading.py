"""What a request says, read over HTTP on the embedded stack with the offline provider: the items it lists become
the rows, sections or slides of the file; the title is a whole phrase; a memo is addressed as it says; research
without a search provider ends the run partial, naming the setting."""

from __future__ import annotations

import io

import httpx
import pytest
from openpyxl import load_workbook

from canvas_core.agents.outline import FUNCTION_WORDS
from canvas_core.render.docx import check_docx
from canvas_core.render.pptx import check_pptx
from tests.e2e.test_deliverable_material import artifact, run

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("template", "prompt", "items"),
    [
        (
            "excel",
            "Build a spreadsheet budget for a 3-day team offsite: travel, lodging, meals, activities.",
            ["Travel", "Lodging", "Meals", "Activities"],
        ),
        ("report", "Write a report on city cycling: safety, infrastructure & commuting habits", None),
        ("slides", "Make slides on renewable energy including solar, wind, hydro as well as geothermal", None),
    ],
)
def test_each_listed_item_becomes_a_part_of_the_file(http: httpx.Client, template, prompt, items):
    result = run(http, prompt, template)
    assert result["status"] == "completed", result["errors"]
    if template == "excel":
        book = load_workbook(io.BytesIO(artifact(result, "xlsx")))
        cells = [str(c.value) for sheet in book.worksheets for row in sheet.iter_rows() for c in row if c.value]
        assert all(any(c.startswith(item) for c in cells) for item in items)
        assert not any("No material was provided beyond the prompt itself." in c for c in cells)
    elif template == "report":
        report = check_docx(artifact(result, "docx"))
        headings = [h for _, h in report.headings]
        assert [h for h in headings if h in ("Safety", "Infrastructure", "Commuting habits")] == [
            "Safety",
            "Infrastructure",
            "Commuting habits",
        ]
        assert report.title.split()[-1].lower() not in FUNCTION_WORDS and len(report.title) <= 80
    else:
        titles = [view.title for view in check_pptx(artifact(result, "pptx"))]
        for item in ("Solar", "Wind", "Hydro", "Geothermal"):
            assert any(t.startswith(item) for t in titles), titles


def test_a_memo_is_addressed_as_the_request_says(http: httpx.Client):
    result = run(http, "Write a memo to the board from the CFO about the Q3 results", "memo")
    memo = check_docx(artifact(result, "docx"))
    assert memo.paragraphs[1:3] == ["TO:\tThe board", "FROM:\tThe CFO"]
    assert memo.paragraphs[4] == "SUBJECT:\tQ3 results"


def test_deep_research_without_a_search_provider_ends_partial_naming_the_setting(http: httpx.Client):
    result = run(http, "Research how warming affects tide pools of the north shore.", "deep_research")
    assert result["status"] == "partial", result["errors"]
    research = [e for e in result["errors"] if e.get("block_type") in ("web-research-block", "deep-research-block")]
    assert research and all("set SEARCH_PROVIDER" in e["error"] for e in research)
    assert result["result"]["final_output"]
