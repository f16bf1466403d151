"""One question as a typed query, and the SQL that answers it.

An `AnalysisQuery` says what an analyst asks of one table: a measure and its aggregate (sum, mean, median, a
percentile, min, max, a count of rows or of distinct values, a share of the total), grouped by up to two
dimensions and a time grain, filtered (values of a dimension, a date range, a numeric comparison), compared (one
period against another, per group: absolute and percent change) and ranked (top or bottom N, overall or within
each group). The rules (questions.py) or a model fill it; `run_query` checks it against the table's columns and
computes it in DuckDB with SQL written here: identifiers quoted, every value a bound parameter.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from canvas_core.analysis.engine import AnalysisError, Dataset, quote
from canvas_core.analysis.plan import Column

Aggregate = Literal["sum", "mean", "median", "percentile", "min", "max", "count", "count_distinct", "share"]
Grain = Literal["year", "quarter", "month", "week", "day"]
Operator = Literal["in", "not_in", "gt", "ge", "lt", "le"]
OPERATOR_SQL = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
OPERATOR_WORDS = {"gt": "above", "ge": "of at least", "lt": "below", "le": "of at most"}
AGGREGATE_WORDS = {
    "sum": "total",
    "mean": "average",
    "median": "median",
    "min": "lowest",
    "max": "highest",
    "count": "number of",
    "count_distinct": "number of different",
    "share": "share of",
}
MAX_RANKED = 50  # a ranking of this many is an ordering of every group


class Measure(BaseModel):
    """What is computed: an aggregate of a column (no column: the rows are counted)."""

    aggregate: Aggregate = "sum"
    column: str | None = None
    percentile: float | None = Field(default=None, gt=0, lt=100)  # with aggregate `percentile`


class Filter(BaseModel):
    """Rows kept: a dimension's values (`in`, `not_in`) or a number compared (`gt`, `ge`, `lt`, `le`)."""

    column: str
    operator: Operator = "in"
    values: list[str | float] = Field(min_length=1, max_length=20)


class Period(BaseModel):
    """A date range, `start` included and `end` excluded, with the words a reader knows it by (`2025`, `Q3 2025`)."""

    start: dt.date
    end: dt.date
    label: str


class Comparison(BaseModel):
    """The measure in `current` against `previous`, per group: the change and the percent change."""

    current: Period
    previous: Period


class Ranking(BaseModel):
    """The top (or bottom) `count` groups, of all groups or of each value of `within`."""

    order: Literal["top", "bottom"] = "top"
    count: int = Field(default=1, ge=1, le=MAX_RANKED)
    within: str | None = None  # a dimension: rank the other dimension's groups inside each of its values
    by_change: bool = False  # rank a comparison by its percent change rather than the current value


class AnalysisQuery(BaseModel):
    """One question of one table."""

    table: str
    measure: Measure
    dimensions: list[str] = Field(default_factory=list, max_length=2)
    date_column: str | None = None
    grain: Grain | None = None  # the date column, grouped by this, as one more dimension
    # The aggregate taken over each period's total ("the average monthly revenue", "the median covers per day"),
    # not over single rows.
    per: Grain | None = None
    change: bool = False  # with a grain: each period's change on the one before ("quarter over quarter")
    filters: list[Filter] = Field(default_factory=list)
    period: Period | None = None  # rows of this date range only
    compare: Comparison | None = None
    rank: Ranking | None = None
    share_of: Filter | None = None  # with aggregate `share`: the part whose share of the whole is asked

    def describe(self) -> str:
        """The query in words, as the 'How this was computed' line shows it."""
        parts = [measure_phrase(self.measure) + (f" per {self.per}" if self.per else "")]
        if self.dimensions or self.grain:
            parts.append("by " + " and ".join([*self.dimensions, *([self.grain] if self.grain else [])]))
        parts += [filter_phrase(f) for f in self.filters]
        if self.share_of is not None:
            parts.append("for " + filter_phrase(self.share_of).removeprefix("in "))
        if self.change:
            parts.append(f"each {self.grain} against the one before")
        if self.period is not None:
            parts.append(period_phrase(self.period))
        if self.compare is not None:
            parts.append(f"{self.compare.current.label} against {self.compare.previous.label}")
        if self.rank is not None and self.rank.count < MAX_RANKED:
            within = f" within each {self.rank.within}" if self.rank.within else ""
            parts.append(f"{self.rank.order} {self.rank.count}{within}")
        elif self.rank is not None:
            parts.append("ordered by the change" if self.rank.by_change else f"ordered, {self.rank.order} first")
        return ", ".join(parts) + f" (table {self.table})"


