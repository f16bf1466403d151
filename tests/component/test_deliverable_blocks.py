"""The deliverable blocks (document, memo, presentation, excel, app, prototype, landing page, generated image)
run by their Lambda handlers under moto, fed input nodes written to the canvas, then read back as a user gets
them: GET /v1/run's artifacts, and the stored files reopened with their libraries."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from types import SimpleNamespace
from urllib.parse import unquote, urlencode, urlsplit

import pytest
from openpyxl import load_workbook

from canvas_core.adapters.store import Store
from canvas_core.errors import BlockFatalError
from canvas_core.models.catalog import NodeStatus, TaskStatus, TaskType
from canvas_core.models.items import Artifact, EdgeItem, NodeItem, Source, TaskItem
from canvas_core.planner import parent_task_id, persona_task_id
from canvas_core.providers.base import Completion
from canvas_core.render.chart import check_png, render_card
from canvas_core.render.docx import check_docx
from canvas_core.render.html_check import check_html
from canvas_core.render.pptx import check_pptx
from canvas_core.render.xlsx import check_xlsx
from tests.support import body_of, load_event

pytestmark = pytest.mark.component

PERSONAS = {
    "document-block": "Writer",
    "memo-block": "Writer",
    "presentation-block": "Designer",
    "excel-block": "Analyst",
    "app-block": "Engineer",
    "prototype-block": "Engineer",
    "landing-page-block": "Designer",
    "image-block": "Designer",
}
WEB = Source(title="Tides explained", url="https://example.org/tides")
FILE = Source(title="ranges.csv", file_name="ranges.csv")
RESEARCH = (
    "Tides are driven mainly by the Moon's gravity [1]. Spring tides happen at new and full moon, when the Sun "
    "and Moon pull together [1]. The Bay of Fundy has the largest range in the world [1]."
)
RANGES = (
    "### Tidal ranges\n\nColumns: Place (text), Range (number)\n\n| Place | Range (m) | Surveyed | Visitors |\n"
    "|---|---:|---|---:|\n| Bay of Fundy | 16.3 | 2021-06-01 | 1,200 |\n| Bristol Channel | 15.0 | 2020-05-12 | 800 |\n"
    "| Ungava Bay | 17.0 | 2019-07-30 | 150 |"
)
GIF_1X1 = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")
HOSTILE = "<script>alert('pwned')</script></script><img src=x onerror=alert(1)>"


class ScriptedModel:
    """A provider that answers every call with the same text, as a real model would answer the block."""

    name = "scripted"

    def __init__(self, answer: str, image: bytes | None = None):
        self.answer, self.image, self.prompts = answer, image, []

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        self.prompts.append(prompt)
        return Completion(text=self.answer, model_id="scripted/model-1", input_tokens=100, output_tokens=200)


class DrawingModel(ScriptedModel):
    def generate_image(self, *, prompt: str, width: int, height: int) -> tuple[bytes, str]:
        self.prompts.append(prompt)
        return self.image, "scripted/image-1"


@pytest.fixture
def canvas(aws, account, function, context, monkeypatch):
    """`canvas.run(block_type, inputs, model=None)`: a run whose canvas holds the given completed input nodes
    and one block of `block_type` reading them; runs that block's handler and finalizes the run."""

    def place(block_type: str, inputs: list[NodeItem], prompt: str) -> SimpleNamespace:
        created = body_of(
            function("api/create_run")(
                load_event("create_run", api_key=account.api_key, body=urlencode({"prompt": prompt})), context
            )
        )["data"]
        canvas_id = created["canvas_id"]
        nodes = []
        for n, node in enumerate(inputs):
            nodes.append(node.model_copy(update={"canvas_id": canvas_id, "block_id": str(uuid.uuid4()), "position": n}))
        target = NodeItem(
            canvas_id=canvas_id,
            block_id=str(uuid.uuid4()),
            name=block_type.removesuffix("-block").replace("-", " ").title(),
            type=block_type,
            inputs=[n.block_id for n in nodes],
            instructions=prompt,
            persona=PERSONAS[block_type],
            position=len(nodes),
        )
        tasks = [
            TaskItem(canvas_id=canvas_id, task_id=parent_task_id(canvas_id), name="Plan", task_type=TaskType.PARENT)
        ]
        for node in [*nodes, target]:
            done = node.status == NodeStatus.COMPLETED
            tasks.append(
                TaskItem(
                    canvas_id=canvas_id,
                    task_id=persona_task_id(canvas_id, node.block_id),
                    parent_id=parent_task_id(canvas_id),
                    name=node.name,
                    task_type=TaskType.PERSONA,
                    status=TaskStatus.COMPLETED if done else TaskStatus.RUNNING,
                    block_id=node.block_id,
                )
            )
        edges = [EdgeItem(source_id=n.block_id, target_id=target.block_id) for n in nodes]
        Store().put_graph([*nodes, target], edges, canvas_id)
        Store().put_tasks(tasks)
        ids = {"run_id": created["run_id"], "canvas_id": canvas_id, "account_id": account.account_id}
        return SimpleNamespace(ids=ids, target=target)

    def run(block_type: str, inputs: list[NodeItem], prompt: str = "Explain tides", model=None) -> SimpleNamespace:
        if model is not None:
            monkeypatch.setattr("canvas_core.blocks.runner.get_provider", lambda: model)
        return execute(place(block_type, inputs, prompt))

    def execute(placed: SimpleNamespace) -> SimpleNamespace:
        block_type = placed.target.type
        event = {**placed.ids, "block_id": placed.target.block_id, "block_type": block_type}
        folder = "blocks/" + block_type.removesuffix("-block").replace("-", "_") + "_block"
        function(folder)(event, context)
        return finish(placed)

    def finish(placed: SimpleNamespace) -> SimpleNamespace:
        function("orchestration/finalize_run")(placed.ids, context)
        event = load_event("get_run", api_key=account.api_key, path_parameters={"run_id": placed.ids["run_id"]})
        data = body_of(function("api/get_run")(event, context))["data"]
        [node] = Store().get_nodes(placed.ids["canvas_id"], [placed.target.block_id])
        files = [_download(aws, a["download_url"]) for a in data.get("result", {}).get("artifacts", [])]
        return SimpleNamespace(data=data, node=node, files=files, ids=placed.ids, placed=placed)

    return SimpleNamespace(run=run, place=place, execute=execute, finish=finish, aws=aws, account=account)


