"""Each deliverable template end to end on the embedded stack: POST /v1/run with the template, poll GET /v1/run
until it finishes, download every artifact over plain HTTP from its presigned URL (no API key), and reopen it
with its library.

The first test gives Plan Canvas a fixed deliverable plan (uploads, a prompt-block, for a landing page an
image-block, then the template's deliverable block reading them) in place of the planner's, so it checks each
file's structure exactly: the handlers run in this process, so the state machine runs exactly these blocks.
The second lets the planner plan the template's canvas and checks the file it ends in. The offline provider
writes.
"""

from __future__ import annotations

import io
import uuid

import httpx
import pytest
from openpyxl import load_workbook

from canvas_core.models.catalog import TaskType
from canvas_core.models.items import EdgeItem, NodeItem, RunItem, TaskItem
from canvas_core.planner import Plan, parent_task_id, persona_task_id
from canvas_core.render.docx import check_docx
from canvas_core.render.html_check import check_html
from canvas_core.render.pptx import check_pptx
from canvas_core.render.xlsx import check_xlsx
from tests.e2e.conftest import poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

RANGES_CSV = (
    b"Place,Range (m),Surveyed,Visitors\nBay of Fundy,16.3,2021-06-01,1200\nBristol Channel,15.0,2020-05-12,800\n"
)
TEMPLATES = {
    "report": ("document-block", "Write a report on why tides differ between coasts", True),
    "slides": ("presentation-block", "Make slides on why tides differ between coasts", True),
    "memo": ("memo-block", "Write a memo to the harbour team about spring tides", False),
    "excel": ("excel-block", "Build a spreadsheet of tidal ranges", True),
    "app": ("app-block", "Build an app to track tide observations", False),
    "landing_page": ("landing-page-block", "Landing page for a tide alert service", False),
}
PERSONAS = {"file-block": "Librarian", "prompt-block": "Analyst", "image-block": "Designer"}


def deliverable_plan(block_type: str):
    """A plan_canvas stand-in: uploads -> prompt-block (-> image-block) -> the deliverable block."""

    def plan(run: RunItem, provider=None) -> Plan:
        canvas_id = run.canvas_id
        nodes: list[NodeItem] = []
        edges: list[EdgeItem] = []

        def add(kind: str, name: str, inputs: list[NodeItem], **extra) -> NodeItem:
            node = NodeItem(
                canvas_id=canvas_id,
                block_id=str(uuid.uuid5(uuid.UUID(canvas_id), f"node:{len(nodes)}")),
                name=name,
                type=kind,
                inputs=[i.block_id for i in inputs],
                persona=PERSONAS.get(kind, "Writer"),
                position=len(nodes),
                instructions=extra.pop("instructions", run.prompt),
                **extra,
            )
            nodes.append(node)
            edges.extend(EdgeItem(source_id=i.block_id, target_id=node.block_id) for i in inputs)
            return node

        uploads = [add("file-block", u.name, [], upload_id=u.file_id) for u in run.uploads]
        research = add("prompt-block", "Research the request", uploads)
        feeding = [research, *uploads]
        if block_type == "landing-page-block":
            feeding.append(add("image-block", "Hero image", [research], instructions="A hero image: " + run.prompt))
        add(block_type, "Deliverable", feeding)
        parent = TaskItem(
            canvas_id=canvas_id, task_id=parent_task_id(canvas_id), name="Plan", task_type=TaskType.PARENT
        )
        personas = [
            TaskItem(
                canvas_id=canvas_id,
                task_id=persona_task_id(canvas_id, n.block_id),
                parent_id=parent.task_id,
                name=f"{n.persona}: {n.name}",
                task_type=TaskType.PERSONA,
                block_id=n.block_id,
                position=n.position + 1,
            )
            for n in nodes
        ]
        return Plan(nodes=nodes, edges=edges, tasks=[parent, *personas])

    return plan


def download(url: str) -> httpx.Response:
    # A plain GET, as a browser or curl would: no API key, nothing but the presigned URL.
    response = httpx.get(url, timeout=30)
    assert response.status_code == 200, response.text
    return response


@pytest.mark.parametrize("template", TEMPLATES)
def test_each_template_delivers_a_file_that_downloads_whole_and_reopens(http, monkeypatch, template):
    # Given the deliverable plan of the template (and a CSV of figures where the template uses data)
    block_type, prompt, with_data = TEMPLATES[template]
    monkeypatch.setattr("canvas_core.orchestration.plan_canvas", deliverable_plan(block_type))
    files = [("files", ("ranges.csv", RANGES_CSV, "text/csv"))] if with_data else None
    # When
    created = http.post("/v1/run", data={"prompt": prompt, "template": template}, files=files)
    assert created.status_code == 200, created.text
    run = poll_until_finished(http, created.json()["data"]["run_id"])
    # Then the run completed and each artifact downloads over plain HTTP with exactly its size
    assert run["status"] == "completed", run.get("errors")
    artifacts = run["result"]["artifacts"]
    downloads = {a["type"]: download(a["download_url"]) for a in artifacts}
    for artifact in artifacts:
        body = downloads[artifact["type"]]
        assert len(body.content) == artifact["size_bytes"]
        assert f'filename="{artifact["name"]}"' in body.headers["content-disposition"]
    # And the deliverable reopens with its library and has its structure
    CHECKS[template](downloads, with_data)


