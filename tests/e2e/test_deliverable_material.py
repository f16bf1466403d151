"""Deliverables carry the material, over HTTP on the embedded stack with the offline provider, as a new user
tries them: each template's planned canvas with uploaded files (xlsx, csv, pdf, docx, png) delivers a file
that holds the uploaded numbers (chart series, table cells), the sections or slides the request asked for,
and none of the text blocks write for each other. Then the unsafe inputs: formula cells, averages, duplicate
names, IPv6 and malformed links, control characters, deep nesting, and `template_used` with `blocks`."""

from __future__ import annotations

import base64
import csv
import io
import json
import re

import httpx
import pytest
from openpyxl import load_workbook
from pptx import Presentation

from canvas_core.render.docx import check_docx
from canvas_core.render.html_check import check_html
from canvas_core.render.pptx import check_pptx
from tests.e2e.conftest import poll_until_finished
from tests.fakes import files

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SALES = files.xlsx({"Q1-Q2": [["Region", "Q1", "Q2"], ["North", 120, 140], ["South", 95, 110], ["West", 80, 99]]})
TICKETS = (
    b"ticket_id,category,opened,tickets,avg_resolution_hours\n1001,Billing,2024-01-02,12,4.5\n"
    b"1002,Login,2024-01-03,30,12\n1003,Shipping,2024-01-04,8,18\n1004,Billing,2024-01-05,15,5.5\n"
)
HEATING_PDF = files.pdf(
    [
        "A heat pump costs about 900 pounds a year to run. Running costs of a gas boiler are about 1100 pounds.",
        "Installation of a heat pump takes three days. Heat pump emissions are 70 percent lower than a boiler.",
    ]
)
PRICES_DOCX = files.docx(
    "Quotes received",
    ["Three installers sent quotes for the heat pump."],
    [["Installer", "Quote"], ["Acme Heat", "8400"], ["Warmly", "9100"], ["Green Home", "7900"]],
)
PHOTO = files.image("png", (64, 48), (30, 120, 200))
LOGO = files.image("png", (120, 40), (181, 101, 29))
# What blocks write for each other, and must never reach a deliverable.
INTERNAL = [
    "Offline answer",
    "no language model",
    "Key points from the material",
    "Columns:",
    "(integer)",
    "(number)",
    "Title card for",
    "drawn without an image model",
    "pixels, RGB",
    "Build a working single-file web app",
    "Turn the answer into",
    "Build the landing page (.html)",
    "Task:",
    "Question:",
    "Outline: one part per item",
    "Prepared by the research team",
    "is an image the requester provided",
]


def run(http: httpx.Client, prompt: str, template: str | None = None, uploads=(), **fields) -> dict:
    data = {"prompt": prompt, **({"template": template} if template else {}), **fields}
    parts = [("files", (name, body, "application/octet-stream")) for name, body in uploads] or None
    created = http.post("/v1/run", data=data, files=parts)
    assert created.status_code == 200, created.text
    return poll_until_finished(http, created.json()["data"]["run_id"], timeout=120)


def artifact(result: dict, kind: str) -> bytes:
    [found] = [a for a in result["result"]["artifacts"] if a["type"] == kind]
    response = httpx.get(found["download_url"], timeout=30)
    assert response.status_code == 200
    return response.content


def assert_nothing_internal(texts: list[str], prompt: str) -> None:
    joined = "\n".join(t for t in texts if t)
    for marker in INTERNAL:
        assert marker.lower() not in joined.lower(), f"{marker!r} reached the deliverable"
    # the prompt is the request, not a title or a subject (cut short or whole)
    assert prompt not in joined and prompt[:60] not in joined


def docx_texts(data: bytes) -> list[str]:
    summary = check_docx(data)
    cells = [c for t in summary.tables for r in t for c in r]
    return [summary.title, *(h for _, h in summary.headings), *summary.paragraphs, *cells]


def xlsx_cells(data: bytes) -> dict[str, list[list[object]]]:
    book = load_workbook(io.BytesIO(data))
    return {s.title: [[c.value for c in r] for r in s.iter_rows()] for s in book.worksheets}


def html_texts(data: bytes) -> list[str]:
    view = check_html(data, require_script=True)
    return [view.title, view.text, *view.data_islands]


# ---- each template, with the user's files ---------------------------------------------------------------------