def _download(aws, url: str) -> bytes:
    """The object a presigned URL names (moto answers boto3, not plain HTTP; the e2e tier fetches the URL)."""
    parts = urlsplit(url)
    bucket, key = (parts.netloc.split(".")[0], unquote(parts.path.lstrip("/")))
    if bucket == "s3":  # path-style URL: /bucket/key
        bucket, key = key.split("/", 1)
    return aws.s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def node(block_type: str, name: str, content: str, sources=(), artifacts=()) -> NodeItem:
    return NodeItem(
        canvas_id=str(uuid.uuid4()),
        block_id=str(uuid.uuid4()),
        name=name,
        type=block_type,
        status=NodeStatus.COMPLETED,
        content=content,
        sources=list(sources),
        artifacts=list(artifacts),
    )


def research(content: str = RESEARCH) -> NodeItem:
    return node("prompt-block", "Research tides", content, [WEB])


def ranges() -> NodeItem:
    return node("table-block", "Tidal ranges", RANGES, [FILE])


def only_artifact(result: SimpleNamespace, kind: str) -> tuple[dict, bytes]:
    """The one file the block made, as GET /v1/run lists it, and its bytes."""
    assert result.data["status"] == "completed", result.data
    [stored] = result.node.artifacts
    [(view, data)] = [
        (v, d) for v, d in zip(result.data["result"]["artifacts"], result.files, strict=True) if v["id"] == stored.id
    ]
    assert view["type"] == kind and view["name"].endswith(f".{kind}")
    assert view["size_bytes"] == len(data) and set(view) == {"id", "type", "name", "download_url", "size_bytes"}
    assert stored.s3_key == f"artifacts/{result.ids['account_id']}/{result.ids['run_id']}/{stored.id}/{stored.name}"
    return view, data