def period_phrase(period: Period) -> str:
    """`in 2025`, `after 2020`, `since Q3 2024`."""
    bounded = period.label.startswith(("after ", "since ", "before ", "up to "))
    return period.label if bounded else f"in {period.label}"


def measure_phrase(measure: Measure) -> str:
    column = measure.column or "rows"
    if measure.aggregate == "percentile":
        return f"{ordinal(measure.percentile or 50)} percentile of {column}"
    if measure.aggregate == "count":
        return "number of rows"
    if measure.aggregate == "count_distinct":
        return f"number of different {column} values"
    return f"{AGGREGATE_WORDS[measure.aggregate]} {column}"


def ordinal(value: float) -> str:
    number = int(value) if float(value).is_integer() else value
    if isinstance(number, float):
        return f"{number}th"
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def filter_phrase(item: Filter) -> str:
    values = " or ".join(_value_text(v) for v in item.values)
    if item.operator == "in":
        return f"in {values}"
    if item.operator == "not_in":
        return f"excluding {values}"
    return f"with {item.column} {OPERATOR_WORDS[item.operator]} {values}"


def _value_text(value: str | float) -> str:
    if isinstance(value, float):
        return f"{int(value):,}" if value.is_integer() else f"{value:,}"
    return str(value)


@dataclass
class QueryResult:
    """A query's answer: `headers` and `rows` (labels first, then figures), and the SQL that computed it."""

    query: AnalysisQuery
    headers: list[str]
    rows: list[list[Any]]
    labels: int
    sql: str
    params: list[Any] = field(default_factory=list)
    rows_used: int = 0  # the table's rows the filters kept
    formats: list[str] = field(default_factory=list)  # per figure: number or percent


# ---- checking ------------------------------------------------------------------------------------------------------


def check_query(query: AnalysisQuery, columns: list[Column]) -> list[str]:
    """What a query names that the table does not have, or has with another kind."""
    by_name = {c.name: c for c in columns}
    problems = []
    measure = query.measure
    if measure.aggregate != "count" and not (measure.aggregate == "share" and measure.column is None):
        column = by_name.get(measure.column or "")
        if column is None:
            problems.append(f"the measure {measure.column!r} is not a column")
        elif measure.aggregate != "count_distinct" and column.kind != "number":
            problems.append(f"the measure {measure.column!r} holds {column.kind}, not numbers")
    if measure.aggregate == "percentile" and measure.percentile is None:
        problems.append("a percentile needs its rank (e.g. 90)")
    for name in query.dimensions:
        if name not in by_name:
            problems.append(f"the dimension {name!r} is not a column")
    for item in [*query.filters, *([query.share_of] if query.share_of else [])]:
        column = by_name.get(item.column)
        if column is None:
            problems.append(f"the filter's column {item.column!r} is not a column")
        elif item.operator in OPERATOR_SQL and column.kind != "number":
            problems.append(f"{item.column!r} holds {column.kind}: it cannot be compared with a number")
    needs_date = query.grain or query.period or query.compare or query.per
    if needs_date:
        column = by_name.get(query.date_column or "")
        if column is None or column.kind not in ("date", "period"):
            problems.append("the question is about a period, and the table has no date column")
    if query.rank and query.rank.within and query.rank.within not in query.dimensions:
        problems.append(f"ranking within {query.rank.within!r} needs it as a dimension")
    if measure.aggregate == "share" and query.share_of is None and not (query.dimensions or query.grain):
        problems.append("a share needs the part it is of")
    return problems


# ---- SQL -----------------------------------------------------------------------------------------------------------