def test_slides_chart_and_tabulate_the_uploaded_workbook(http):
    # Given a workbook of sales, uploaded with a request for slides
    prompt = "Make slides on our quarterly sales"
    # When
    result = run(http, prompt, "slides", [("sales.xlsx", SALES)])
    # Then the deck has a native chart whose series are the uploaded numbers, and a table slide of them
    assert result["status"] == "completed", result["errors"]
    data = artifact(result, "pptx")
    slides = check_pptx(data)
    assert slides[0].title == "Our quarterly sales"
    deck = Presentation(io.BytesIO(data))
    [chart] = [s.chart for slide in deck.slides for s in slide.shapes if s.has_chart]
    plot = chart.plots[0]
    assert list(plot.categories) == ["North", "South", "West"]
    assert {s.name: list(s.values) for s in plot.series} == {"Q1": [120, 95, 80], "Q2": [140, 110, 99]}
    [table] = [s.table for slide in deck.slides for s in slide.shapes if s.has_table]
    assert [[c.text for c in row.cells] for row in table.rows][:2] == [["Region", "Q1", "Q2"], ["North", "120", "140"]]
    assert {s.title for s in slides if s.has_chart or s.has_table} == {"Sales (Q1-Q2)"}
    assert_nothing_internal([s.title for s in slides] + [t for s in slides for t in s.texts], prompt)


def test_a_deck_asked_for_five_slides_has_five(http):
    prompt = "Make a deck of five slides introducing our new onboarding process"
    result = run(http, prompt, "slides")
    slides = check_pptx(artifact(result, "pptx"))
    assert len(slides) == 5
    assert slides[0].title == "Introducing our new onboarding process"
    assert slides[1].title == "Overview" and slides[-1].title == "Next steps"
    assert all(s.texts for s in slides[1:])  # each says what it holds, or plainly that there is nothing yet
    assert_nothing_internal([s.title for s in slides] + [t for s in slides for t in s.texts], prompt)


def test_a_report_has_a_section_per_criterion_with_the_uploaded_numbers_tables_and_photo(http):
    # Given a comparison on three named criteria, with a PDF of facts, a Word file of quotes and a photo
    prompt = "Write a report comparing heat pumps and gas boilers on running costs, installation and emissions"
    uploads = [("heating.pdf", HEATING_PDF), ("quotes.docx", PRICES_DOCX), ("boiler.png", PHOTO)]
    # When
    result = run(http, prompt, "report", uploads)
    # Then a section per criterion, each with what the material says of it, with its page cited
    assert result["status"] == "completed", result["errors"]
    data = artifact(result, "docx")
    report = check_docx(data)
    assert report.title == "Heat pumps versus gas boilers: running costs, installation and emissions"
    headings = [h for _, h in report.headings]
    assert headings[:4] == ["Summary", "Running costs", "Installation", "Emissions"]
    text = "\n".join(report.paragraphs)
    assert re.search(r"heat pump costs about 900 pounds a year to run \[\d\]", text)
    assert "Installation of a heat pump takes three days" in text
    # And the uploaded Word table as a captioned table with its numbers, and the photo as a figure
    assert ["Installer", "Quote"] in [t[0] for t in report.tables]
    assert ["Acme Heat", "8400"] in [r for t in report.tables for r in t]
    assert any(p.startswith("Table 1. Quotes") for p in report.paragraphs)
    assert "Figures" in headings and any(p.startswith("Figure 1. boiler.png") for p in report.paragraphs)
    assert b"word/media/" in data
    assert_nothing_internal(docx_texts(data), prompt)
    # And the final output cites every source it lists: both pages, the quotes and the photo
    answer = result["result"]["final_output"]
    listed = re.findall(r"^\[(\d+)\] ", answer, re.MULTILINE)
    body = answer.split("\nSources\n")[0]
    assert len(listed) == 4 and all(f"[{n}]" in body for n in listed)


def test_a_report_without_material_is_a_scaffold_of_its_criteria(http):
    prompt = "Write a report comparing heat pumps and gas boilers on running costs, installation and emissions"
    data = artifact(run(http, prompt, "report"), "docx")
    report = check_docx(data)
    assert [h for _, h in report.headings] == ["Summary", "Running costs", "Installation", "Emissions"]
    assert all(p == "The material does not cover this yet." for p in report.paragraphs[1:])
    assert_nothing_internal(docx_texts(data), prompt)


def test_the_workbook_is_the_uploaded_data_and_totals_only_what_adds_up(http):
    prompt = "Build a spreadsheet of our support tickets"
    result = run(http, prompt, "excel", [("tickets.csv", TICKETS)])
    assert result["status"] == "completed", result["errors"]
    sheets = xlsx_cells(artifact(result, "xlsx"))
    # the analysis first (findings, then its results), the upload whole, the sources
    names = list(sheets)
    assert names[0] == "Summary" and names[-2:] == ["Tickets", "Sources"]
    rows = sheets["Tickets"]
    assert rows[0] == ["ticket_id", "category", "opened", "tickets", "avg_resolution_hours"]
    assert rows[1][:2] == [1001, "Billing"] and rows[1][3:] == [12, 4.5]
    # the counts are summed; the ids and the average hours are not
    assert rows[-1] == ["Total", None, None, "=SUM(D2:D5)", None]
    assert_nothing_internal([str(c) for r in rows for c in r], prompt)