# ---- document-block -------------------------------------------------------------------------------------------

MODEL_REPORT = """# Tides: causes and extremes

## Executive summary

The Moon drives the tides [1].

## Findings

- Spring tides come at new and full moon [1]
- Ranges differ by coast [2]

## Conclusion

Plan around the tide tables.

Sources:
[1] Tides explained
"""


def test_a_report_is_the_models_structure_with_the_input_table_and_references(canvas):
    # Given a model that writes a structured report, over research and a table-block
    model = ScriptedModel(MODEL_REPORT)
    # When
    result = canvas.run("document-block", [research(), ranges()], model=model)
    # Then the run has one .docx that reopens with the report's structure
    view, data = only_artifact(result, "docx")
    assert view["name"] == "tides-causes-and-extremes.docx"
    report = check_docx(data)
    assert report.title == "Tides: causes and extremes"
    # the input table under Data, before the closing section
    assert [h for _, h in report.headings] == ["Executive summary", "Findings", "Data", "Conclusion", "References"]
    assert report.tables[0][0] == ["Place", "Range (m)", "Surveyed", "Visitors"]
    assert "[1]\tTides explained. https://example.org/tides" in report.paragraphs
    assert "[2]\tranges.csv" in report.paragraphs
    # And the model was asked for a report over the numbered material, by the Writer
    assert "Write this as a report in Markdown" in model.prompts[0] and "Bay of Fundy" in model.prompts[0]
    assert result.data["metadata"]["models_used"] == ["scripted/model-1"]
    assert "## Findings" in result.node.content


def test_an_offline_report_is_titled_from_the_request_and_holds_only_the_material(canvas):
    result = canvas.run("document-block", [research()], prompt="Write a report on tides")
    _, data = only_artifact(result, "docx")
    report = check_docx(data)
    # the subject of the request, not the request cut short; the offline notice stays in the final output
    assert report.title == "Tides"
    assert [h for _, h in report.headings] == ["Summary", "References"]
    assert not any(p.startswith(("Offline answer", "Task:", "Key points")) for p in report.paragraphs)
    assert any("Bay of Fundy has the largest range" in p for p in report.paragraphs)


# ---- memo-block -----------------------------------------------------------------------------------------------


def test_a_memo_takes_its_header_from_the_draft(canvas):
    model = ScriptedModel(
        "To: Harbour board\nFrom: Operations\nSubject: Spring tide schedule\n\n## Summary\nMove berthing times [1].\n\n"
        "## Next steps\n" + "\n".join(f"- Step {n}" for n in range(12))
    )
    result = canvas.run("memo-block", [research()], model=model)
    _, data = only_artifact(result, "docx")
    memo = check_docx(data)
    created = dt.datetime.now(dt.UTC).date()
    assert memo.paragraphs[:5] == [
        "MEMORANDUM",
        "TO:\tHarbour board",
        "FROM:\tOperations",
        f"DATE:\t{created:%B} {created.day}, {created.year}",
        "SUBJECT:\tSpring tide schedule",
    ]
    assert [h for _, h in memo.headings] == ["Summary", "Next steps", "Sources"]
    assert sum(1 for p in memo.paragraphs if p.startswith("Step ")) == 8  # a memo's lists stay short


def test_an_offline_memo_has_the_default_header(canvas):
    result = canvas.run("memo-block", [research()], prompt="Memo on spring tides")
    memo = check_docx(only_artifact(result, "docx")[1])
    assert memo.paragraphs[1:3] == ["TO:\tAll stakeholders", "FROM:\tResearch team"]
    assert memo.paragraphs[4] == "SUBJECT:\tSpring tides"


@pytest.mark.parametrize(
    ("prompt", "to", "sender", "subject"),
    [
        ("Memo on tides for the harbour team", "The harbour team", "Research team", "Tides for the harbour team"),
        ("Write a memo to the board from the CFO about the Q3 results", "The board", "The CFO", "Q3 results"),
    ],
)
def test_an_offline_memo_is_addressed_as_the_request_says(canvas, prompt, to, sender, subject):
    result = canvas.run("memo-block", [research()], prompt=prompt)
    artifact, data = only_artifact(result, "docx")
    memo = check_docx(data)
    assert memo.paragraphs[1:3] == [f"TO:\t{to}", f"FROM:\t{sender}"]
    assert memo.paragraphs[4] == f"SUBJECT:\t{subject}"
    assert artifact["name"].startswith("memo-")


