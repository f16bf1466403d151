"""The analytical engine: DuckDB, in-process. A table (an uploaded CSV, XLSX sheet or Parquet file, or rows a
block gathered) is loaded whole into a connection of its own (`Dataset`), and a checked plan (plan.py) is run
over it as SQL the code writes (never SQL a model wrote): totals, a breakdown per dimension with shares, a
cross breakdown, a series per period with growth, top and bottom N. Every identifier is quoted and every value
is a parameter. DuckDB is imported only here, when a table is loaded."""

from __future__ import annotations

import datetime as dt
import io
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from canvas_core.analysis.plan import AnalysisPlan, Column, Measure

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

EXCEL_MAX_ROWS = 1_048_575  # a sheet's rows below its header row
PERIOD_TEXT = re.compile(r"^(\d{4}-(0[1-9]|1[0-2])|\d{4}-?Q[1-4]|\d{4}-W\d{2}|\d{4})$", re.IGNORECASE)
PERIOD_NAME = re.compile(r"\b(date|day|week|month|quarter|year|period|time|fy)\b", re.IGNORECASE)
NUMBER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                "UBIGINT", "FLOAT", "DOUBLE", "REAL")  # fmt: skip
MAX_CELLS_SAMPLED = 5
# Amounts written as text: a sign, a currency symbol before or after, thousands separated by commas.
AMOUNT_TEXT = r"^\s*[-+]?\s*[$€£¥]?\s*-?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?\s*[$€£¥]?\s*$"
CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")  # fmt: skip


class AnalysisError(Exception):
    """The table cannot be loaded or the plan cannot run; the message says why."""


@dataclass
class ResultTable:
    """One computed table: `labels` leading columns name the rows, the rest are figures; `formats` says how each
    figure is shown (number, percent)."""

    caption: str
    kind: str  # totals, breakdown, cross, series, ranking
    headers: list[str]
    rows: list[list[Any]]
    labels: int = 1
    formats: list[str] = field(default_factory=list)


@dataclass
class Dataset:
    """A table loaded into DuckDB: its name (the file it came from), columns and row count."""

    name: str
    connection: DuckDBPyConnection
    columns: list[Column]
    rows: int
    origin: str = ""  # the block whose content held the rows, when they were not read from a file
    # Each text column's distinct values, read once when a question is matched against them (questions.py).
    values_read: dict[str, list[str]] | None = None

    def sample(self, count: int = MAX_CELLS_SAMPLED) -> list[list[Any]]:
        return [list(r) for r in self.connection.execute(f"SELECT * FROM data LIMIT {int(count)}").fetchall()]

    def iter_rows(self, limit: int = EXCEL_MAX_ROWS, batch: int = 10_000) -> Iterator[list[Any]]:
        """Every row in the file's order (up to `limit`), fetched in batches."""
        cursor = self.connection.execute(f"SELECT * FROM data LIMIT {int(limit)}")
        while chunk := cursor.fetchmany(batch):
            for row in chunk:
                yield list(row)

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


# ---- loading ---------------------------------------------------------------------------------------------------------


def load_file(name: str, extension: str, data: bytes) -> list[Dataset]:
    """The tables of an uploaded file: a CSV or TSV, each sheet of an XLSX, a Parquet file."""
    extension = extension.lower()
    if extension in ("csv", "tsv"):
        return [_load_path(name, data, "read_csv", "sample_size=-1, header=true")]
    if extension == "parquet":
        return [_load_path(name, data, "read_parquet", "")]
    if extension == "xlsx":
        return _load_xlsx(name, data)
    raise AnalysisError(f"{name}: .{extension} files hold no table the analysis reads")