def test_a_budget_has_a_row_per_category_and_a_live_total(http):
    prompt = "Build a wedding budget for venue, catering, music and flowers"
    sheets = xlsx_cells(artifact(run(http, prompt, "excel"), "xlsx"))
    [name] = [n for n in sheets if n != "Sources"]
    rows = sheets[name]
    assert rows[0] == ["Category", "Amount", "Notes"]
    assert [r[:2] for r in rows[1:5]] == [["Venue", None], ["Catering", None], ["Music", None], ["Flowers", None]]
    assert rows[5][:2] == ["Total", "=SUM(B2:B5)"]
    assert_nothing_internal([str(c) for r in rows for c in r if c], prompt)


def test_the_app_loads_the_uploaded_data_with_a_chart_filters_and_sorting(http):
    prompt = "Build a dashboard of our support tickets"
    result = run(http, prompt, "app", [("tickets.csv", TICKETS)])
    assert result["status"] == "completed", result["errors"]
    data = artifact(result, "html")
    page = check_html(data, require_script=True)
    [island] = page.data_islands
    tables = json.loads(island)["tables"]
    # the analysis first: tickets by category, each category once, largest first, hours averaged, not added
    uploaded = list(csv.DictReader(io.StringIO(TICKETS.decode())))
    by_category: dict[str, int] = {}
    for row in uploaded:
        by_category[row["category"]] = by_category.get(row["category"], 0) + int(row["tickets"])
    breakdown = tables[0]
    assert breakdown["headers"][:3] == ["category", "tickets", "avg_resolution_hours (average)"]
    assert [r[:2] for r in breakdown["rows"]] == [
        [k, str(v)] for k, v in sorted(by_category.items(), key=lambda kv: -kv[1])
    ]
    assert breakdown["chart"]["label"] == 0 and breakdown["chart"]["sums"][:2] == [True, False]
    # then the upload's own rows, to search, filter and sort, not charted (a chart of some rows is not the whole's)
    table = tables[-1]
    assert table["caption"] == "Tickets" and table["rows"][1] == ["1002", "Login", "2024-01-03", "30", "12"]
    assert table["chart"] is None
    assert table["category"] == 1  # Billing appears twice: a column to filter by
    last = len(tables) - 1
    assert {"rows-filter-0", "chart-measure-0", f"rows-column-{last}", "export-csv"} <= set(page.wired_controls())
    assert page.wired_controls() == page.controls()
    assert_nothing_internal(html_texts(data), prompt)


def test_a_chart_image_is_drawn_from_the_uploaded_table(http):
    result = run(http, "Make a chart image of the sales table", uploads=[("sales.xlsx", SALES)])
    assert result["status"] == "completed", result["errors"]
    dag = http.get(f"/v1/canvas/{result['canvas_id']}/dag").json()["data"]
    [image] = [n for n in dag["nodes"] if n["type"] == "image-block"]
    assert image["content"].startswith("Bar chart of Sales (Q1-Q2): Q1, Q2 by Region")
    assert artifact(result, "png").startswith(b"\x89PNG")


def test_the_landing_page_shows_the_uploaded_logo(http):
    prompt = "Make a landing page for our bakery; use the uploaded logo"
    result = run(http, prompt, "landing_page", [("logo.png", LOGO)])
    assert result["status"] == "completed", result["errors"]
    assert [a["type"] for a in result["result"]["artifacts"]] == ["html"]  # no generated title card
    data = artifact(result, "html")
    assert base64.b64encode(LOGO).decode() in data.decode()
    assert 'class="logo"' in data.decode()
    assert_nothing_internal(html_texts(data), prompt)


def test_a_memo_is_addressed_and_titled_from_the_request(http):
    prompt = "Write a memo to the harbour team about spring tides and the new mooring rules for the summer season"
    data = artifact(run(http, prompt, "memo", [("heating.pdf", HEATING_PDF)]), "docx")
    memo = check_docx(data)
    assert memo.paragraphs[1] == "TO:\tThe harbour team"
    assert memo.paragraphs[4] == "SUBJECT:\tSpring tides and the new mooring rules for the summer season"
    assert [h for _, h in memo.headings][:3] == ["Summary", "Spring tides", "New mooring rules"]
    assert_nothing_internal(docx_texts(data)[5:], prompt)


# ---- what must never happen -----------------------------------------------------------------------------------