def check_report(downloads: dict, with_data: bool) -> None:
    report = check_docx(downloads["docx"].content)
    assert report.title == "Why tides differ between coasts"
    assert [h for _, h in report.headings] == ["Summary", "Data", "References"]
    assert report.tables[0][:2] == [
        ["Place", "Range (m)", "Surveyed", "Visitors"],
        ["Bay of Fundy", "16.3", "2021-06-01", "1200"],
    ]
    assert any(p.startswith("[1]\tranges.csv") for p in report.paragraphs)


def check_slides(downloads: dict, with_data: bool) -> None:
    slides = check_pptx(downloads["pptx"].content)
    assert slides[0].title == "Why tides differ between coasts"
    assert all(s.title for s in slides)
    assert any(s.has_chart for s in slides) and any(s.has_table for s in slides)
    assert all("ranges.csv" in s.notes for s in slides[1:])


def check_memo(downloads: dict, with_data: bool) -> None:
    memo = check_docx(downloads["docx"].content)
    assert memo.paragraphs[0] == "MEMORANDUM"
    assert [p.split("\t")[0] for p in memo.paragraphs[1:5]] == ["TO:", "FROM:", "DATE:", "SUBJECT:"]
    assert memo.paragraphs[1] == "TO:\tThe harbour team"
    assert memo.paragraphs[4] == "SUBJECT:\tSpring tides"
    assert [h for _, h in memo.headings] == ["Summary"]


def check_excel(downloads: dict, with_data: bool) -> None:
    check_xlsx(downloads["xlsx"].content)
    book = load_workbook(io.BytesIO(downloads["xlsx"].content))
    assert book.sheetnames[-1] == "Sources"
    sheet = book.worksheets[0]
    assert [c.value for c in sheet[1]] == ["Place", "Range (m)", "Surveyed", "Visitors"]
    assert [c.data_type for c in sheet[2]] == ["s", "n", "d", "n"]
    assert sheet["D4"].value == "=SUM(D2:D3)" and sheet["A1"].font.bold


def check_app(downloads: dict, with_data: bool) -> None:
    page = check_html(downloads["html"].content, require_script=True)
    assert page.title == "Track tide observations"
    assert page.controls() and page.wired_controls() == page.controls()


def check_landing_page(downloads: dict, with_data: bool) -> None:
    page = check_html(downloads["html"].content, require_script=True)
    text = downloads["html"].text
    assert {"header", "nav", "main", "section", "footer", "h1", "form"} <= set(page.tags)
    assert '<meta name="viewport"' in text and "@media (max-width" in text
    assert 'class="cta-button" href="#signup"' in text and "signup" in page.ids
    assert "data:image/png;base64," in text  # the hero image the image-block drew
    assert downloads["png"].content.startswith(b"\x89PNG")


CHECKS = {
    "report": check_report,
    "slides": check_slides,
    "memo": check_memo,
    "excel": check_excel,
    "app": check_app,
    "landing_page": check_landing_page,
}


PLANNED = {
    "report": ("docx", lambda data: check_docx(data).headings),
    "slides": ("pptx", lambda data: [s.title for s in check_pptx(data)][1:]),
    "memo": ("docx", lambda data: check_docx(data).paragraphs[0] == "MEMORANDUM"),
    "excel": ("xlsx", lambda data: check_xlsx(data)[-1].name == "Sources"),
    "app": ("html", lambda data: check_html(data, require_script=True).wired_controls()),
    "landing_page": ("html", lambda data: "signup" in check_html(data, require_script=True).ids),
}


@pytest.mark.parametrize("template", PLANNED)
def test_the_planners_canvas_for_a_template_delivers_its_file(http, template):
    # Given the planner's own canvas for the template (no stand-in plan)
    kind, structured = PLANNED[template]
    prompt = TEMPLATES[template][1]
    files = [("files", ("ranges.csv", RANGES_CSV, "text/csv"))]
    # When
    created = http.post("/v1/run", data={"prompt": prompt, "template": template}, files=files)
    run = poll_until_finished(http, created.json()["data"]["run_id"])
    # Then the template's file is among the artifacts, downloads whole, reopens and has its structure
    assert run["status"] in ("completed", "partial"), run.get("errors")
    [artifact] = [a for a in run["result"]["artifacts"] if a["type"] == kind]
    body = download(artifact["download_url"]).content
    assert len(body) == artifact["size_bytes"]
    assert structured(body)
