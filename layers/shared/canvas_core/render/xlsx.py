"""Workbooks (openpyxl) for excel-block, and `check_xlsx`, which reopens a workbook and reads it back.

One sheet per table with typed cells (numbers, percentages, amounts and dates as what they are), a styled and
frozen header row with a filter, column widths from the content, a Total row of SUM formulas under the
columns that add up, and a Sources sheet. A workbook over analysed data also has a Summary sheet of findings
first and data sheets that hold every row (up to a sheet's limit, saying so where rows were cut). Sheets are
written in openpyxl's write-only mode, which streams rows and keeps a 10,000-row sheet well within a second or
two.

openpyxl writes a formula without the value it computes, which only a spreadsheet that recalculates shows:
every SUM the workbook holds is written with its value cached in the cell (`<v>`), so readers that do not
recalculate (pandas, openpyxl with `data_only=True`, previews) see the totals too.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from openpyxl import Workbook, load_workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.cell.cell import Cell
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.properties import PageSetupProperties
from openpyxl.worksheet.worksheet import Worksheet

from canvas_core.render import RenderCheckError
from canvas_core.render.structure import Reference, plain, safe_url, summable_columns
from canvas_core.tables import Table, Typed, column_kinds, typed_value
from canvas_core.textsafety import one_line, strip_control

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
MAX_PROPERTY_CHARS = 255  # a workbook's title, as Office keeps it

HEADER_FONT = Font(bold=True, color="FFFFFF")
HEADER_FILL = PatternFill("solid", fgColor="1F4E79")
HEADER_ALIGNMENT = Alignment(vertical="center", wrap_text=True)
TOTAL_FONT = Font(bold=True)
TOTAL_BORDER = Border(top=Side(style="thin"), bottom=Side(style="double"))
LINK_FONT = Font(color="0563C1", underline="single")
FORMATS = {
    "int": "#,##0",
    "float": "#,##0.00",
    "percent": "0.0%",
    "date": "yyyy-mm-dd",
    "datetime": "yyyy-mm-dd hh:mm",
}
CURRENCY_FORMATS = {"$": '"$"#,##0.00', "€": "#,##0.00 [$€-x-euro2]", "£": '"£"#,##0.00', "¥": '"¥"#,##0'}
MIN_WIDTH, MAX_WIDTH = 8, 60
SUMMARY_WIDTH = 100  # characters: a longer summary line wraps, so the sheet prints at a readable scale
LINE_HEIGHT = 15  # points: a line of the default 11-point font
WIDTH_SAMPLE = 500  # rows looked at to size a column: enough to see its typical width, cheap on long sheets
_INVALID_SHEET_CHARS = re.compile(r"[\[\]:*?/\\]")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class DataSheet:
    """Rows as values (numbers, text, dates), written as they are: an uploaded table whole. `totals` are the
    columns to total, with the totals the engine computed (cached in the SUM formulas)."""

    caption: str
    headers: list[str]
    rows: Iterable[list[Any]]
    row_count: int
    totals: dict[int, float] = field(default_factory=dict)


@dataclass
class WorkbookSpec:
    title: str
    tables: list[Table]
    references: list[Reference] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)  # findings, on a first sheet of their own
    data: list[DataSheet] = field(default_factory=list)  # after the tables


Cached = dict[int, dict[str, float]]  # sheet number (from 1) -> cell -> the value its formula computes


@dataclass
class _Bulk:
    """The rows of a data sheet past its first, written straight into the sheet's XML (openpyxl's cell objects
    cost about 15 µs a cell: seconds for an 80,000-row table) with the styles openpyxl gave the first row."""

    rows: Iterator[list[Any]]
    count: int  # data rows in all, the first included
    width: int


def render_workbook(spec: WorkbookSpec) -> bytes:
    book = Workbook(write_only=True)
    book.properties.title = one_line(spec.title, MAX_PROPERTY_CHARS)
    book.properties.creator = "Canvas Run Service"
    names: set[str] = set()
    cached: Cached = {}
    bulk: dict[int, _Bulk] = {}
    if spec.summary:
        _write_summary(_new_sheet(book, _sheet_name("Summary", names)), spec.title, spec.summary)
    for n, table in enumerate(spec.tables, start=1):
        sheet = _new_sheet(book, _sheet_name(table.caption or f"Table {n}", names))
        cached[len(book.worksheets)] = _write_table(sheet, table)
    for data in spec.data:
        sheet = _new_sheet(book, _sheet_name(data.caption, names))
        cached[len(book.worksheets)], rest = _write_data(sheet, data)
        if rest is not None:
            bulk[len(book.worksheets)] = rest
    _write_sources(_new_sheet(book, _sheet_name("Sources", names)), spec.references)
    buffer = io.BytesIO()
    book.save(buffer)
    return _rewrite_sheets(buffer.getvalue(), cached, bulk)


def _new_sheet(book: Workbook, name: str) -> Worksheet:
    """A sheet that prints as wide as the page (in landscape) and as long as its rows need: its columns are never
    split across pages. Set before its first row: a write-only sheet writes its properties with that row."""
    sheet = book.create_sheet(name)
    sheet.page_setup.orientation = "landscape"
    sheet.page_setup.fitToWidth = 1
    sheet.page_setup.fitToHeight = 0
    sheet.sheet_properties.pageSetUpPr = PageSetupProperties(fitToPage=True)
    sheet.print_title_rows = "1:1"
    return sheet


def with_cached_values(text: str, cells: dict[str, float]) -> str:
    """A sheet's XML with each formula's computed value written beside it (`<f>..</f><v>value</v>`)."""
    for ref, value in cells.items():
        text = re.sub(rf'(<c r="{ref}"[^>]*><f>[^<]*</f>)<v\s*/?>(?:</v>)?', rf"\g<1><v>{value!r}</v>", text, count=1)
    return text


def _rewrite_sheets(data: bytes, cached: Cached, bulk: dict[int, _Bulk]) -> bytes:
    if not any(cached.values()) and not bulk:
        return data
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            body = source.read(item.filename)
            match = re.fullmatch(r"xl/worksheets/sheet(\d+)\.xml", item.filename)
            number = int(match.group(1)) if match else 0
            if cached.get(number) or number in bulk:
                text = body.decode("utf-8")
                if number in bulk:
                    text = _expand(text, bulk[number])
                body = with_cached_values(text, cached.get(number, {})).encode("utf-8")
            target.writestr(item, body)
    return out.getvalue()


_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_EPOCH = dt.datetime(1899, 12, 30)


def _expand(text: str, bulk: _Bulk) -> str:
    """Rows 3.. of a data sheet written after its first data row (row 2), each cell with the style of the
    first row's cell in its column, the Total row (written as row 3) moved below them, and the sheet's
    dimension set so readers need not scan every row to size it."""
    first = re.search(r'<row r="2"[^>]*>(.*?)</row>', text, re.DOTALL)
    if first is None:
        return text
    styles = {}
    for letter, attributes in re.findall(r'<c r="([A-Z]+)2"([^>]*)>', first.group(0)):
        style = re.search(r'\bs="(\d+)"', attributes)
        if style:
            styles[letter] = style.group(1)
    letters = [get_column_letter(c + 1) for c in range(bulk.width)]
    parts: list[str] = []
    number = 2
    for row in bulk.rows:
        number += 1
        cells = []
        for letter, value in zip(letters, row, strict=False):
            cell = _xml_cell(f"{letter}{number}", value, styles.get(letter))
            if cell:
                cells.append(cell)
        parts.append(f'<row r="{number}">{"".join(cells)}</row>')
    total_row = number + 1
    text = re.sub(
        r'<row r="3"([^>]*)>(.*?)</row>',
        lambda m: (
            f'<row r="{total_row}"{m.group(1)}>'
            + re.sub(r'(<c r="[A-Z]+)3"', rf'\g<1>{total_row}"', m.group(2))
            + "</row>"
        ),
        text,
        count=1,
        flags=re.DOTALL,
    )
    text = text.replace(first.group(0), first.group(0) + "".join(parts), 1)
    dimension = f'<dimension ref="A1:{letters[-1]}{total_row}"/>'
    if "<dimension" in text:
        return re.sub(r"<dimension [^>]*/>", dimension, text, count=1)
    return text.replace("<sheetViews>", dimension + "<sheetViews>", 1)


def _xml_cell(ref: str, value: Any, style: str | None) -> str:
    styled = f' s="{style}"' if style else ""
    kind = type(value)
    if kind is int or (kind is float and math.isfinite(value)):
        return f'<c r="{ref}"{styled}><v>{value!r}</v></c>'  # the common case first
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return f'<c r="{ref}" t="b"{styled}><v>{int(value)}</v></c>'
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return f'<c r="{ref}" t="inlineStr"><is><t>{value}</t></is></c>'
        return f'<c r="{ref}"{styled}><v>{value!r}</v></c>'
    if isinstance(value, dt.date) and style:
        moment = value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time())
        serial = (moment.replace(tzinfo=None) - _EPOCH) / dt.timedelta(days=1)
        return f'<c r="{ref}"{styled}><v>{serial!r}</v></c>'
    text = value.isoformat() if isinstance(value, dt.date) else str(value)
    if not text.isprintable():
        text = _XML_UNSAFE.sub("", text)
    if "&" in text or "<" in text or ">" in text:
        text = escape(text)
    # An inline string is text to every reader: a leading "=" in it is never a formula.
    return f'<c r="{ref}" t="inlineStr"><is><t xml:space="preserve">{text}</t></is></c>'


def _write_summary(sheet: Worksheet, title: str, lines: list[str]) -> None:
    """A line a row, in one column as wide as the longest up to SUMMARY_WIDTH characters: a longer one wraps, its
    row as tall as its lines (set here: a sheet written row by row has no heights, and Excel does not grow a row to
    its wrapped text when it opens the file). A column as wide as a long line would print so small, to fit the
    page's width, that it could not be read, or run past the page."""
    title = one_line(plain(title))
    texts = [plain(line) for line in lines]
    width = min(SUMMARY_WIDTH, max(len(title), *(len(text) for text in texts)) + 2)
    sheet.column_dimensions["A"].width = width
    wrap = Alignment(wrap_text=True, vertical="top")
    for row, text in enumerate([title, *texts], start=1):
        # Fonts are proportional and differ between applications: room for a seventh more than the count says.
        text_lines = math.ceil(len(text) * 1.15 / width)
        if text_lines > 1:
            sheet.row_dimensions[row].height = LINE_HEIGHT * text_lines
        if row == 1:
            sheet.append([_header_cell(sheet, title)])
            continue
        value = text_cell(sheet, text)
        cell = value if isinstance(value, Cell) else WriteOnlyCell(sheet, value=value)
        cell.alignment = wrap
        sheet.append([cell])


