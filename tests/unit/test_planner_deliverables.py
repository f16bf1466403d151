"""With template `auto`, the rule-based Planner makes every file the request asks for, whatever words it uses and in
whatever order it names them, and no file for a plain question or for a document it only mentions."""

from __future__ import annotations

import uuid

import pytest

from canvas_core.agents.catalog import DELIVERABLE_TITLES
from canvas_core.models.items import RunItem, Upload
from canvas_core.planner import MAX_BLOCKS, Plan, plan_canvas
from canvas_core.providers.offline import OfflineProvider

pytestmark = pytest.mark.unit

FILE_TYPES = {b.value for b in DELIVERABLE_TITLES}


def plan_for(prompt: str, uploads: tuple[Upload, ...] = (), template: str = "auto") -> Plan:
    run = RunItem(
        run_id=str(uuid.uuid4()),
        account_id="acct",
        canvas_id=str(uuid.uuid4()),
        prompt=prompt,
        template=template,
        uploads=list(uploads),
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    return plan_canvas(run, OfflineProvider())


def files(plan: Plan) -> list[str]:
    """The blocks that make files, in the plan's order."""
    return [n.type for n in plan.nodes if n.type in FILE_TYPES]


def sales_upload() -> Upload:
    return Upload(
        file_id=str(uuid.uuid4()), name="sales.csv", extension="csv", content_type="text/csv", size_bytes=1,
        s3_key="k/sales.csv",
    )  # fmt: skip


def test_a_request_for_four_deliverables_plans_four_files():
    # Given the request a new user made, with the sales data uploaded
    prompt = "Make a report, a slide deck, a spreadsheet and a web app from the attached sales data"
    # When
    plan = plan_for(prompt, (sales_upload(),))
    # Then one block per file asked for, in the order asked, each reading the upload and the answer
    assert files(plan) == ["document-block", "presentation-block", "excel-block", "app-block"]
    upload, answer = plan.nodes[0], next(n for n in plan.nodes if n.type == "text-block")
    for node in plan.nodes:
        if node.type in FILE_TYPES:
            assert upload.block_id in node.inputs and answer.block_id in node.inputs


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        (
            "Build a web app, a memo and a workbook plus a PowerPoint on our churn numbers",
            ["app-block", "memo-block", "excel-block", "presentation-block"],
        ),
        (
            "I need slides, an Excel file, a write-up and a dashboard for the board meeting",
            ["presentation-block", "excel-block", "document-block", "app-block"],
        ),
        (
            "Write a report on remote work and a slide deck for the board, then make a landing page",
            ["document-block", "presentation-block", "landing-page-block"],
        ),
        (
            "Could you create a prototype, a landing page, a docx, an xlsx, a pptx, a memorandum and an HTML app?",
            [
                "prototype-block",
                "landing-page-block",
                "document-block",
                "excel-block",
                "presentation-block",
                "memo-block",
                "app-block",
            ],
        ),
        ("Turn these notes into decks and spreadsheets", ["presentation-block", "excel-block"]),
        ("Make an Excel tracker and a report template for the project", ["excel-block", "document-block"]),
        ("Summarize the survey. Then draft a memo to staff and a one-pager.", ["memo-block", "document-block"]),
    ],
)
def test_every_deliverable_named_is_planned_in_the_order_named(prompt, expected):
    # When
    plan = plan_for(prompt)
    # Then
    assert files(plan) == expected
    assert len(plan.nodes) <= MAX_BLOCKS


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Prepare the quarterly business review", ["document-block"]),
        ("Put together the annual performance review for the sales team", ["document-block"]),
        ("Prepare the QBR for Acme", ["document-block"]),
        ("Draft a policy brief on housing costs", ["document-block"]),
        ("Write a summary document of the audit", ["document-block"]),
        ("Prepare the Q3 investor deck", ["presentation-block"]),
    ],
)
def test_a_request_naming_a_document_like_deliverable_makes_that_file(prompt, expected):
    assert files(plan_for(prompt)) == expected


@pytest.mark.parametrize(
    "prompt",
    [
        "What should the quarterly business review cover?",
        "How do I build a dashboard for my team?",
        "Help me prepare for my performance review",
        "Summarize the report I sent about tide pools.",
        "Write an email about the report to the team",
        "Give me a list of apps for tracking habits",
        "Write a brief summary of the news",
        "Tell me whether we need a new app",
        "Make sure the deck is ready by Friday",
    ],
)
def test_a_question_or_a_deliverable_only_mentioned_gets_just_the_answer(prompt):
    # When
    plan = plan_for(prompt)
    # Then the Writer's answer is what the run ends in, and no file is made
    assert files(plan) == [] and plan.nodes[-1].type == "text-block"


def test_many_deliverables_and_much_material_stay_within_the_block_limit_and_keep_every_file():
    # Given a request for every kind of file, with many uploads, links and parts
    links = " ".join(f"https://example.org/{i}" for i in range(5))
    parts = "\n".join(f"- Research the market for product {i} in a table" for i in range(8))
    prompt = (
        "Make a report, slides, a spreadsheet, a memo, a web app, a prototype and a landing page "
        f"from the uploads. {links}\n{parts}"
    )
    uploads = tuple(
        Upload(file_id=str(uuid.uuid4()), name=f"f{i}.txt", extension="txt", content_type="x", size_bytes=1,
               s3_key=f"k/f{i}.txt")
        for i in range(20)
    )  # fmt: skip
    # When
    plan = plan_for(prompt, uploads)
    # Then
    assert len(plan.nodes) <= MAX_BLOCKS
    assert sorted(files(plan)) == sorted(FILE_TYPES)
