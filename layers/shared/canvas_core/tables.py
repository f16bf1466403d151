"""Tables and lists as data, one model for every block: `Table` read from CSV, XLSX, JSON rows and markdown pipe
tables; the types of its columns; and tables and lists written back as markdown.

A table has two readings of its cells. As stored content (a table-block's output, a file's sheet) each column
has a type, integer, number, boolean, date or text (`infer_types`), written in a `Columns:` line above the
table so a downstream block reads the types back (`parse_markdown_tables`). As shown in a deliverable each cell
says what it is, an amount, a percentage, a date (`typed_value`), and each column what it holds
(`column_kinds`), so every format renders the same data the same way. Standard library only (openpyxl when
reading XLSX).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import threading
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

MAX_ROWS = 1000
MAX_COLUMNS = 50


@dataclass
class Table:
    """Rows under a header row. Read from a file or a block's typed content the cells hold values of their
    column's type (`types`); parsed from a text to show, the text as written."""

    headers: list[str]
    rows: list[list[Any]]
    caption: str = ""
    sum_columns: list[int] | None = None  # the columns to total, when the table says so itself
    types: list[str] = field(default_factory=list)  # each column's type, when typed
    truncated_rows: int = 0  # rows left out past MAX_ROWS
    chart: str = ""  # "bar" or "line": a table made to be drawn (one label, one measure), shown as its chart only


@dataclass
class ListItem:
    text: str
    children: list[ListItem] = field(default_factory=list)


# ---- reading ---------------------------------------------------------------------------------------------------------


def table_from_csv(text: str, caption: str = "") -> Table:
    """A CSV file's table (its dialect sniffed: comma, semicolon, tab or bar), typed. A bare CR ends a row as LF
    and CRLF do, outside quotes, as spreadsheets read it (old Mac files end every row so); inside quotes it stays
    a line break in the cell."""
    sample = text[:8192].replace("\r\n", "\n").replace("\r", "\n")
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    # newline="" splits lines at CR, LF and CRLF and leaves them for the reader, which keeps quoted ones.
    lines = io.StringIO(text, newline="")
    _allow_fields_of(len(text))
    rows = [row for row in csv.reader(lines, dialect) if any(cell.strip() for cell in row)]
    return table_from_rows(rows, caption)


_field_limit_lock = threading.Lock()


def _allow_fields_of(length: int) -> None:
    """Lets a field be as long as the whole text. Python's csv refuses a field over `csv.field_size_limit()`, 128 KiB
    by default, and the limit is process-wide: it is only ever raised, under a lock, so a parse in another thread
    never sees it lowered."""
    with _field_limit_lock:
        if csv.field_size_limit() < length:
            csv.field_size_limit(length)


def tables_from_xlsx(data: bytes) -> list[Table]:
    """One table per non-empty sheet (values, not formulas), each capped at MAX_ROWS and MAX_COLUMNS."""
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        tables = []
        for sheet in workbook.worksheets:
            rows: list[list[Any]] = []
            extra = 0
            for row in sheet.iter_rows(values_only=True):
                cells = list(row[:MAX_COLUMNS])
                if not any(c is not None and str(c).strip() for c in cells):
                    continue
                if len(rows) > MAX_ROWS:
                    extra += 1
                    continue
                rows.append(cells)
            if rows:
                table = table_from_rows(rows, sheet.title)
                table.truncated_rows += extra
                tables.append(table)
        return tables
    finally:
        workbook.close()


def table_from_rows(rows: list[list[Any]], caption: str = "") -> Table:
    """A typed table whose first row is the header."""
    if not rows:
        return Table(headers=[], rows=[], caption=caption)
    width = min(max(len(r) for r in rows), MAX_COLUMNS)
    header = [_cell_text(c) for c in rows[0][:width]] + [""] * (width - len(rows[0][:width]))
    columns = [h or f"Column {i + 1}" for i, h in enumerate(header)]
    body = [list(r[:width]) + [None] * (width - len(r[:width])) for r in rows[1:]]
    table = Table(headers=columns, rows=body[:MAX_ROWS], caption=caption, truncated_rows=max(0, len(body) - MAX_ROWS))
    return infer_types(table)