def _write_data(sheet: Worksheet, data: DataSheet) -> tuple[dict[str, float], _Bulk | None]:
    """A data sheet: the header, the first row (the rest follow in the XML, `_expand`), and a Total row of SUM
    formulas over every row with the engine's totals cached."""
    rows = iter(data.rows)
    first_row = next(rows, None)
    # As wide as its header or its first value: a date or a figure in too narrow a column shows (and prints) as ###.
    for c, header in enumerate(data.headers):
        first = first_row[c] if first_row is not None and c < len(first_row) else None
        widest = max(len(header) + 4, _raw_width(first))
        sheet.column_dimensions[get_column_letter(c + 1)].width = min(MAX_WIDTH, max(MIN_WIDTH, widest))
    sheet.freeze_panes = "A2"
    sheet.append([_header_cell(sheet, h) for h in data.headers])
    if first_row is None:
        return {}, None
    sheet.append([text_cell(sheet, v) if isinstance(v, str) else v for v in first_row])
    cached: dict[str, float] = {}
    last = 1 + data.row_count
    if data.totals:
        label_column = next((c for c in range(len(data.headers)) if c not in data.totals), None)
        cells = []
        for c in range(len(data.headers)):
            letter = get_column_letter(c + 1)
            value: object = f"=SUM({letter}2:{letter}{last})" if c in data.totals else None
            if c == label_column:
                value = "Total"
            cell = WriteOnlyCell(sheet, value=value)
            cell.font, cell.border = TOTAL_FONT, TOTAL_BORDER
            if c in data.totals:
                cached[f"{letter}{last + 1}"] = data.totals[c]
                is_whole = float(data.totals[c]).is_integer()
                cell.number_format = FORMATS["int"] if is_whole else FORMATS["float"]
            cells.append(cell)
        sheet.append(cells)
    return cached, _Bulk(rows=rows, count=data.row_count, width=len(data.headers))


