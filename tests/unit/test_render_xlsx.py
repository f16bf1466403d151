"""canvas_core/render/xlsx.py: workbooks reopen in openpyxl with typed cells, a styled frozen header, sized
columns, SUM totals where columns add up, and a Sources sheet."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from openpyxl import load_workbook

from canvas_core.render import RenderCheckError
from canvas_core.render.structure import Reference, Table
from canvas_core.render.xlsx import WorkbookSpec, check_xlsx, render_workbook

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