@pytest.mark.parametrize(
    ("block_type", "prompt", "parts"),
    [
        (
            "excel-block",
            "Build a spreadsheet budget for a 3-day team offsite: travel, lodging, meals, activities.",
            ["Travel", "Lodging", "Meals", "Activities"],
        ),
        (
            "excel-block",
            "Plan a wedding budget: venue, catering, music, flowers",
            ["Venue", "Catering", "Music", "Flowers"],
        ),
        (
            "document-block",
            "Write a report on the warehouse audit:\n- stock levels\n- safety incidents\n- staffing gaps",
            ["Stock levels", "Safety incidents", "Staffing gaps"],
        ),
        (
            "presentation-block",
            "Make a slide deck on renewable energy including solar, wind, hydro as well as geothermal",
            ["Solar", "Wind", "Hydro", "Geothermal"],
        ),
        (
            "memo-block",
            "Draft a memo for the staff on the new policy: remote days, core hours, equipment",
            ["Remote days", "Core hours", "Equipment"],
        ),
    ],
)
def test_offline_each_listed_item_is_a_row_section_or_slide(canvas, block_type, prompt, parts):
    # Given a request listing its items however it writes them, and no model
    result = canvas.run(block_type, [research()], prompt=prompt)
    # Then each item is a part of the file, in order
    kind = {"excel-block": "xlsx", "document-block": "docx", "presentation-block": "pptx", "memo-block": "docx"}
    _, data = only_artifact(result, kind[block_type])
    if block_type == "excel-block":
        book = load_workbook(io.BytesIO(data))
        texts = [str(c.value) for sheet in book.worksheets for row in sheet.iter_rows() for c in row if c.value]
        found = [p for p in parts if any(t == p or t.startswith(p) for t in texts)]
    elif block_type == "presentation-block":
        found = [p for p in parts if any(v.title.startswith(p) for v in check_pptx(data))]
    else:
        found = [p for p in parts if p in [h for _, h in check_docx(data).headings]]
    assert found == parts
    assert "No material was provided beyond the prompt itself." not in result.node.content


# ---- presentation-block ---------------------------------------------------------------------------------------


def test_a_deck_has_a_title_slide_titled_slides_a_chart_and_sources_in_notes(canvas):
    slides_md = "# Tides\n\n" + "\n\n".join(
        f"## Slide {n}\n" + "\n".join(f"- Point {n}.{k} about the tides and what they mean [1]" for k in range(5))
        for n in range(1, 11)
    )
    result = canvas.run("presentation-block", [research(), ranges()], model=ScriptedModel(slides_md))
    _, data = only_artifact(result, "pptx")
    slides = check_pptx(data)
    assert slides[0].title == "Tides"
    assert [s.title for s in slides[1:11]] == [f"Slide {n}" for n in range(1, 11)]
    assert any(s.has_chart and s.title == "Tidal ranges" for s in slides)
    assert any(s.has_table and s.title == "Tidal ranges" for s in slides)
    assert slides[1].notes == "Sources:\n[1] Tides explained. https://example.org/tides"


# ---- excel-block ----------------------------------------------------------------------------------------------


def test_a_workbook_has_typed_cells_totals_and_a_sources_sheet(canvas):
    result = canvas.run("excel-block", [research(), ranges()], prompt="Spreadsheet of tidal ranges")
    _, data = only_artifact(result, "xlsx")
    check_xlsx(data)
    book = load_workbook(io.BytesIO(data))
    assert book.sheetnames == ["Tidal ranges", "Sources"]
    sheet = book["Tidal ranges"]
    assert [c.value for c in sheet[1]] == ["Place", "Range (m)", "Surveyed", "Visitors"]
    assert [c.value for c in sheet[2]] == ["Bay of Fundy", 16.3, dt.datetime(2021, 6, 1), 1200]
    assert sheet["A1"].font.bold and sheet.freeze_panes == "A2"
    assert [c.value for c in sheet[5]] == ["Total", None, None, "=SUM(D2:D4)"]  # ranges are not summed
    sources = book["Sources"]
    assert [c.value for c in sources[2]] == [1, "Tides explained", None, "https://example.org/tides"]
    assert "Tidal ranges: 3 rows, 4 columns; totals of Visitors" in result.node.content