def _write_table(sheet: Worksheet, table: Table) -> dict[str, float]:
    kinds = column_kinds(table)
    typed_rows = [[typed_value(c) for c in row] for row in table.rows]
    _size_columns(sheet, table.headers, typed_rows)
    sheet.freeze_panes = "A2"
    last_column = get_column_letter(max(1, len(table.headers)))
    sheet.auto_filter.ref = f"A1:{last_column}{len(table.rows) + 1}"
    sheet.append([_header_cell(sheet, h) for h in table.headers])
    for row in typed_rows:
        sheet.append([_value_cell(sheet, t, kinds[c]) for c, t in enumerate(row)])
    if table.chart in ("bar", "line") and len(table.rows) >= 2:
        _add_chart(sheet, table)
    summed = summable_columns(table, kinds)
    cached: dict[str, float] = {}
    if summed:
        first, last = 2, len(table.rows) + 1
        label_column = next((c for c in range(len(table.headers)) if c not in summed), None)
        totals = []
        for c in range(len(table.headers)):
            if c in summed:
                letter = get_column_letter(c + 1)
                value: object = f"=SUM({letter}{first}:{letter}{last})"
                cached[f"{letter}{last + 1}"] = _sum(row[c] for row in typed_rows if c < len(row))
            else:
                value = "Total" if c == label_column else None
            cell = WriteOnlyCell(sheet, value=value)
            cell.font, cell.border = TOTAL_FONT, TOTAL_BORDER
            if c in summed:
                cell.number_format = _total_format([row[c] for row in typed_rows if c < len(row)])
            totals.append(cell)
        sheet.append(totals)
    return cached


