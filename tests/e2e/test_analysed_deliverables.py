"""Deliverables built on the analysis of an uploaded table, over HTTP on the embedded stack with the offline
provider: a sales table generated here (month, region, product, units, revenue) goes through each template as
a user sends it, and what each file and the answer state is checked against the aggregates computed here from
the generated rows: the breakdowns by the dimensions asked, each chart's categories (each once) and values,
the answer's top region and product with their numbers. Then an 84,323-row table: a deck of at most 15 slides
and its appendix, a workbook with every row, an answer that uses the file."""

from __future__ import annotations

import csv
import io
import random
import re
from collections import defaultdict

import httpx
import pytest
from docx import Document
from openpyxl import load_workbook
from pptx import Presentation

from canvas_core.agents.outline import FUNCTION_WORDS
from canvas_core.render.docx import check_docx
from canvas_core.render.pptx import check_pptx
from canvas_core.render.structure import sentences, statement_key
from tests.e2e.conftest import poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MONTHS = [f"2025-{m:02d}" for m in range(1, 7)]
REGIONS = ["North", "South", "East", "West"]
PRODUCTS = ["Widget", "Gadget", "Gizmo"]
HEADERS = ["month", "region", "product", "units", "revenue"]


def sales(count: int, seed: int) -> list[dict]:
    """Rows of sales; revenue in whole euros so every aggregate is exact."""
    rnd = random.Random(seed)
    weights = [rnd.uniform(0.5, 2.0) for _ in REGIONS]
    return [
        {
            "month": rnd.choice(MONTHS),
            "region": rnd.choices(REGIONS, weights)[0],
            "product": rnd.choice(PRODUCTS),
            "units": rnd.randint(1, 40),
            "revenue": rnd.randint(50, 5_000),
        }
        for _ in range(count)
    ]


def as_csv(rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=HEADERS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def total_by(rows: list[dict], key: str, measure: str = "revenue") -> dict[str, int]:
    found: dict[str, int] = defaultdict(int)
    for row in rows:
        found[row[key]] += row[measure]
    return dict(found)


def largest_first(totals: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))


def share(part: int, whole: int) -> str:
    return f"{part / whole * 100:.1f}".removesuffix(".0") + " %"


def cells(book, reference: str) -> list:
    """The values of a chart's reference (`'Sheet'!$A$2:$A$5`) in a workbook."""
    sheet, _, area = reference.rpartition("!")
    return [row[0].value for row in book[sheet.strip("'")][area.replace("$", "")]]


def run(http: httpx.Client, prompt: str, template: str | None, rows: list[dict]) -> dict:
    data = {"prompt": prompt, **({"template": template} if template else {})}
    created = http.post("/v1/run", data=data, files=[("files", ("sales.csv", as_csv(rows), "text/csv"))])
    assert created.status_code == 200, created.text
    result = poll_until_finished(http, created.json()["data"]["run_id"], timeout=240)
    assert result["status"] == "completed", result.get("errors")
    return result


def artifact_names(result: dict) -> list[str]:
    return [item["name"] for item in result["result"]["artifacts"]]


def artifacts(result: dict, kind: str) -> list[bytes]:
    found = []
    for item in result["result"]["artifacts"]:
        if item["type"] == kind:
            response = httpx.get(item["download_url"], timeout=60)
            assert response.status_code == 200
            found.append(response.content)
    return found


SALES = sales(240, seed=20251126)


def test_the_workbook_holds_the_breakdowns_asked_for_and_every_row_with_totals_readers_see():
    # Given the sales rows and their aggregates, computed here
    by_region, by_product = total_by(SALES, "region"), total_by(SALES, "product")
    units_by_region = total_by(SALES, "region", "units")
    whole = sum(r["revenue"] for r in SALES)
    # When (the run is made once per module, below)
    book = load_workbook(io.BytesIO(WORKBOOK[0]), data_only=True)
    formulas = load_workbook(io.BytesIO(WORKBOOK[0]))
    # Then the breakdown by region holds each region once, largest first, with its units and share
    region = [list(r) for r in book["Revenue by region"].iter_rows(values_only=True)]
    assert region[0] == ["region", "revenue", "units", "Share of revenue"]
    assert [(r[0], r[1]) for r in region[1:-1]] == largest_first(by_region)
    assert {r[0]: r[2] for r in region[1:-1]} == units_by_region
    assert [r[3] for r in region[1:-1]] == [pytest.approx(v / whole, abs=1e-6) for _, v in largest_first(by_region)]
    # And its Total is a formula whose value is there for readers that do not recalculate
    assert region[-1][:3] == ["Total", whole, sum(units_by_region.values())]
    assert formulas["Revenue by region"].cell(len(region), 2).value == f"=SUM(B2:B{len(region) - 1})"
    product = [list(r) for r in book["Revenue by product"].iter_rows(values_only=True)]
    assert [(r[0], r[1]) for r in product[1:-1]] == largest_first(by_product)
    # And every uploaded row is on the data sheet, with its total
    data = [list(r) for r in book["Sales"].iter_rows(values_only=True)]
    assert data[0] == HEADERS and len(data) == len(SALES) + 2
    assert data[1:-1] == [[r[h] for h in HEADERS] for r in SALES]
    assert data[-1][0] == "Total" and data[-1][3:] == [sum(r["units"] for r in SALES), whole]
    # And each result sheet's chart draws each category once with its aggregate, from the sheet's cells
    charts = {sheet.title: sheet._charts for sheet in formulas.worksheets if sheet._charts}
    assert set(charts) >= {"Revenue by region", "Revenue by product", "Revenue per month"}
    for name, [chart] in charts.items():
        [series] = chart.series
        categories = cells(book, series.cat.strRef.f)
        assert len(categories) == len(set(categories)), name
    region_chart = charts["Revenue by region"][0].series[0]
    assert list(zip(cells(book, region_chart.cat.strRef.f), cells(book, region_chart.val.numRef.f), strict=True)) == (
        largest_first(by_region)
    )
    month_chart = charts["Revenue per month"][0].series[0]
    by_month = total_by(SALES, "month")
    assert cells(book, month_chart.cat.strRef.f) == MONTHS
    assert cells(book, month_chart.val.numRef.f) == [by_month[m] for m in MONTHS]
    # And the Summary says what the analysis found, with the engine's numbers
    summary = [r[0] for r in book["Summary"].iter_rows(values_only=True)]
    top, value = largest_first(by_region)[0]
    assert any(f"{top} had the highest revenue by region: {value:,}, {share(value, whole)}" in s for s in summary)