def test_uploaded_cells_that_look_like_formulas_stay_text(http):
    # Given a CSV whose cells would be live formulas in a spreadsheet (OWASP CSV injection)
    contacts = (
        b'name,note,amount\nAlice,"=HYPERLINK(""http://evil.example/x"",""c"")",10\n'
        b'Bob,"=WEBSERVICE(""http://evil.example/y"")",20\nCarol,+1+2,30\nDan,@SUM(A1:A2),40\n'
    )
    result = run(http, "Build a spreadsheet of the contacts", "excel", [("contacts.csv", contacts)])
    data = artifact(result, "xlsx")
    book = load_workbook(io.BytesIO(data))
    sheet = book["Contacts"]
    notes = [sheet.cell(row=r, column=2) for r in range(2, 6)]
    # Then each is a string, shown as written, never a formula; the workbook's own total is one
    assert [c.value for c in notes] == [
        '=HYPERLINK("http://evil.example/x","c")',
        '=WEBSERVICE("http://evil.example/y")',
        "+1+2",
        "@SUM(A1:A2)",
    ]
    assert {c.data_type for c in notes} == {"s"} and all(c.quotePrefix for c in notes)
    assert sheet["C6"].value == "=SUM(C2:C5)" and sheet["C6"].data_type == "f"
    assert b"<f>HYPERLINK" not in data and b"<f>WEBSERVICE" not in data


def test_two_files_of_one_kind_in_a_run_have_distinct_names(http):
    result = run(http, "Write a report on remote work and write a memo on it for the board")
    names = [a["name"] for a in result["result"]["artifacts"]]
    # each named from its title, the memo's as a memo: a report and a memo of one request differ by name
    assert sorted(names) == ["memo-remote-work.docx", "remote-work.docx"]
    for artifact_view in result["result"]["artifacts"]:
        response = httpx.get(artifact_view["download_url"], timeout=30)
        assert f'filename="{artifact_view["name"]}"' in response.headers["content-disposition"]
    assert result["result"]["final_output"].endswith(f"Files: {', '.join(names)}")


@pytest.mark.parametrize(
    "prompt",
    [
        "Write a report on http://[::1]:3941/e and tides",
        "Write a report on http://[bad and tides",
        "Write a report on http://[fe80::1%25eth0]:99999/x and tides",
    ],
)
def test_a_link_however_malformed_never_fails_the_run(http, prompt):
    result = run(http, prompt, "report")
    # a page that cannot be read is a source the run goes without: the report is still made
    assert result["status"] in ("completed", "partial"), result["errors"]
    assert artifact(result, "docx")
    assert not any("Invalid IPv6 URL" in e["error"] for e in result["errors"])


def test_control_characters_are_dropped_from_the_prompt(http):
    result = run(http, "Write a report on \x01tides\x7f and\x0b waves", "report")
    assert result["status"] == "completed", result["errors"]
    assert result["prompt"] == "Write a report on tides and waves"
    assert check_docx(artifact(result, "docx")).title == "Tides and waves"


def test_deep_nesting_answers_400(http):
    deep = "[" * 100_000 + "]" * 100_000
    response = http.post("/v1/run", data={"prompt": "x", "blocks": deep})
    assert response.status_code == 400 and response.json()["error"].startswith("Invalid blocks: nested more than")
    response = http.post(
        "/v1/run", data={"prompt": "x"}, files=[("files", ("deep.json", deep.encode(), "application/json"))]
    )
    assert response.status_code == 400
    assert response.json()["error"] == "File deep.json is nested too deeply: more than 200 levels"


def test_template_used_is_auto_when_blocks_override_the_template(http):
    result = run(http, "Summarize remote work", "report", blocks='["prompt-block","text-block"]')
    assert result["template"] == "report" and result["metadata"]["template_used"] == "auto"


@pytest.mark.parametrize(("template", "kind"), [("excel", "xlsx"), ("report", "docx"), ("slides", "pptx")])
def test_control_characters_in_an_upload_do_not_break_the_files(http, template, kind):
    # Given a CSV whose cells carry control characters no document format may hold
    upload = b"item,count\nbolts\x01,12\nnuts\x1b,30\nwashers\x0c,8\n"
    result = run(http, "Summarize the parts inventory", template, [("parts.csv", upload)])
    # Then every block completed and the file holds the data without them
    assert result["status"] == "completed", result["errors"]
    data = artifact(result, kind)
    if kind == "xlsx":
        assert xlsx_cells(data)["Parts"][1] == ["bolts", 12]
    elif kind == "docx":
        assert ["bolts", "12"] in [r for t in check_docx(data).tables for r in t]
    else:
        assert any(s.has_chart for s in check_pptx(data))