def test_a_workbook_without_tables_holds_the_key_points(canvas):
    result = canvas.run("excel-block", [research()])
    book = load_workbook(io.BytesIO(only_artifact(result, "xlsx")[1]))
    assert book.sheetnames == ["Key points", "Sources"]
    assert [c.value for c in book["Key points"][1]] == ["#", "Section", "Point"]
    assert book["Key points"]["A2"].value == 1


# ---- app-block and prototype-block ----------------------------------------------------------------------------

MODEL_APP = """```html
<!DOCTYPE html>
<html><head><title>Tide calculator</title><script src="https://cdn.example.com/x.js"></script></head>
<body><input id="hours" type="number"><button id="calc">Calculate</button><output id="out"></output>
<script>
document.getElementById("calc").addEventListener("click", function () {
  document.getElementById("out").textContent = String(Number(document.getElementById("hours").value) * 2);
});
</script></body></html>
```"""


def test_the_models_app_is_kept_self_contained(canvas):
    result = canvas.run("app-block", [research()], prompt="Build a tide calculator", model=ScriptedModel(MODEL_APP))
    view, data = only_artifact(result, "html")
    page = check_html(data, require_script=True)
    assert view["name"] == "tide-calculator.html"
    assert page.external == [] and "cdn.example.com" not in data.decode()
    assert page.wired_controls() == ["hours", "calc"]
    assert "as the model wrote it" in result.node.content


def test_an_app_that_fails_its_checks_is_replaced_by_the_built_in_app(canvas):
    broken = "<!DOCTYPE html><html><head><title>x</title></head><body><button id=b>Go</button></body></html>"
    result = canvas.run("app-block", [research()], model=ScriptedModel(broken))
    page = check_html(only_artifact(result, "html")[1], require_script=True)
    assert "copy-summary" in page.wired_controls()
    assert "Built-in app (the model's page failed its check: " in result.node.content


def test_the_offline_app_is_wired_and_keeps_hostile_material_inert(canvas):
    # Given research whose text carries script from a hostile page
    hostile = research(f"Tides rise twice a day. {HOSTILE} The Moon pulls the sea.")
    # When
    result = canvas.run("app-block", [hostile, ranges()], prompt=f"Build a tide tracker {HOSTILE}")
    # Then
    data = only_artifact(result, "html")[1]
    page = check_html(data, require_script=True)
    assert page.wired_controls() == [
        "rows-filter-0", "chart-measure-0", "filter", "section-filter", "clear-done", "copy-summary", "export-csv"
    ]  # fmt: skip
    assert len(page.scripts) == 1 and "pwned" not in page.scripts[0]
    assert page.handler_attributes == [] and "img" not in page.tags
    assert "<script>alert" not in data.decode()
    [island] = page.data_islands
    assert "pwned" in json.loads(island)["title"] and json.loads(island)["tables"][0]["caption"] == "Tidal ranges"


def test_the_offline_prototype_has_screens_and_navigation(canvas):
    result = canvas.run("prototype-block", [research(), ranges()], prompt="Prototype a tide alert app")
    page = check_html(only_artifact(result, "html")[1], require_script=True)
    assert {"prev", "next", "go-0"} <= set(page.wired_controls())
    assert any(i.startswith("screen-") for i in page.ids)


# ---- image-block and landing-page-block -----------------------------------------------------------------------


def test_offline_an_image_block_charts_the_table_in_its_inputs(canvas):
    result = canvas.run("image-block", [ranges()], prompt="Chart the tidal ranges")
    _, data = only_artifact(result, "png")
    assert check_png(data) == (1600, 900)
    assert result.node.content.startswith("Bar chart of Tidal ranges: Range (m), Visitors by Place")