def test_each_chart_draws_each_category_once_with_its_aggregate():
    # Given
    by_region, by_month = total_by(SALES, "region"), total_by(SALES, "month")
    deck = Presentation(io.BytesIO(DECK[0]))
    charts = {
        slide.shapes.title.text: shape.chart for slide in deck.slides for shape in slide.shapes if shape.has_chart
    }
    # Then every chart's categories are unique and it draws one series (one unit on its axis)
    assert charts
    for chart in charts.values():
        categories = list(chart.plots[0].categories)
        assert len(categories) == len(set(categories))
        assert len(chart.plots[0].series) == 1
    # And the regions' bars are their revenue, the months' line the revenue per month, in order
    region = charts["Revenue by region"].plots[0]
    assert list(zip(region.categories, region.series[0].values, strict=True)) == largest_first(by_region)
    month = charts["Revenue per month"]
    assert month.chart_type.name.startswith("LINE")
    assert list(month.plots[0].categories) == MONTHS
    assert list(month.plots[0].series[0].values) == [by_month[m] for m in MONTHS]


def test_the_report_and_the_memo_state_the_breakdowns_and_the_answer_names_the_best_region_and_product():
    by_region, by_product = total_by(SALES, "region"), total_by(SALES, "product")
    whole = sum(r["revenue"] for r in SALES)
    # The report's tables are the breakdowns, written as a reader reads them
    report = check_docx(REPORT[0])
    region_table = next(t for t in report.tables if t[0][:2] == ["region", "revenue"])
    assert [(r[0], r[1]) for r in region_table[1:]] == [(k, f"{v:,}") for k, v in largest_first(by_region)]
    product_table = next(t for t in report.tables if t[0][:2] == ["product", "revenue"])
    assert [(r[0], r[1]) for r in product_table[1:]] == [(k, f"{v:,}") for k, v in largest_first(by_product)]
    # The memo's key figures carry the same numbers
    memo = check_docx(MEMO[0])
    top_region, region_value = largest_first(by_region)[0]
    assert any(f"{top_region} had the highest revenue by region: {region_value:,}" in p for p in memo.paragraphs)
    # The answer names the best region and product with their revenue and share, and uses the file
    top_product, product_value = largest_first(by_product)[0]
    best_region = f"{top_region} had the highest revenue by region: {region_value:,}, {share(region_value, whole)}"
    assert best_region in ANSWER[0]
    assert f"{top_product} had the highest revenue by product: {product_value:,}" in ANSWER[0]
    assert "No material was provided" not in ANSWER[0] and "sales.csv" in ANSWER[0]


# The request of a user who asks for the first half of the year by region and product, and which region did best.
ASKED = "Monthly revenue by region and product for the first half of 2025; which region did best?"


def slide_statements(deck: bytes) -> list[tuple[str, list[str]]]:
    """Each slide's title and the statements its text boxes hold (its page number aside)."""
    return [(s.title, [t for t in s.texts if not re.fullmatch(r"\d+ / \d+", t)]) for s in check_pptx(deck)]


def docx_sections(data: bytes) -> list[tuple[str, list[str]]]:
    """Each heading of a Word document with the sentences of the text under it (tables' captions aside)."""
    found: list[tuple[str, list[str]]] = [("", [])]
    for paragraph in Document(io.BytesIO(data)).paragraphs:
        style = paragraph.style.name if paragraph.style is not None else ""
        if style.startswith("Heading"):
            found.append((paragraph.text, []))
        elif paragraph.text.strip() and style not in ("Caption", "Title"):
            found[-1][1].extend(sentences(paragraph.text))
    return found


