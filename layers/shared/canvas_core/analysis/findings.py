"""What an analysis says: its result tables read into sentences that carry their numbers (the largest and
smallest group with its share, the change over the periods, the top and bottom ranks), and the answer to the
question first. Numbers are written from the engine's results, never retyped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from canvas_core.analysis.engine import Dataset, ResultTable
from canvas_core.analysis.plan import AnalysisPlan
from canvas_core.analysis.rules import named_at

CURRENCY = re.compile(r"(?:\(|\b|_)(eur|usd|gbp|chf|jpy|sek|nok|dkk|cad|aud)(?:\)|\b|_)|([€$£¥])", re.IGNORECASE)
SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY"}


@dataclass
class Analysis:
    """A table analysed: where it came from, the plan, the result tables and what they say."""

    dataset: Dataset
    plan: AnalysisPlan
    results: list[ResultTable]
    answer: str = ""
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was cut or refused, said where the reader sees it

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
    """A figure as a reader sees it: thousands separated, two decimals unless whole, its unit after it."""
    if value is None:
        return "n/a"
    if isinstance(value, float) and not value.is_integer():
        text = f"{value:,.2f}"
    elif isinstance(value, int | float):
        text = f"{int(value):,}"
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
    measure = first.column if first.aggregate == "sum" else f"average {first.column}"
    findings: list[str] = []
    leads: list[tuple[int, str]] = []
    for table in analysis.results:
        if table.kind == "totals":
            row = table.rows[0]
            parts = [
                f"{number(v, units.get(m.column, ''))} {m.column}" + ("" if m.aggregate == "sum" else " on average")
                for m, v in zip(plan.measures, row[1:], strict=True)
            ]
            findings.append(f"{analysis.source} has {number(row[0])} rows: {', '.join(parts)} in all.")
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
            leads.append((named_at(question, dimension) or 10_000, top_text + "."))
        elif table.kind == "cross" and table.rows:
            top = table.rows[0]
            pair = ", ".join(str(v) for v in top[: table.labels])
            findings.append(
                f"The largest {' and '.join(table.headers[: table.labels])} combination is {pair}: "
                f"{number(top[table.labels], unit)}"
                + (f", {percent(top[-1])} of the total." if first.aggregate == "sum" else ".")
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
    leads.sort(key=lambda lead: lead[0])
    analysis.answer = " ".join(text for _, text in leads) or (findings[0] if findings else "")


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