def load_rows(name: str, headers: list[str], rows: list[list[Any]]) -> Dataset:
    """Rows already read (a table in a block's content), typed by DuckDB from their values."""

    connection = _connect()
    names = _unique_names(headers)
    types = [_column_type([r[c] if c < len(r) else None for r in rows]) for c in range(len(names))]
    columns_sql = ", ".join(f"{quote(n)} {t}" for n, t in zip(names, types, strict=True))
    connection.execute(f"CREATE TABLE data ({columns_sql})")
    if rows:
        marks = ", ".join("?" for _ in names)
        values = [[_cell(r[c] if c < len(r) else None, types[c]) for c in range(len(names))] for r in rows]
        connection.executemany(f"INSERT INTO data VALUES ({marks})", values)
    return _described(name, connection)


def _connect() -> DuckDBPyConnection:
    """An in-memory database of its own, held to two threads and 256 MB: uploads are at most a few MB, and the
    embedded stack runs many blocks in one process."""
    import duckdb

    return duckdb.connect(config={"threads": 2, "memory_limit": "256MB"})


def _load_path(name: str, data: bytes, reader: str, options: str) -> Dataset:
    import duckdb

    connection = _connect()
    # DuckDB reads files by path (a Python file object needs fsspec): the upload goes to a private temp file.
    handle, path = tempfile.mkstemp(suffix="." + reader.removeprefix("read_"))
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        arguments = f"?, {options}" if options else "?"
        connection.execute(f"CREATE TABLE data AS SELECT * FROM {reader}({arguments})", [path])
    except duckdb.Error as exc:
        raise AnalysisError(f"{name} could not be read as a table: {str(exc).splitlines()[0]}") from exc
    finally:
        os.unlink(path)
    return _described(name, connection)


def _load_xlsx(name: str, data: bytes) -> list[Dataset]:
    """Each sheet's values (openpyxl, streaming; DuckDB's own Excel reader is an extension it would download),
    its first non-empty row the header."""
    from openpyxl import load_workbook

    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds on a broken workbook
        raise AnalysisError(f"{name} could not be read as an Excel workbook ({type(exc).__name__})") from exc
    found = []
    try:
        for sheet in book.worksheets:
            rows = [list(r) for r in sheet.iter_rows(values_only=True) if any(c not in (None, "") for c in r)]
            if len(rows) >= 2:
                headers = [str(h) if h not in (None, "") else f"Column {n + 1}" for n, h in enumerate(rows[0])]
                found.append(load_rows(f"{name}, sheet {sheet.title}", headers, rows[1:]))
    finally:
        book.close()
    return found


def described_again(dataset: Dataset) -> None:
    """A dataset's columns and row count read again after its rows changed (its kinds kept)."""
    kinds = {c.name: c for c in dataset.columns}
    count = dataset.connection.execute("SELECT count(*) FROM data").fetchone()
    dataset.rows = int(count[0]) if count else 0
    columns = []
    for column in dataset.columns:
        row = dataset.connection.execute(f"SELECT count(DISTINCT {quote(column.name)}) FROM data").fetchone()
        columns.append(Column(column.name, kinds[column.name].kind, int(row[0]) if row else 0, column.unit))
    dataset.columns = columns
    dataset.values_read = None


def _described(name: str, connection: DuckDBPyConnection) -> Dataset:
    described = connection.execute("DESCRIBE data").fetchall()
    count = connection.execute("SELECT count(*) FROM data").fetchone()
    columns = []
    for row in described:
        column, sql_type = str(row[0]), str(row[1]).upper()
        unit = _amounts_as_numbers(connection, column) if sql_type == "VARCHAR" else ""
        if unit is not None:
            sql_type = "DOUBLE" if sql_type == "VARCHAR" else sql_type
        elif _dates_as_dates(connection, column):
            sql_type, unit = "DATE", ""
        distinct_row = connection.execute(f"SELECT count(DISTINCT {quote(column)}) FROM data").fetchone()
        distinct = int(distinct_row[0]) if distinct_row else 0
        columns.append(Column(column, _kind(connection, column, sql_type), distinct, unit or ""))
    return Dataset(name=name, connection=connection, columns=columns, rows=int(count[0]) if count else 0)