def date_sql(column: Column) -> str:
    """A date or period column as a DATE: text periods (`2025-03`, `2025-Q3`, `2025`) at their first day."""
    name = quote(column.name)
    if column.kind == "date":
        return f"CAST({name} AS DATE)"
    text = f"trim(CAST({name} AS VARCHAR))"
    return (
        f"(CASE WHEN regexp_matches({text}, '^\\d{{4}}-\\d{{2}}$') THEN CAST({text} || '-01' AS DATE) "
        f"WHEN regexp_matches({text}, '^\\d{{4}}-?[Qq][1-4]$') THEN make_date(CAST(left({text}, 4) AS INTEGER), "
        f"CAST(right({text}, 1) AS INTEGER) * 3 - 2, 1) "
        f"WHEN regexp_matches({text}, '^\\d{{4}}(\\.0)?$') "
        f"THEN make_date(CAST(CAST({text} AS DOUBLE) AS INTEGER), 1, 1) "
        "ELSE NULL END)"
    )


def aggregate_sql(measure: Measure, where: str = "") -> str:
    """The SQL of a measure's aggregate, over the rows `where` keeps when given (a FILTER clause)."""
    column = quote(measure.column) if measure.column else ""
    filtered = f" FILTER (WHERE {where})" if where else ""
    match measure.aggregate:
        case "sum" | "share":
            return f"sum({column}){filtered}" if column else f"count(*){filtered}"
        case "mean":
            return f"avg({column}){filtered}"
        case "median":
            return f"median({column}){filtered}"
        case "percentile":
            return f"quantile_cont({column}, {float(measure.percentile or 50) / 100!r}){filtered}"
        case "min":
            return f"min({column}){filtered}"
        case "max":
            return f"max({column}){filtered}"
        case "count":
            return f"count(*){filtered}"
        case "count_distinct":
            return f"count(DISTINCT {column}){filtered}"
    raise AnalysisError(f"unknown aggregate {measure.aggregate}")


def _conditions(query: AnalysisQuery, dataset: Dataset, params: list[Any]) -> list[str]:
    conditions = []
    for item in query.filters:
        conditions.append(filter_sql(item, params))
    if query.period is not None:
        column = dataset.column(query.date_column or "")
        assert column is not None
        conditions.append(f"{date_sql(column)} >= ? AND {date_sql(column)} < ?")
        params += [query.period.start, query.period.end]
    return conditions


def filter_sql(item: Filter, params: list[Any]) -> str:
    name = quote(item.column)
    if item.operator in ("in", "not_in"):
        marks = ", ".join("?" for _ in item.values)
        params += [str(v).lower() for v in item.values]
        negate = "NOT " if item.operator == "not_in" else ""
        return f"lower(CAST({name} AS VARCHAR)) {negate}IN ({marks})"
    params.append(float(item.values[0]))
    return f"{name} {OPERATOR_SQL[item.operator]} ?"


def run_query(dataset: Dataset, query: AnalysisQuery) -> QueryResult:
    """The answer to a checked query; AnalysisError when it names what the table does not hold."""
    import duckdb

    problems = check_query(query, dataset.columns)
    if problems:
        raise AnalysisError("; ".join(problems))
    try:
        if query.compare is not None:
            return _compare(dataset, query)
        if query.per is not None:
            return _per_period(dataset, query)
        return _grouped(dataset, query)
    except duckdb.Error as exc:
        raise AnalysisError(f"the engine refused the query: {str(exc).splitlines()[0]}") from exc


def _keys(dataset: Dataset, query: AnalysisQuery) -> tuple[list[str], list[str]]:
    """The GROUP BY expressions and their headers: the dimensions, then the date by its grain."""
    keys = [quote(d) for d in query.dimensions]
    headers = list(query.dimensions)
    if query.grain is not None:
        column = dataset.column(query.date_column or "")
        assert column is not None
        keys.append(f"date_trunc('{query.grain}', {date_sql(column)})")
        headers.append(query.grain)
    return keys, headers


def _where(conditions: list[str]) -> str:
    return f" WHERE {' AND '.join(f'({c})' for c in conditions)}" if conditions else ""


def _rows_used(dataset: Dataset, query: AnalysisQuery) -> int:
    params: list[Any] = []
    conditions = _conditions(query, dataset, params)
    row = dataset.connection.execute(f"SELECT count(*) FROM data{_where(conditions)}", params).fetchone()
    return int(row[0]) if row else 0