def test_offline_an_image_block_without_data_draws_a_title_card(canvas):
    result = canvas.run("image-block", [research()], prompt="An image of a lighthouse at high tide")
    _, data = only_artifact(result, "png")
    assert check_png(data) == (1600, 900)
    assert result.node.content.startswith("Title card for: Lighthouse at high tide")


def test_an_image_model_draws_the_image(canvas):
    model = DrawingModel("unused", image=render_card("A lighthouse"))
    result = canvas.run("image-block", [], prompt="A lighthouse at high tide", model=model)
    _, data = only_artifact(result, "png")
    assert data == model.image
    assert model.prompts[0].startswith("A lighthouse at high tide")
    assert result.data["metadata"]["models_used"] == ["scripted/image-1"]


@pytest.mark.parametrize(
    ("image", "reason"),
    [(b"<html>not an image</html>", "not an image"), (GIF_1X1, "a GIF image, not PNG, JPEG or WebP")],
)
def test_an_image_model_answer_that_is_not_an_image_fails_the_block_unstored(canvas, image, reason):
    model = DrawingModel("unused", image=image)
    with pytest.raises(BlockFatalError, match=reason):
        canvas.run("image-block", [], prompt="A lighthouse", model=model)
    assert "Contents" not in canvas.aws.s3.list_objects_v2(
        Bucket=canvas.aws.settings.artifacts_bucket, Prefix="artifacts/"
    )


MODEL_COPY = """# Never miss a spring tide

Alerts for every harbour, an hour before the water turns [1]. Free for a month.

## Features
- **Live tide tables**: updated from official stations [1]
- **Push alerts**: on your phone before high water
- Works offline — tables are cached on your device

## How it works
Pick your harbour and set a threshold.

## Call to action
Start free trial
No card needed.
"""


def test_a_landing_page_lays_out_the_models_copy(canvas):
    result = canvas.run("landing-page-block", [research()], model=ScriptedModel(MODEL_COPY))
    text = only_artifact(result, "html")[1].decode()
    page = check_html(text, require_script=True)
    assert page.title == "Never miss a spring tide"
    assert '<h1 id="hero-title">Never miss a spring tide</h1>' in text
    assert "<p>Alerts for every harbour, an hour before the water turns [1].</p>" in text
    assert 'class="cta-button" href="#signup">Start free trial</a>' in text and "<p>No card needed.</p>" in text
    assert "<h3>Live tide tables</h3>" in text and "<h3>Works offline</h3>" in text
    assert '<h2 id="section-1-title">About</h2><p>Free for a month.</p>' in text
    assert '<h2 id="section-2-title">How it works</h2>' in text
    assert '<a href="https://example.org/tides" rel="noopener noreferrer">Tides explained</a>' in text
    assert result.node.content.startswith("# Never miss a spring tide")


def test_a_landing_page_embeds_the_image_its_input_made(canvas):
    # Given an image-block input that drew a PNG
    placed = canvas.place(
        "landing-page-block",
        [research(), node("image-block", "Hero image", "Title card")],
        "Landing page for a tide alert service",
    )
    png = render_card("Tide alerts")
    key = f"artifacts/{canvas.account.account_id}/{placed.ids['run_id']}/img/hero.png"
    canvas.aws.s3.put_object(Bucket=canvas.aws.settings.artifacts_bucket, Key=key, Body=png)
    image = Artifact(id="img", type="png", name="hero.png", s3_key=key, size_bytes=len(png))
    Store().update_node(placed.ids["canvas_id"], placed.target.inputs[1], artifacts=[image])
    # When
    result = canvas.execute(placed)
    # Then a responsive page with semantic sections, a call to action that leads somewhere, and the image
    view, data = only_artifact(result, "html")
    text = data.decode()
    page = check_html(text, require_script=True)
    assert {"header", "nav", "main", "footer", "h1", "form"} <= set(page.tags)
    assert 'class="cta-button" href="#signup">Get started</a>' in text and "signup" in page.ids
    assert "data:image/png;base64," in text and "@media (max-width" in text
    assert page.wired_controls() == ["signup-form", "signup-email", "signup-submit"]
    assert view["name"] == "tide-alert-service.html"