def test_a_statement_is_said_once_per_section_and_no_section_repeats_the_one_before_it():
    for name, sections in (
        ("deck", slide_statements(ASKED_DECK[0])),
        ("report", docx_sections(REPORT[0])),
        ("asked report", docx_sections(ASKED_REPORT[0])),
    ):
        previous: set[str] = set()
        for title, statements in sections:
            keys = [statement_key(s) for s in statements]
            assert len(keys) == len(set(keys)), (name, title, statements)
            assert not previous & set(keys), (name, title, previous & set(keys))
            previous = set(keys)


def test_a_slide_showing_part_of_a_result_says_which_part_and_where_the_rest_is():
    # Given the region and product combinations the rows hold, more than a slide's table shows
    combinations = {(r["region"], r["product"]) for r in SALES}
    # When (the deck is made once per module, below)
    deck = Presentation(io.BytesIO(ASKED_DECK[0]))
    tables = {s.shapes.title.text: shape.table for s in deck.slides for shape in s.shapes if shape.has_table}
    # Then the table of the combinations holds the largest, and its title says how many of how many, and where
    [(title, table)] = [(t, v) for t, v in tables.items() if t.startswith("Revenue by region and product")]
    shown = len(table.rows) - 1
    assert shown < len(combinations)
    assert f"top {shown} of {len(combinations)}" in title and "workbook" in title
    # And every table slide that shows fewer rows than its data has says so in its title
    for title, table in tables.items():
        if title.startswith("sales.csv"):
            assert f"first {len(table.rows) - 1} of {len(SALES)} rows" in title


def test_file_names_are_whole_words_of_the_title_never_ending_on_a_function_word_and_unique():
    for result in ASKED_RUNS:
        names = artifact_names(result)
        assert len(names) == len(set(names)), names
        title = re.findall(r"[a-z0-9]+", ASKED.lower())
        for name in names:
            stem = name.rsplit(".", 1)[0].removesuffix("-data").split("-")
            assert stem == title[: len(stem)], name
            assert stem[-1] not in FUNCTION_WORDS, name


WORKBOOK: list[bytes] = []
DECK: list[bytes] = []
REPORT: list[bytes] = []
MEMO: list[bytes] = []
ANSWER: list[str] = []
ASKED_DECK: list[bytes] = []
ASKED_REPORT: list[bytes] = []
ASKED_RUNS: list[dict] = []


@pytest.fixture(scope="module", autouse=True)
def deliverables(http):
    """Each template run once over the same table; the tests read what they delivered."""
    WORKBOOK[:] = artifacts(run(http, "Monthly revenue by region and product", "excel", SALES), "xlsx")
    deck = run(http, "Make slides on monthly revenue by region", "slides", SALES)
    DECK[:] = artifacts(deck, "pptx")
    REPORT[:] = artifacts(run(http, "Write a report on revenue by region and product", "report", SALES), "docx")
    MEMO[:] = artifacts(run(http, "Write a memo to the sales team on revenue by region", "memo", SALES), "docx")
    ANSWER[:] = [run(http, "Which product or region did best?", None, SALES)["result"]["final_output"]]
    ASKED_RUNS[:] = [run(http, ASKED, "slides", SALES), run(http, ASKED, "report", SALES)]
    ASKED_DECK[:] = artifacts(ASKED_RUNS[0], "pptx")
    ASKED_REPORT[:] = artifacts(ASKED_RUNS[1], "docx")
    yield


# ---- a large table ---------------------------------------------------------------------------------------------

LARGE = 84_323


def test_a_large_table_gives_a_readable_deck_a_whole_workbook_and_an_answer_that_uses_it(http):
    # Given 84,323 rows
    rows = sales(LARGE, seed=84323)
    whole = sum(r["revenue"] for r in rows)
    top_region, region_value = largest_first(total_by(rows, "region"))[0]
    # When the slides template runs over them
    result = run(http, "Make slides on revenue by region and product", "slides", rows)
    # Then the deck keeps to 15 slides before its appendix, which says where the data is
    [deck] = artifacts(result, "pptx")
    titles = [s.title for s in check_pptx(deck)]
    body = [t for t in titles if not t.startswith("Appendix") and not t.startswith("sales.csv:")]
    assert len(body) <= 15 and len(titles) > len(body)
    assert any(t.startswith("Appendix") for t in titles)
    # And the workbook beside it holds every row, totalled over all of them
    [workbook] = artifacts(result, "xlsx")
    sheet = load_workbook(io.BytesIO(workbook), read_only=True, data_only=True)["Sales"]
    assert sheet.max_row == LARGE + 2
    last = list(next(sheet.iter_rows(min_row=LARGE + 2, max_row=LARGE + 2, values_only=True)))
    assert last[0] == "Total" and last[4] == whole
    # And the answer states what the whole file says
    answer = result["result"]["final_output"]
    assert f"{top_region} had the highest revenue by region: {region_value:,}" in answer
    assert f"{LARGE:,} rows" in answer and "No material was provided" not in answer