def _amounts_as_numbers(connection: DuckDBPyConnection, column: str) -> str | None:
    """A text column whose every value is an amount (`$1,200.50`, `1,234`, `12 €`) made a column of numbers;
    its currency (when the cells name one) is returned, None when the column is not amounts."""
    name = quote(column)
    row = connection.execute(
        f"SELECT count(*) FILTER (WHERE {name} IS NOT NULL AND trim({name}) <> ''), "
        f"count(*) FILTER (WHERE regexp_matches({name}, ?)), "
        f"string_agg(DISTINCT regexp_extract({name}, '[$€£¥]'), ''), "
        f"count(*) FILTER (WHERE regexp_matches({name}, '^\\s*0\\d')) FROM data",
        [AMOUNT_TEXT],
    ).fetchone()
    if row is None or not row[0] or row[0] != row[1] or row[3]:
        return None  # not all amounts, or codes with leading zeros (`01234`): text
    symbols = set(row[2] or "")
    connection.execute(
        f"ALTER TABLE data ALTER {name} TYPE DOUBLE USING "
        f"CAST(nullif(regexp_replace({name}, '[^0-9.\\-]', '', 'g'), '') AS DOUBLE)"
    )
    return CURRENCY_SYMBOLS.get(symbols.pop(), "") if len(symbols) == 1 else ""


# Dates written as text, in the formats people type; a column whose every value reads as a date in one of them (the
# formats may differ from row to row) becomes a column of dates. Day-first is tried before month-first.
DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%d/%m/%Y", "%m/%d/%Y", "%d.%m.%Y", "%d-%m-%Y", "%d %B %Y", "%d %b %Y",
                "%B %d, %Y", "%b %d, %Y", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")  # fmt: skip


def _dates_as_dates(connection: DuckDBPyConnection, column: str) -> bool:
    """Whether a text column held dates only (in one or several formats); if so it is made a DATE column."""
    name = quote(column)
    parsed = "coalesce(" + ", ".join(f"try_strptime(trim({name}), '{f}')" for f in DATE_FORMATS) + ")"
    row = connection.execute(
        f"SELECT count(*) FILTER (WHERE {name} IS NOT NULL AND trim({name}) <> ''), "
        f"count(*) FILTER (WHERE {parsed} IS NOT NULL) FROM data"
    ).fetchone()
    if row is None or not row[0] or row[0] != row[1]:
        return False
    connection.execute(f"ALTER TABLE data ALTER {name} TYPE DATE USING CAST({parsed} AS DATE)")
    return True


def month_number(value: object) -> int | None:
    """1-12 for a month's name or its first three letters, else None."""
    text = str(value).strip().lower().rstrip(".")
    return next((n for n, m in enumerate(MONTHS, start=1) if len(text) >= 3 and m.startswith(text)), None)


def _kind(connection: DuckDBPyConnection, column: str, sql_type: str) -> str:
    if sql_type.startswith(NUMBER_TYPES) or sql_type.startswith("DECIMAL"):
        return "period" if PERIOD_NAME.search(column) and _all_years(connection, column) else "number"
    if sql_type.startswith(("DATE", "TIMESTAMP")):
        return "date"
    values = [str(r[0]) for r in connection.execute(f"SELECT DISTINCT {quote(column)} FROM data LIMIT 200").fetchall()]
    present = [v for v in values if v not in ("None", "")]
    if present and all(PERIOD_TEXT.match(v.strip()) for v in present) and PERIOD_NAME.search(column):
        return "period"
    if len(present) >= 2 and all(month_number(v) for v in present):
        return "period"  # month names, ordered by the calendar (`_series`)
    return "text"


def _all_years(connection: DuckDBPyConnection, column: str) -> bool:
    row = connection.execute(f"SELECT min({quote(column)}), max({quote(column)}) FROM data").fetchone()
    return row is not None and row[0] is not None and float(row[0]) >= 1800 and float(row[1]) <= 2100


