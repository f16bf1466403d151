"""What an analysis says: its result tables read into sentences that carry their numbers (the largest and
smallest group with its share, the change over the periods, the top and bottom ranks), and the answer to the
question first. Numbers are written from the engine's results, never retyped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from canvas_core.analysis.engine import Dataset, ResultTable
from canvas_core.analysis.plan import AnalysisPlan
from canvas_core.analysis.rules import named_at

if TYPE_CHECKING:
    from canvas_core.analysis.answers import Answer

CURRENCY = re.compile(r"(?:\(|\b|_)(eur|usd|gbp|chf|jpy|sek|nok|dkk|cad|aud)(?:\)|\b|_)|([€$£¥])", re.IGNORECASE)
SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY"}


@dataclass
class Analysis:
    """A table analysed: where it came from, the plan, the result tables and what they say."""

    dataset: Dataset
    plan: AnalysisPlan
    results: list[ResultTable]
    answer: str = ""
    asked: bool = False  # whether the request asks about the table (names a column, or asks what it shows)
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was cut or refused, said where the reader sees it
    answers: list[Answer] = field(default_factory=list)  # the questions asked of this table, answered first

    @property
    def source(self) -> str:
        return self.dataset.name

    def result(self, kind: str) -> list[ResultTable]:
        return [r for r in self.results if r.kind == kind]


def unit_of(column: str) -> str:
    """The currency a column's name gives its figures (`revenue_eur`, `Revenue (€)`), else nothing."""
    match = CURRENCY.search(column)
    if not match:
        return ""
    return (match.group(1) or "").upper() or SYMBOLS.get(match.group(2), "")


def number(value: Any, unit: str = "") -> str:
    """A figure as a reader sees it: thousands separated, its unit after it; two decimals for a float (the sums
    and averages of a column of decimals, whole or not: a column of whole numbers sums to an int)."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        text = f"{value:,.2f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}" if unit else text


def percent(value: float | None) -> str:
    if value is None:
        return "n/a"
    text = f"{value * 100:.1f}".removesuffix(".0")
    return f"{'0' if text == '-0' else text} %"


def describe(analysis: Analysis, question: str) -> None:
    """Fill the analysis's findings and answer from its results."""
    plan = analysis.plan
    first = plan.measures[0]
    units = {c.name: c.unit or unit_of(c.name) for c in analysis.dataset.columns}
    unit = units.get(first.column, "")
    measure = {"sum": first.column, "avg": f"average {first.column}", "count": "number of rows"}[first.aggregate]
    findings: list[str] = []
    for table in analysis.results:
        if table.kind == "totals":
            row = table.rows[0]
            parts = [
                f"{number(v, units.get(m.column, ''))} {m.column}" + ("" if m.adds_up else " on average")
                for m, v in zip(plan.measures, row[1:], strict=True)
                if m.aggregate != "count"
            ]
            findings.append(
                f"{analysis.source} has {number(row[0])} rows" + (f": {', '.join(parts)} in all." if parts else ".")
            )
        elif table.kind == "breakdown" and table.rows:
            dimension = table.headers[0]
            top, bottom = table.rows[0], table.rows[-1]
            share = len(table.headers) > 1 + len(plan.measures)
            top_text = f"{top[0]} had the highest {measure} by {dimension}: {number(top[1], unit)}"
            if share:
                top_text += f", {percent(top[-1])} of the total"
            sentence = top_text
            if len(table.rows) > 1:
                sentence += f"; {bottom[0]} the lowest: {number(bottom[1], unit)}"
                if share:
                    sentence += f" ({percent(bottom[-1])})"
            findings.append(sentence + f" ({len(table.rows)} {dimension} values).")
        elif table.kind == "cross" and table.rows:
            top = table.rows[0]
            pair = ", ".join(str(v) for v in top[: table.labels])
            findings.append(
                f"The largest {' and '.join(table.headers[: table.labels])} combination is {pair}: "
                f"{number(top[table.labels], unit)}" + (f", {percent(top[-1])} of the total." if first.adds_up else ".")
            )
        elif table.kind == "series" and len(table.rows) >= 2:
            findings.append(_series_sentence(table, measure, unit))
        elif table.kind == "ranking":
            tops = [f"{r[2]} ({number(r[3], unit)})" for r in table.rows if r[0] == "Top"]
            bottoms = [f"{r[2]} ({number(r[3], unit)})" for r in table.rows if r[0] == "Bottom"]
            findings.append(
                f"Top {len(tops)} {table.headers[2]} by {first.column}: {', '.join(tops)}; "
                f"bottom {len(bottoms)}: {', '.join(bottoms)}."
            )
    analysis.findings = findings + analysis.notes
    analysis.answer = _answer(analysis, question, measure, unit) or (findings[0] if findings else "")
    analysis.asked = bool(ASKS.search(question)) or any(
        named_at(question, c.name) is not None for c in analysis.dataset.columns
    )