def table_from_json_rows(text: str) -> Table | None:
    """A JSON array of objects as a table of text (one column per key), else None."""
    stripped = (text or "").strip()
    if not stripped.startswith("["):
        return None
    try:
        rows = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    if not rows or not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None
    headers = list(dict.fromkeys(k for r in rows for k in r))
    return Table(headers=[str(h) for h in headers], rows=[[_json_cell(r.get(h)) for h in headers] for r in rows])


def _json_cell(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def table_from_delimited_text(text: str) -> Table | None:
    """Text that reads as CSV, TSV or semicolon-separated rows (the header line's delimiter, nine rows in ten of
    its width) as a table of text, else None."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    delimiter = next((d for d in ("\t", ",", ";") if d in lines[0]), None)
    if delimiter is None:
        return None
    _allow_fields_of(len(text))
    rows = list(csv.reader(lines, delimiter=delimiter))
    width = len(rows[0])
    if width < 2 or sum(len(r) == width for r in rows) < 0.9 * len(rows):
        return None
    return Table(
        headers=[h.strip() for h in rows[0]], rows=[[c.strip() for c in (r + [""] * width)[:width]] for r in rows[1:]]
    )


SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")  # a pipe table's second line
COLUMNS_LINE = re.compile(r"^Columns:\s*(.+)$")


def parse_markdown_tables(text: str) -> list[Table]:
    """Every pipe table in a markdown text, typed (types given by a `Columns:` line above it are kept)."""
    lines = text.splitlines()
    tables, i, declared = [], 0, None
    while i < len(lines):
        line = lines[i].strip()
        match = COLUMNS_LINE.match(line)
        if match:
            declared = re.findall(r"\((integer|number|boolean|date|text)\)", match.group(1))
        if "|" in line and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1].strip()):
            header = split_row(line)
            body, j = [], i + 2
            while j < len(lines) and lines[j].strip() and "|" in lines[j]:
                body.append(split_row(lines[j]))
                j += 1
            table = table_from_rows([header, *body], _heading_before(lines, i) or "")
            if declared and len(declared) == len(table.headers):
                table = infer_types(table, declared)
            tables.append(table)
            declared, i = None, j
            continue
        i += 1
    return tables


def split_row(line: str) -> list[str]:
    """The cells of one pipe-table row (`\\|` is a bar inside a cell)."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)]


def _heading_before(lines: list[str], i: int) -> str | None:
    for j in range(i - 1, max(-1, i - 4), -1):
        match = re.match(r"^#{1,6}\s+(.+)$", lines[j].strip())
        if match:
            return match.group(1).strip()
    return None


BULLET = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.+)$")


def parse_list(text: str) -> list[ListItem]:
    """The items of the markdown lists in a text, nested by indentation."""
    roots: list[ListItem] = []
    stack: list[tuple[int, ListItem]] = []
    for line in text.splitlines():
        match = BULLET.match(line.expandtabs(4))
        if not match:
            continue
        indent, body = len(match.group(1)), match.group(2).strip()
        item = ListItem(text=body)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(item)
        stack.append((indent, item))
    return roots


# ---- column types (stored content) -----------------------------------------------------------------------------------


def infer_types(table: Table, declared: list[str] | None = None) -> Table:
    """Each column's type (the narrowest that fits every non-empty value) and values converted to it."""
    types = declared or [_column_type([row[c] for row in table.rows]) for c in range(len(table.headers))]
    rows = [[_convert(row[c], types[c]) for c in range(len(types))] for row in table.rows]
    return replace(table, rows=rows, types=types)


def _column_type(values: list[Any]) -> str:
    present = [v for v in values if v is not None and _cell_text(v) != ""]
    if not present:
        return "text"
    for kind in ("boolean", "integer", "number", "date"):
        if all(_fits(v, kind) for v in present):
            return kind
    return "text"