# ---- a file that does not reopen ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block_type", "renderer", "label"),
    [
        ("document-block", "canvas_core.render.docx.render_report", "report"),
        ("memo-block", "canvas_core.render.docx.render_memo", "memo"),
        ("presentation-block", "canvas_core.render.pptx.render_deck", "slide deck"),
        ("excel-block", "canvas_core.render.xlsx.render_workbook", "workbook"),
        ("app-block", "canvas_core.render.html.render_app", "app"),
        ("prototype-block", "canvas_core.render.html.render_prototype", "prototype"),
        ("landing-page-block", "canvas_core.render.html.render_landing_page", "landing page"),
        ("image-block", "canvas_core.render.chart.render_card", "image"),
    ],
)
def test_a_file_that_does_not_reopen_fails_the_block_and_is_never_stored(
    canvas, function, context, monkeypatch, block_type, renderer, label
):
    # Given a renderer that produces a damaged file
    damaged = "<p>damaged" if ".html." in renderer else b"PK\x03\x04damaged"
    monkeypatch.setattr(renderer, lambda *args, **kwargs: damaged)
    placed = canvas.place(block_type, [research()], "Explain tides")
    # When
    with pytest.raises(BlockFatalError, match=f"The {label} could not be produced: .*Nothing was stored"):
        canvas.execute(placed)
    # Then nothing was stored, and the run reports the block's failure (not a download)
    bucket = canvas.aws.settings.artifacts_bucket
    assert "Contents" not in canvas.aws.s3.list_objects_v2(Bucket=bucket, Prefix="artifacts/")
    result = canvas.finish(placed)
    assert result.node.status == NodeStatus.ERROR and result.node.artifacts == []
    [error] = [e for e in result.data["errors"] if e.get("block_type") == block_type]
    assert f"The {label} could not be produced" in error["error"]


# ---- the skeleton the request asks for, written by a model ----------------------------------------------------


def test_a_model_is_given_the_outline_and_a_part_it_leaves_out_is_added(canvas):
    # Given a request on three named criteria, and a model that writes two of them
    prompt = "Write a report comparing heat pumps and gas boilers on running costs, installation and emissions"
    model = ScriptedModel(
        "# Heating compared\n\n## Running costs\nHeat pumps cost less [1].\n\n## Installation\nSlower."
    )
    # When
    result = canvas.run("document-block", [research()], prompt=prompt, model=model)
    # Then the model was told the parts, and the report has each, the missing one saying so
    assert "- Running costs\n- Installation\n- Emissions" in model.prompts[0]
    assert "Compare Heat pumps and Gas boilers in each section." in model.prompts[0]
    report = check_docx(only_artifact(result, "docx")[1])
    headings = [h for _, h in report.headings]
    assert headings == ["Summary", "Running costs", "Installation", "Emissions", "References"]
    assert report.paragraphs.count("The material does not cover this yet.") == 2  # Summary and Emissions


def test_a_deck_asked_for_a_number_of_slides_has_that_many_whatever_the_model_writes(canvas):
    slides_md = "# Solar\n\n" + "\n\n".join(f"## Slide {n}\n- Point {n} [1]" for n in range(1, 11))
    result = canvas.run(
        "presentation-block",
        [research(), ranges()],
        prompt="A deck of 4 slides on solar",
        model=ScriptedModel(slides_md),
    )
    slides = check_pptx(only_artifact(result, "pptx")[1])
    assert len(slides) == 4 and slides[0].title == "Solar"


# ---- model text reaching file formats -------------------------------------------------------------------------

MODEL_TITLE = ("Quarterly\x07 review of the regional\x0b offices and their \x1bbudgets, " * 6)[:300]