def _sum(cells: Iterable[Typed]) -> float:
    """What SUM computes over the cells: their numbers, text and empty cells left out."""
    total = 0.0
    for t in cells:
        if t.kind in ("int", "float", "currency", "percent") and isinstance(t.value, int | float):
            total += t.value
    return int(total) if total.is_integer() else round(total, 10)


def _add_chart(sheet: Worksheet, table: Table) -> None:
    """A native chart of a table made to be drawn (`Table.chart`): its first column's labels and its second
    column's figures (one measure, one axis), as bars from zero or a line, beside the table."""
    from openpyxl.chart import BarChart, LineChart, Reference
    from openpyxl.chart.data_source import AxDataSource, StrRef

    chart = LineChart() if table.chart == "line" else BarChart()
    last = len(table.rows) + 1
    chart.add_data(Reference(sheet, min_col=2, min_row=1, max_row=last), titles_from_data=True)
    labels = Reference(sheet, min_col=1, min_row=2, max_row=last)
    for series in chart.series:
        series.cat = AxDataSource(strRef=StrRef(f=str(labels)))  # text labels, not numbers
        series.smooth = False  # a line between the periods' figures, not a curve through them
    chart.title = plain(table.caption)
    chart.legend = None
    chart.width, chart.height = 20, 10
    chart.y_axis.numFmt = "#,##0"
    chart.x_axis.delete = chart.y_axis.delete = False  # openpyxl 3.1 hides both axes otherwise
    if table.chart == "bar":
        chart.y_axis.scaling.min = 0
    sheet.add_chart(chart, f"{get_column_letter(len(table.headers) + 2)}2")


def _total_format(cells: list[Typed]) -> str:
    """A total is shown as its column is: in the column's currency, with decimals when any cell has them."""
    kinds = {t.kind for t in cells}
    if "currency" in kinds:
        symbol = next(t.symbol for t in cells if t.kind == "currency")
        return CURRENCY_FORMATS.get(symbol, FORMATS["float"])
    return FORMATS["float"] if "float" in kinds else FORMATS["int"]


def _value_cell(sheet: Worksheet, typed: Typed, column_kind: str) -> object:
    if typed.kind == "empty":
        return None
    if typed.kind == "currency":
        cell = WriteOnlyCell(sheet, value=typed.value)
        cell.number_format = CURRENCY_FORMATS.get(typed.symbol, FORMATS["float"])
        return cell
    if typed.kind in ("float", "percent", "datetime") or (typed.kind == "int" and column_kind != "year"):
        cell = WriteOnlyCell(sheet, value=typed.value)
        cell.number_format = FORMATS[typed.kind]
        return cell
    if typed.kind == "text":
        return text_cell(sheet, plain(str(typed.value)))  # a text cell's value is its str
    return typed.value  # ints of a year column, dates: openpyxl gives dates their date format


def text_cell(sheet: Worksheet, text: str | None) -> object:
    """A cell that holds text as text. Text from uploads, the web or a model that starts like a formula
    (`= + - @`, tab, CR: OWASP's CSV injection) is stored as a string with a quote prefix, so no spreadsheet
    evaluates it; only the workbook's own totals are formulas. Control characters no cell may hold are dropped."""
    text = strip_control(text) if text else text
    if not text or not text.startswith(FORMULA_STARTS):
        return text
    cell = WriteOnlyCell(sheet, value=text)
    cell.data_type = "s"  # openpyxl reads a leading "=" as a formula; this keeps the value a string
    cell.quotePrefix = True
    return cell