def _column_type(values: list[Any]) -> str:
    present = [v for v in values if v not in (None, "")]
    if present and all(isinstance(v, bool) for v in present):
        return "BOOLEAN"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "BIGINT"
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "DOUBLE"
    if present and all(isinstance(v, dt.date) for v in present):
        return "DATE" if not any(isinstance(v, dt.datetime) for v in present) else "TIMESTAMP"
    return "VARCHAR"


def _cell(value: Any, sql_type: str) -> Any:
    if value in (None, ""):
        return None
    return str(value) if sql_type == "VARCHAR" else value


def _unique_names(headers: list[str]) -> list[str]:
    names: list[str] = []
    for n, header in enumerate(headers):
        base = " ".join(str(header).split()) or f"Column {n + 1}"
        candidate, k = base, 2
        while candidate.lower() in (x.lower() for x in names):
            candidate, k = f"{base} ({k})", k + 1
        names.append(candidate)
    return names


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


# ---- running a plan --------------------------------------------------------------------------------------------------


def run_plan(dataset: Dataset, plan: AnalysisPlan) -> list[ResultTable]:
    """The result tables of a checked plan: totals, then per dimension a breakdown (its shares of the first
    measure's total), the cross breakdown, the series per period (with growth on the one before), and the top and
    bottom N of the first dimension. AnalysisError when the engine refuses a query (the plan was checked, so
    this is a table the engine reads but cannot compute over)."""
    import duckdb

    try:
        return _results(dataset, plan)
    except duckdb.Error as exc:
        raise AnalysisError(f"{dataset.name} could not be analysed: {str(exc).splitlines()[0]}") from exc


def _results(dataset: Dataset, plan: AnalysisPlan) -> list[ResultTable]:
    results = [_totals(dataset, plan.measures)]
    for dimension in plan.dimensions:
        results.append(_breakdown(dataset, plan.measures, [dimension]))
    if plan.cross and len(plan.dimensions) >= 2:
        results.append(_breakdown(dataset, plan.measures[:1], plan.dimensions[:2]))
    if plan.period is not None:
        results.append(_series(dataset, plan))
    if plan.dimensions:
        ranking = _ranking(dataset, plan.measures[0], plan.dimensions[0], plan.top_n)
        if ranking is not None:
            results.append(ranking)
    return results


def _aggregate(measure: Measure) -> str:
    if measure.aggregate == "count":
        return "count(*)"
    function = "sum" if measure.aggregate == "sum" else "avg"
    return f"{function}({quote(measure.column)})"


def measure_label(measure: Measure) -> str:
    return measure.column if measure.adds_up else f"{measure.column} (average)"


def _totals(dataset: Dataset, measures: list[Measure]) -> ResultTable:
    row = dataset.connection.execute(
        f"SELECT count(*), {', '.join(_aggregate(m) for m in measures)} FROM data"
    ).fetchone()
    values = list(row) if row else [0, *([None] * len(measures))]
    return ResultTable(
        caption="Totals",
        kind="totals",
        headers=["Rows", *(measure_label(m) for m in measures)],
        rows=[[plain(v) for v in values]],
        labels=0,
        formats=["number"] * (len(measures) + 1),
    )


def _breakdown(dataset: Dataset, measures: list[Measure], dimensions: list[str]) -> ResultTable:
    """One row per value (or pair of values) of the dimensions, largest first by the first measure, with its
    share of that measure's total when the measure adds up."""
    keys = ", ".join(quote(d) for d in dimensions)
    first = measures[0]
    share = first.adds_up
    share_sql = f", {_aggregate(first)} / nullif(sum({_aggregate(first)}) OVER (), 0)" if share else ""
    rows = dataset.connection.execute(
        f"SELECT {keys}, {', '.join(_aggregate(m) for m in measures)}{share_sql} FROM data "
        f"GROUP BY {keys} ORDER BY {len(dimensions) + 1} DESC NULLS LAST, {keys}"
    ).fetchall()
    headers = [*dimensions, *(measure_label(m) for m in measures)] + ([f"Share of {first.column}"] if share else [])
    return ResultTable(
        caption=f"{first.column.capitalize()} by {' and '.join(dimensions)}",
        kind="cross" if len(dimensions) > 1 else "breakdown",
        headers=headers,
        rows=[[label_of(v) for v in r[: len(dimensions)]] + [plain(v) for v in r[len(dimensions) :]] for r in rows],
        labels=len(dimensions),
        formats=["number"] * len(measures) + (["percent"] if share else []),
    )