@pytest.mark.parametrize(
    ("block_type", "kind"),
    [
        ("document-block", "docx"),
        ("memo-block", "docx"),
        ("presentation-block", "pptx"),
        ("excel-block", "xlsx"),
        ("landing-page-block", "html"),
        ("app-block", "html"),
    ],
)
def test_a_300_character_model_title_with_control_characters_renders(canvas, block_type, kind):
    # Given a model that titles its answer with 300 characters holding control characters
    model = ScriptedModel(
        f"# {MODEL_TITLE}\n\nSubject: {MODEL_TITLE}\n\n## {MODEL_TITLE}\nTides follow the Moon [1].\n\n"
        "| Place | Range (m) |\n|---|---:|\n| Bay of Fundy | 16.3 |\n| Bristol Channel | 15.0 |\n"
    )
    # When
    result = canvas.run(block_type, [research()], model=model)
    # Then the block made its file, and its name is short and portable
    assert result.node.status.value == "completed", result.node.error
    view, data = only_artifact(result, kind)
    assert data and len(view["name"]) <= 70
    assert not any(c in view["name"] for c in "\x07\x0b\x1b")


# ---- the analysis of a gathered table ----------------------------------------------------------------------------

VISIT_ROWS = [("North", 1, 120, 4.5), ("South", 1, 300, 5.0), ("North", 2, 180, 4.5), ("South", 2, 90, 5.5),
              ("East", 1, 60, 3.0), ("East", 2, 75, 3.5)]  # fmt: skip
VISITS = (
    "### Harbour visits\n\nColumns: coast (text), month (text), visitors (integer), fee (number)\n\n"
    "| coast | month | visitors | fee |\n|---|---|---:|---:|\n"
    + "\n".join(f"| {coast} | 2024-0{month} | {visitors} | {fee} |" for coast, month, visitors, fee in VISIT_ROWS)
)


def visits() -> NodeItem:
    return node("table-block", "Harbour visits", VISITS, [FILE])


def test_a_models_analysis_plan_is_run_over_a_gathered_table(canvas):
    # Given a model that chooses visitors by coast, and what the rows add up to
    plan = '{"measures": [{"column": "visitors", "aggregate": "sum"}], "dimensions": ["coast"], "period": "month"}'
    model = ScriptedModel(plan)
    by_coast: dict[str, int] = {}
    for coast, _, visitors, _ in VISIT_ROWS:
        by_coast[coast] = by_coast.get(coast, 0) + visitors
    whole = sum(by_coast.values())
    ranked = sorted(by_coast.items(), key=lambda kv: -kv[1])
    # When the excel-block runs over a table-block's table
    result = canvas.run("excel-block", [visits()], prompt="A workbook of the coastal visits", model=model)
    # Then the model saw the columns and a few rows, and its plan's results are the workbook's sheets
    assert "Columns:\n- coast: text" in model.prompts[0] and "visitors: number" in model.prompts[0]
    book = load_workbook(io.BytesIO(only_artifact(result, "xlsx")[1]), data_only=True)
    rows = [list(r) for r in book["Visitors by coast"].iter_rows(values_only=True)]
    assert [r[:2] for r in rows[1:-1]] == [list(kv) for kv in ranked]
    assert [r[2] for r in rows[1:-1]] == [pytest.approx(v / whole, abs=1e-6) for _, v in ranked]
    assert rows[-1][:2] == ["Total", whole]
    summary = [r[0] for r in book["Summary"].iter_rows(values_only=True)]
    top, value = ranked[0]
    share = f"{value / whole * 100:.1f}".removesuffix(".0")
    assert any(line.startswith(f"{top} had the highest visitors by coast: {value}, {share} %") for line in summary)
    assert any(line.endswith("the analysis was chosen by model.") for line in summary)


def test_a_plan_naming_what_the_table_lacks_is_refused_and_the_rules_say_why(canvas):
    model = ScriptedModel('{"measures": [{"column": "revenue"}], "dimensions": ["coast"]}')
    result = canvas.run("excel-block", [visits()], prompt="A workbook of the coastal visits", model=model)
    book = load_workbook(io.BytesIO(only_artifact(result, "xlsx")[1]), data_only=True)
    summary = [r[0] for r in book["Summary"].iter_rows(values_only=True)]
    assert "The model's analysis plan was refused (measure 'revenue' is not a column); rules chose it." in summary
    assert "Visitors by coast" in book.sheetnames