def _header_cell(sheet: Worksheet, text: str) -> WriteOnlyCell:
    cell = WriteOnlyCell(sheet, value=one_line(plain(text)))
    if cell.data_type == "f":
        cell.data_type, cell.quotePrefix = "s", True
    cell.font, cell.fill, cell.alignment = HEADER_FONT, HEADER_FILL, HEADER_ALIGNMENT
    return cell


def _size_columns(sheet: Worksheet, headers: list[str], rows: list[list[Typed]]) -> None:
    for c, header in enumerate(headers):
        widest = len(plain(header)) + 2  # room for the filter button
        for row in rows[:WIDTH_SAMPLE]:
            if c < len(row):
                widest = max(widest, _display_width(row[c]))
        sheet.column_dimensions[get_column_letter(c + 1)].width = min(MAX_WIDTH, max(MIN_WIDTH, widest + 2))


def _raw_width(value: object) -> int:
    """Characters a data sheet's value takes as shown, with room for a cell's padding."""
    if isinstance(value, dt.datetime):
        return 18
    if isinstance(value, dt.date):
        return 12
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int | float):
        return len(f"{value:,}") + 2
    return len(str(value)) + 2


def _display_width(typed: Typed) -> int:
    if typed.kind in ("date",):
        return 10
    if typed.kind == "datetime":
        return 16
    if typed.kind in ("int", "float", "currency", "percent"):
        return len(f"{typed.value:,.2f}") + 1
    return len(str(typed.value or ""))


def _write_sources(sheet: Worksheet, references: list[Reference]) -> None:
    headers = ["#", "Source", "Detail", "Link"]
    for letter, width in zip("ABCD", (5, 50, 30, 60), strict=True):
        sheet.column_dimensions[letter].width = width
    sheet.freeze_panes = "A2"
    sheet.append([_header_cell(sheet, h) for h in headers])
    if not references:
        sheet.append([None, "No sources were used for this workbook."])
    for n, reference in enumerate(references, start=1):
        url = safe_url(reference.url)
        link = None
        if url:
            link = WriteOnlyCell(sheet, value=url)
            link.hyperlink = url
            link.font = LINK_FONT
        sheet.append([n, text_cell(sheet, reference.title), text_cell(sheet, reference.detail or None), link])


def _sheet_name(name: str, taken: set[str]) -> str:
    base = one_line(_INVALID_SHEET_CHARS.sub(" ", plain(name))).strip("'")[:31].strip().strip("'") or "Sheet"
    candidate, n = base, 2
    while candidate.lower() in taken:
        suffix = f" ({n})"
        candidate, n = base[: 31 - len(suffix)] + suffix, n + 1
    taken.add(candidate.lower())
    return candidate


# ---- the check ------------------------------------------------------------------------------------------------


@dataclass
class SheetView:
    name: str
    header: list[object]
    rows: list[list[object]]


def check_xlsx(data: bytes, rows_per_sheet: int = 20) -> list[SheetView]:
    """Reopen a .xlsx with openpyxl and read each sheet's header and first rows; RenderCheckError when it
    does not open or a sheet has no header."""
    try:
        book = load_workbook(io.BytesIO(data), read_only=False) if len(data) < 200_000 else None
        views = _views(book) if book else _streamed_views(data, rows_per_sheet)
    except Exception as exc:
        raise RenderCheckError(f"the file does not reopen as an Excel workbook ({type(exc).__name__})") from exc
    if not views:
        raise RenderCheckError("the workbook has no sheets")
    for view in views:
        if not any(v not in (None, "") for v in view.header):
            raise RenderCheckError(f"sheet {view.name!r} has no header row")
    return views


def _views(book: Workbook) -> list[SheetView]:
    views = []
    for sheet in book.worksheets:
        rows = list(sheet.iter_rows())
        views.append(
            SheetView(
                name=sheet.title,
                header=[c.value for c in rows[0]] if rows else [],
                rows=[[c.value for c in r] for r in rows[1:]],
            )
        )
    return views


def _streamed_views(data: bytes, rows_per_sheet: int) -> list[SheetView]:
    """A large workbook is read in read-only mode: every sheet's first rows, not all of them."""
    book = load_workbook(io.BytesIO(data), read_only=True)
    views = []
    for sheet in book.worksheets:
        rows = list(sheet.iter_rows(max_row=rows_per_sheet + 1))
        views.append(
            SheetView(
                name=sheet.title,
                header=[c.value for c in rows[0]] if rows else [],
                rows=[[c.value for c in r] for r in rows[1:]],
            )
        )
    book.close()
    return views