GRAIN_SQL = {"day": "day", "week": "week", "month": "month", "quarter": "quarter", "year": "year"}


def _series(dataset: Dataset, plan: AnalysisPlan) -> ResultTable:
    """The measures per period, in time order, and the first measure's growth on the period before."""
    assert plan.period is not None
    column = dataset.column(plan.period)
    key = quote(plan.period)
    if column is not None and column.kind == "date" and plan.grain != "value":
        key = f"CAST(date_trunc('{GRAIN_SQL[plan.grain]}', {key}) AS DATE)"
    aggregates = ", ".join(_aggregate(m) for m in plan.measures)
    rows = dataset.connection.execute(
        f"SELECT {key} AS period, {aggregates} FROM data WHERE {quote(plan.period)} IS NOT NULL "
        "GROUP BY period ORDER BY period"
    ).fetchall()
    if rows and all(month_number(r[0]) for r in rows):
        rows.sort(key=lambda r: month_number(r[0]) or 0)
    out = []
    previous: float | None = None
    for row in rows:
        value = row[1]
        growth = (value - previous) / previous if previous not in (None, 0) and value is not None else None
        out.append([_period_label(row[0], plan.grain), *(plain(v) for v in row[1:]), growth])
        previous = value
    first = plan.measures[0]
    grouped = column is not None and column.kind == "date" and plan.grain != "value"
    period = plan.grain if grouped else plan.period  # `month`, not `order_date`, for its months
    return ResultTable(
        caption=f"{first.column.capitalize()} per {period}",
        kind="series",
        headers=[period, *(measure_label(m) for m in plan.measures), f"Growth of {first.column}"],
        rows=out,
        formats=["number"] * len(plan.measures) + ["percent"],
    )


def _ranking(dataset: Dataset, measure: Measure, dimension: str, top_n: int) -> ResultTable | None:
    """The top and the bottom `top_n` of a dimension by the measure; None when it has no more values than that
    (the breakdown already shows them all in order)."""
    column = dataset.column(dimension)
    if column is None or column.distinct <= top_n * 2:
        return None
    rows = dataset.connection.execute(
        f"SELECT {quote(dimension)}, {_aggregate(measure)} AS v FROM data GROUP BY 1 ORDER BY v DESC NULLS LAST"
    ).fetchall()
    top = [["Top", n + 1, label_of(r[0]), plain(r[1])] for n, r in enumerate(rows[:top_n])]
    bottom = [["Bottom", len(rows) - n, label_of(r[0]), plain(r[1])] for n, r in enumerate(rows[::-1][:top_n])]
    return ResultTable(
        caption=f"Top and bottom {top_n} {dimension} by {measure.column}",
        kind="ranking",
        headers=["Group", "Rank", dimension, measure_label(measure)],
        rows=top + bottom,
        labels=3,
        formats=["number"],
    )


def plain(value: Any) -> Any:
    """A figure as a plain Python number (DuckDB gives Decimal for some sums)."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return round(value, 6)  # sums of doubles carry noise past the sixth decimal
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number


def label_of(value: Any) -> str:
    if value is None:
        return "(blank)"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _period_label(value: Any, grain: str) -> str:
    if isinstance(value, dt.date):
        if grain == "month":
            return value.strftime("%Y-%m")
        if grain == "quarter":
            return f"{value.year}-Q{(value.month - 1) // 3 + 1}"
        if grain == "year":
            return str(value.year)
    return label_of(value)
