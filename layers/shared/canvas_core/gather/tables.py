"""Tables and lists as data: read from CSV, XLSX, markdown tables and markdown lists; typed; and written back
as the markdown a node's content holds (a table under a `Columns:` line naming each column's type, so a
downstream block can read the types back with `parse_markdown_tables`)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from dataclasses import dataclass, field
from typing import Any

MAX_ROWS = 1000
MAX_COLUMNS = 50
TYPES = ("integer", "number", "boolean", "date", "text")


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Any]]
    types: list[str] = field(default_factory=list)
    title: str | None = None
    truncated_rows: int = 0  # rows left out past MAX_ROWS


@dataclass
class ListItem:
    text: str
    children: list[ListItem] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- reading


def table_from_csv(text: str, title: str | None = None) -> Table:
    sample = text[:8192]
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = [row for row in csv.reader(io.StringIO(text), dialect) if any(cell.strip() for cell in row)]
    return table_from_rows(rows, title)


def tables_from_xlsx(data: bytes) -> list[Table]:
    """One table per non-empty sheet (values, not formulas), each capped at MAX_ROWS and MAX_COLUMNS."""
    from openpyxl import load_workbook

    workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        tables = []
        for sheet in workbook.worksheets:
            rows, extra = [], 0
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


def table_from_rows(rows: list[list[Any]], title: str | None = None) -> Table:
    """A typed table whose first row is the header."""
    if not rows:
        return Table(columns=[], rows=[], title=title)
    width = min(max(len(r) for r in rows), MAX_COLUMNS)
    header = [_cell_text(c) for c in rows[0][:width]] + [""] * (width - len(rows[0][:width]))
    columns = [h or f"Column {i + 1}" for i, h in enumerate(header)]
    body = [list(r[:width]) + [None] * (width - len(r[:width])) for r in rows[1:]]
    table = Table(columns=columns, rows=body[:MAX_ROWS], title=title, truncated_rows=max(0, len(body) - MAX_ROWS))
    return infer_types(table)


SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
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
            header = _split_row(line)
            body, j = [], i + 2
            while j < len(lines) and lines[j].strip() and "|" in lines[j]:
                body.append(_split_row(lines[j]))
                j += 1
            title = _heading_before(lines, i)
            table = table_from_rows([header, *body], title)
            if declared and len(declared) == len(table.columns):
                table = infer_types(table, declared)
            tables.append(table)
            declared, i = None, j
            continue
        i += 1
    return tables


def _split_row(line: str) -> list[str]:
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


# ---------------------------------------------------------------------------------------------- types


def infer_types(table: Table, declared: list[str] | None = None) -> Table:
    """Each column's type (the narrowest that fits every non-empty value) and values converted to it."""
    types = declared or [_column_type([row[c] for row in table.rows]) for c in range(len(table.columns))]
    rows = [[_convert(row[c], types[c]) for c in range(len(types))] for row in table.rows]
    return Table(columns=table.columns, rows=rows, types=types, title=table.title, truncated_rows=table.truncated_rows)


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


# ---------------------------------------------------------------------------------------------- writing


def render_table(table: Table, with_types: bool = True) -> str:
    lines = []
    if table.title:
        lines += [f"### {table.title}", ""]
    if with_types and table.types:
        lines += ["Columns: " + ", ".join(f"{c} ({t})" for c, t in zip(table.columns, table.types, strict=True)), ""]
    lines.append("| " + " | ".join(_escape(c) for c in table.columns) + " |")
    aligns = ["---:" if t in ("integer", "number") else "---" for t in (table.types or ["text"] * len(table.columns))]
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