def _fits(value: Any, kind: str) -> bool:
    if kind == "boolean":
        return isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false"))
    if isinstance(value, bool):
        return False
    if kind == "integer":
        if isinstance(value, str):
            return bool(re.fullmatch(r"[-+]?\d{1,18}", value.strip().replace(",", "")))
        return isinstance(value, int)
    if kind == "number":
        if isinstance(value, int | float):
            return True
        return isinstance(value, str) and _number(value) is not None
    if kind == "date":
        return isinstance(value, dt.date) or (isinstance(value, str) and _date(value) is not None)
    return True


def _convert(value: Any, kind: str) -> Any:
    if value is None or _cell_text(value) == "":
        return None
    if kind == "boolean":
        return value if isinstance(value, bool) else value.strip().lower() == "true"
    if kind == "integer":
        return value if isinstance(value, int) else int(str(value).strip().replace(",", ""))
    if kind == "number":
        return value if isinstance(value, int | float) else _number(str(value))
    if kind == "date":
        if isinstance(value, dt.datetime):
            return value.date().isoformat() if value.time() == dt.time() else value.isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
        return _date(str(value))
    return _cell_text(value)


def _number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "")
    if re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", cleaned):
        return float(cleaned)
    return None


def _date(text: str) -> str | None:
    text = text.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return dt.date.fromisoformat(text).isoformat()
        except ValueError:
            return None
    return None


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return " ".join(str(value).split())


# ---- cells as shown --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Typed:
    """A cell as what it says: `kind` is empty, int, float, percent, currency, date, datetime or text."""

    value: object
    kind: str
    symbol: str = ""


_NUMBER = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_PLAIN_NUMBER = re.compile(rf"^(?P<sign>[-+\u2212]?)(?P<n>{_NUMBER})$")
_PERCENT = re.compile(rf"^(?P<sign>[-+\u2212]?)(?P<n>{_NUMBER})\s?%$")
_CURRENCY = re.compile(
    r"^(?P<sign>[-+\u2212]?)(?P<sym>[$€£¥])\s?(?P<rest>[-\u2212]?[\d.].*)$|^(?P<rest2>[-+\u2212]?[\d.].*?)\s?(?P<sym2>[€£])$"
)
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?$")
_DATE_FORMATS = ("%Y/%m/%d", "%d %b %Y", "%d %B %Y", "%b %d, %Y", "%B %d, %Y", "%b %d %Y", "%B %d %Y")
# strptime is slow: only text shaped like one of the formats above is tried with them.
_DATE_SHAPE = re.compile(r"^(\d{4}/\d{1,2}/\d{1,2}|\d{1,2} [A-Za-z]{3,9} \d{4}|[A-Za-z]{3,9} \d{1,2},? \d{4})$")
MAX_EXACT_DIGITS = 15  # beyond this a spreadsheet number loses digits: keep such values (ids, phone numbers) as text


@lru_cache(maxsize=8192)
def typed_value(text: str) -> Typed:
    s = (text or "").strip()
    if not s:
        return Typed(None, "empty")
    negative_parens = s.startswith("(") and s.endswith(")")
    core = s[1:-1].strip() if negative_parens else s
    if m := _PERCENT.match(core):
        return Typed(_signed(m.group("sign"), m.group("n"), negative_parens) / 100, "percent")
    if (m := _CURRENCY.match(core)) and (amount := _PLAIN_NUMBER.match(m.group("rest") or m.group("rest2"))):
        value = _signed(amount.group("sign"), amount.group("n"), negative_parens)
        return Typed(
            -value if m.group("sign") in ("-", "\u2212") else value, "currency", m.group("sym") or m.group("sym2")
        )
    if m := _PLAIN_NUMBER.match(core):
        digits = m.group("n").replace(",", "")
        if (len(digits) > 1 and digits[0] == "0" and digits[1] != ".") or len(
            digits.replace(".", "")
        ) > MAX_EXACT_DIGITS:
            return Typed(s, "text")  # leading zeros or too many digits: an identifier, not a quantity
        value = _signed(m.group("sign"), m.group("n"), negative_parens)
        return Typed(int(value), "int") if "." not in digits else Typed(value, "float")
    if negative_parens:
        return Typed(s, "text")
    if _ISO_DATE.match(s):
        try:
            parsed = dt.datetime.fromisoformat(s)
        except ValueError:
            return Typed(s, "text")
        return Typed(parsed.date(), "date") if len(s) == 10 else Typed(parsed, "datetime")
    if not _DATE_SHAPE.match(s):
        return Typed(s, "text")
    for fmt in _DATE_FORMATS:
        try:
            return Typed(dt.datetime.strptime(s, fmt).date(), "date")
        except ValueError:
            continue
    return Typed(s, "text")