# Words of a request about what a table shows (a request naming none of its columns may not be about it).
ASKS = re.compile(
    r"\b(best|worst|most|least|highest|lowest|top|bottom|total|totals|sum|average|mean|median|trend|grow|grew|"
    r"growth|change|compare|comparison|share|percent|percentage|how many|how much|which|rank|ranking|breakdown|"
    r"by|per|monthly|quarterly|yearly|weekly|daily|summari[sz]e|summary|analy[sz]e|analysis|insights?|figures|"
    r"numbers|statistics|performance|performed|perform|did)\b",
    re.IGNORECASE,
)


LOW = re.compile(r"\b(lowest|least|worst|bottom|smallest|fewest|weakest|minimum|poorest|slowest)\b", re.IGNORECASE)
TOTAL = re.compile(r"\b(total|overall|in all|altogether|sum|how much|how many)\b", re.IGNORECASE)
TIME = re.compile(
    r"\b(when|monthly|months?|weekly|weeks?|quarterly|quarters?|yearly|annual|years?|daily|days?|period|trend|"
    r"over time|grow|grew|growth)\b",
    re.IGNORECASE,
)
TREND = re.compile(r"\b(trend|over time|grow|grew|growth|change|changed|rise|rose|fall|fell)\b", re.IGNORECASE)


def _answer(analysis: Analysis, question: str, measure: str, unit: str) -> str:
    """The answer to the question: for each breakdown or period it names (in the order it names them; every
    breakdown when it names none), the highest (the lowest, when it asks for that) with its number and share;
    the change over the periods when it asks about a trend; the totals first when it asks for a total."""
    low = bool(LOW.search(question))
    candidates: list[tuple[int | None, str]] = []
    for table in analysis.results:
        if table.kind == "breakdown" and table.rows:
            candidates.append((named_at(question, table.headers[0]), _extreme(table, measure, unit, low)))
        elif table.kind == "series" and len(table.rows) >= 2:
            at = named_at(question, table.headers[0])
            time = TIME.search(question)
            if at is None and time is not None:
                at = len(re.findall(r"\w+", question[: time.start()]))
            text = (
                _series_sentence(table, measure, unit)
                if TREND.search(question)
                else _extreme(table, measure, unit, low)
            )
            candidates.append((at, text))
    named = sorted((at, text) for at, text in candidates if at is not None)
    chosen = [text for _, text in named] or [
        text for (_, text), table in zip(candidates, _answerable(analysis), strict=True) if table.kind == "breakdown"
    ]
    if TOTAL.search(question) and not named:
        totals = next((r for r in analysis.results if r.kind == "totals"), None)
        if totals is not None:
            chosen.insert(0, _totals_sentence(analysis, totals))
    return " ".join(chosen)


def _answerable(analysis: Analysis) -> list[ResultTable]:
    return [
        t for t in analysis.results if (t.kind == "breakdown" and t.rows) or (t.kind == "series" and len(t.rows) >= 2)
    ]


def _extreme(table: ResultTable, measure: str, unit: str, low: bool) -> str:
    """`South had the highest revenue by region: 61,240, 37 % of the total.` (or the lowest)."""
    row = table.rows[-1] if low else table.rows[0]
    if table.kind == "series":
        row = (min if low else max)((r for r in table.rows if r[1] is not None), key=lambda r: r[1])
    text = f"{row[0]} had the {'lowest' if low else 'highest'} {measure} by {table.headers[0]}: {number(row[1], unit)}"
    if table.kind == "breakdown" and table.headers[-1].startswith("Share of "):
        text += f", {percent(row[-1])} of the total"
    return text + "."


def _totals_sentence(analysis: Analysis, totals: ResultTable) -> str:
    units = {c.name: c.unit or unit_of(c.name) for c in analysis.dataset.columns}
    parts = [
        f"{m.column} {number(v, units.get(m.column, ''))}" + ("" if m.adds_up else " on average")
        for m, v in zip(analysis.plan.measures, totals.rows[0][1:], strict=True)
        if m.aggregate != "count"
    ]
    return f"In all ({number(totals.rows[0][0])} rows of {analysis.source}): {', '.join(parts)}."


def _series_sentence(table: ResultTable, measure: str, unit: str) -> str:
    rows = table.rows
    values = [(r[0], r[1]) for r in rows if r[1] is not None]
    high = max(values, key=lambda v: v[1])
    low = min(values, key=lambda v: v[1])
    first, last = values[0], values[-1]
    change = (last[1] - first[1]) / first[1] if first[1] else None
    direction = "rose" if last[1] > first[1] else "fell" if last[1] < first[1] else "was unchanged"
    sentence = (
        f"{measure[:1].upper()}{measure[1:]} per {table.headers[0]} was highest in {high[0]} "
        f"({number(high[1], unit)}) and lowest in {low[0]} ({number(low[1], unit)}); from {first[0]} to {last[0]} "
        f"it {direction}"
    )
    if change is not None and direction != "was unchanged":
        sentence += f" by {percent(abs(change))} ({number(first[1], unit)} to {number(last[1], unit)})"
    return sentence + "."