def _grouped(dataset: Dataset, query: AnalysisQuery) -> QueryResult:
    params: list[Any] = []
    conditions = _conditions(query, dataset, params)
    keys, headers = _keys(dataset, query)
    measure = query.measure
    value = aggregate_sql(measure)
    figures = [measure_phrase(measure)]
    formats = ["number"]
    if measure.aggregate == "share" and query.share_of is not None:
        # The part's share of the whole, then the part and the whole: each FILTER's values bound in the order they
        # appear, before the WHERE clause's.
        select_params: list[Any] = []
        part = aggregate_sql(measure, filter_sql(query.share_of, select_params))
        whole = aggregate_sql(measure)
        part_again = aggregate_sql(measure, filter_sql(query.share_of, select_params))
        select = f"{part} / nullif({whole}, 0) AS v, {part_again}, {whole}"
        params = select_params + params
        column = measure.column or "rows"
        figures = [f"share of {column}", f"{column} of the part", f"{column} in all"]
        formats = ["percent", "number", "number"]
    elif measure.aggregate == "share":
        select = f"{value} AS a, {value} / nullif(sum({value}) OVER (), 0) AS v"
        figures = [measure.column or "rows", f"share of {measure.column or 'rows'}"]
        formats = ["number", "percent"]
    else:
        select = f"{value} AS v"
    where = _where(conditions)
    if not keys:
        sql = f"SELECT {select} FROM data{where}"
        rows = [list(r) for r in dataset.connection.execute(sql, params).fetchall()]
        return _result(dataset, query, [], figures, rows, sql, params, formats)
    group = ", ".join(keys)
    labels = ", ".join(f"{k} AS k{n}" for n, k in enumerate(keys))
    rank = query.rank
    direction = "ASC" if rank is not None and rank.order == "bottom" else "DESC"
    if rank is not None and rank.within is not None:
        within = quote(rank.within)
        sql = (
            f"SELECT * EXCLUDE (r) FROM (SELECT {labels}, {select}, row_number() OVER (PARTITION BY {within} "
            f"ORDER BY v {direction} NULLS LAST) AS r FROM data{where} GROUP BY {group}) "
            f"WHERE r <= {int(rank.count)} ORDER BY k{query.dimensions.index(rank.within)}, v {direction}"
        )
    elif query.grain is not None and rank is None:
        in_order = ", ".join(f"k{n}" for n in range(len(keys)))
        sql = f"SELECT {labels}, {select} FROM data{where} GROUP BY {group} ORDER BY {in_order}"
        if query.change and measure.aggregate != "share":
            # Each period's change on the one before, within its group ("quarter over quarter").
            groups = ", ".join(f"k{n}" for n in range(len(keys) - 1))
            window = f"(PARTITION BY {groups} ORDER BY k{len(keys) - 1})" if groups else f"(ORDER BY k{len(keys) - 1})"
            sql = (
                f"SELECT *, v - lag(v) OVER {window} AS d, (v - lag(v) OVER {window}) / "
                f"nullif(abs(lag(v) OVER {window}), 0) AS g FROM ({sql}) AS periods ORDER BY {in_order}"
            )
            figures, formats = [*figures, "change", "change %"], [*formats, "number", "percent"]
    else:
        limit = f" LIMIT {int(rank.count)}" if rank is not None else ""
        sql = f"SELECT {labels}, {select} FROM data{where} GROUP BY {group} ORDER BY v {direction} NULLS LAST{limit}"
    rows = [list(r) for r in dataset.connection.execute(sql, params).fetchall()]
    return _result(dataset, query, headers, figures, rows, sql, params, formats)