def _signed(sign: str, number: str, negative_parens: bool) -> float:
    value = float(number.replace(",", ""))
    return -value if sign in ("-", "\u2212") or negative_parens else value


_TOTAL_ROW = re.compile(r"^\W*(grand\s+)?totals?\b", re.IGNORECASE)


def column_kinds(table: Table) -> list[str]:
    """What each column holds: number, currency, percent, year, date or text (ignoring a total row)."""
    rows = data_rows(table)
    kinds = []
    for c, header in enumerate(table.headers):
        cells = [typed_value(r[c]) for r in rows if c < len(r)]
        seen = {t.kind for t in cells if t.kind != "empty"}
        if not seen:
            kinds.append("text")
        elif seen <= {"int"} and _looks_like_years(header, [t.value for t in cells if t.kind == "int"], c):
            kinds.append("year")
        elif seen <= {"int", "float"}:
            kinds.append("number")
        elif seen <= {"currency", "int", "float"} and "currency" in seen:
            kinds.append("currency")
        elif seen == {"percent"}:
            kinds.append("percent")
        elif seen <= {"date", "datetime"}:
            kinds.append("date")
        else:
            kinds.append("text")
    return kinds


def _looks_like_years(header: str, values: list[object], column: int) -> bool:
    in_range = all(1800 <= int(v) <= 2100 for v in values)  # type: ignore[call-overload]
    return in_range and (column == 0 or bool(re.search(r"\b(year|fy)\b", header, re.IGNORECASE)))


def data_rows(table: Table) -> list[list[str]]:
    """The rows without a closing total row."""
    if table.rows and _TOTAL_ROW.match(table.rows[-1][0] if table.rows[-1] else ""):
        return table.rows[:-1]
    return table.rows


def has_total_row(table: Table) -> bool:
    return len(data_rows(table)) != len(table.rows)


# ---- writing ---------------------------------------------------------------------------------------------------------


def render_table(table: Table, with_types: bool = True) -> str:
    lines = []
    if table.caption:
        lines += [f"### {table.caption}", ""]
    if with_types and table.types:
        lines += ["Columns: " + ", ".join(f"{c} ({t})" for c, t in zip(table.headers, table.types, strict=True)), ""]
    lines.append("| " + " | ".join(_escape(c) for c in table.headers) + " |")
    aligns = ["---:" if t in ("integer", "number") else "---" for t in (table.types or ["text"] * len(table.headers))]
    lines.append("| " + " | ".join(aligns) + " |")
    for row in table.rows:
        lines.append("| " + " | ".join(_escape(_render_value(v)) for v in row) + " |")
    if table.truncated_rows:
        lines += ["", f"[{table.truncated_rows} more rows not shown]"]
    return "\n".join(lines)


def render_list(items: list[ListItem], depth: int = 0) -> str:
    lines = []
    for item in items:
        lines.append("  " * depth + f"- {item.text}")
        if item.children:
            lines.append(render_list(item.children, depth + 1))
    return "\n".join(lines)


def _render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:g}" if abs(value) < 1e15 else str(value)
    return _cell_text(value)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