def _per_period(dataset: Dataset, query: AnalysisQuery) -> QueryResult:
    """The aggregate over each period's total, per group: the rows summed (or counted) per period first."""
    assert query.per is not None
    column = dataset.column(query.date_column or "")
    assert column is not None
    params: list[Any] = []
    where = _where(_conditions(query, dataset, params))
    keys = [quote(d) for d in query.dimensions]
    inner_keys = [*keys, f"date_trunc('{query.per}', {date_sql(column)})"]
    total = "count(*)" if query.measure.column is None else f"sum({quote(query.measure.column)})"
    outer = aggregate_sql(query.measure.model_copy(update={"column": "t"}))
    labels = ", ".join(f"{k} AS k{n}" for n, k in enumerate(keys))
    inner = f"SELECT {', '.join(inner_keys)}, {total} AS t FROM data{where} GROUP BY {', '.join(inner_keys)}"
    if keys:
        sql = (
            f"SELECT {', '.join(f'k{n}' for n in range(len(keys)))}, {outer} AS v FROM "
            f"(SELECT {labels}, t FROM ({inner}) AS periods) GROUP BY ALL ORDER BY v DESC NULLS LAST"
        )
    else:
        sql = f"SELECT {outer} AS v FROM ({inner}) AS periods"
    rows = [list(r) for r in dataset.connection.execute(sql, params).fetchall()]
    figure = f"{measure_phrase(query.measure)} per {query.per}"
    return _result(dataset, query, list(query.dimensions), [figure], rows, sql, params, ["number"])


def _compare(dataset: Dataset, query: AnalysisQuery) -> QueryResult:
    assert query.compare is not None
    column = dataset.column(query.date_column or "")
    assert column is not None
    params: list[Any] = []
    conditions = _conditions(query, dataset, params)
    date = date_sql(column)
    current, previous = query.compare.current, query.compare.previous
    in_current = f"{date} >= DATE '{current.start.isoformat()}' AND {date} < DATE '{current.end.isoformat()}'"
    in_previous = f"{date} >= DATE '{previous.start.isoformat()}' AND {date} < DATE '{previous.end.isoformat()}'"
    now, before = aggregate_sql(query.measure, in_current), aggregate_sql(query.measure, in_previous)
    select = f"{before} AS p, {now} AS c, {now} - {before} AS d, ({now} - {before}) / nullif(abs({before}), 0) AS g"
    keys, headers = _keys(dataset, query)
    where = _where(conditions)
    rank = query.rank
    direction = "ASC" if rank is not None and rank.order == "bottom" else "DESC"
    order = "g" if rank is None or rank.by_change else "c"
    if keys:
        labels = ", ".join(f"{k} AS k{n}" for n, k in enumerate(keys))
        sql = (
            f"SELECT {labels}, {select} FROM data{where} GROUP BY {', '.join(keys)} "
            f"ORDER BY {order} {direction} NULLS LAST"
        )
    else:
        sql = f"SELECT {select} FROM data{where}"
    rows = [list(r) for r in dataset.connection.execute(sql, params).fetchall()]
    figures = [previous.label, current.label, "change", "change %"]
    return _result(dataset, query, headers, figures, rows, sql, params, ["number", "number", "number", "percent"])


def _result(
    dataset: Dataset,
    query: AnalysisQuery,
    labels: list[str],
    figures: list[str],
    rows: list[list[Any]],
    sql: str,
    params: list[Any],
    formats: list[str],
) -> QueryResult:
    from canvas_core.analysis.engine import label_of, plain

    shaped = []
    for row in rows:
        keys = [
            _period_label(v, query.grain) if n == len(query.dimensions) else label_of(v)
            for n, v in enumerate(row[: len(labels)])
        ]
        shaped.append([*keys, *(plain(v) for v in row[len(labels) :])])
    return QueryResult(
        query=query,
        headers=[*labels, *figures],
        rows=shaped,
        labels=len(labels),
        sql=sql,
        params=params,
        rows_used=_rows_used(dataset, query),
        formats=formats,
    )


def _period_label(value: Any, grain: str | None) -> str:
    from canvas_core.analysis.engine import label_of

    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        if grain == "year":
            return str(value.year)
        if grain == "quarter":
            return f"{value.year}-Q{(value.month - 1) // 3 + 1}"
        if grain == "month":
            return value.strftime("%Y-%m")
        if grain == "week":
            return f"week of {value.isoformat()}"
    return label_of(value)


def date_bounds(dataset: Dataset, column_name: str) -> tuple[dt.date, dt.date] | None:
    """The first and last date of a date or period column."""
    column = dataset.column(column_name)
    if column is None:
        return None
    row = dataset.connection.execute(f"SELECT min({date_sql(column)}), max({date_sql(column)}) FROM data").fetchone()
    if row is None or row[0] is None:
        return None
    first, last = row
    first = first.date() if isinstance(first, dt.datetime) else first
    last = last.date() if isinstance(last, dt.datetime) else last
    return first, last
