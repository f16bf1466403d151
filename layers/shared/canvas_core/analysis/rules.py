"""The plan chosen without a model: from the prompt's words and the table's columns.

- Measures are the number columns that measure (not ids, codes or years; without any, the groups' number of
  rows): those the prompt names first, in
  the order it names them, else one that reads as money or quantity; each summed when its name says it adds
  up (revenue, units), else averaged (price, rate, score), and averaged when the prompt asks for an average.
- Dimensions are the text columns with a handful of values: those the prompt names, else up to two with the
  fewest values. Two named together ("by region and product") are also crossed.
- The period is a date or period column (`2025-03`, a `month` or `year` column), grouped by the grain the
  prompt names (monthly, quarterly, ...), else by its own values, else by month.
- "top 5", "bottom 3", "5 best" set how many are ranked (3 otherwise).
"""

from __future__ import annotations

import re

from canvas_core.analysis.plan import MAX_DIMENSIONS, MAX_MEASURES, ROWS, AnalysisPlan, Column, Grain, Measure
from canvas_core.render.structure import adds_up, is_identifier

MAX_CATEGORIES = 200  # a text column with more values labels rows rather than grouping them
AUTO_CATEGORIES = 30  # unnamed dimensions are taken only when this small
# What a question about "the best" is most likely about when it names no measure: money first, then quantities.
MONEY = re.compile(r"\b(revenue|sale|turnover|income|amount|value|total|profit|margin|spend|cost)\b", re.IGNORECASE)
QUANTITY = re.compile(r"\b(unit|quantity|qty|volume|count|order|visit|hour)\b", re.IGNORECASE)
SYNONYMS = {"sold": "sale", "sell": "sale", "selling": "sale", "sells": "sale", "earned": "revenue"}
AVERAGE = re.compile(r"\b(average|avg|mean|typical)\b", re.IGNORECASE)
GRAINS: list[tuple[Grain, re.Pattern[str]]] = [
    ("day", re.compile(r"\b(daily|per day|by day|each day)\b", re.IGNORECASE)),
    ("week", re.compile(r"\b(weekly|per week|by week|each week)\b", re.IGNORECASE)),
    ("month", re.compile(r"\b(monthly|per month|by month|each month|months?)\b", re.IGNORECASE)),
    ("quarter", re.compile(r"\b(quarterly|per quarter|by quarter|quarters?)\b", re.IGNORECASE)),
    ("year", re.compile(r"\b(yearly|annual|annually|per year|by year|years?)\b", re.IGNORECASE)),
]
RANK = re.compile(r"\b(?:top|bottom|best|worst|first|last|leading)\s+(\d{1,2})\b|\b(\d{1,2})\s+(?:best|worst|top)\b")


def words(text: str) -> list[str]:
    """The words of a text or a column name (`unit_price`, `unitPrice` -> unit, price), singular."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").replace("-", " ")
    found = [_singular(w) for w in re.findall(r"[a-z0-9]+", spaced.lower())]
    return [SYNONYMS.get(w, w) for w in found]


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


# Words of a column name a prompt leaves out when it names the column: units, currencies, generic suffixes
# ("net sales" names `net_sales_usd`, "product" names `product_name`).
OPTIONAL_WORDS = frozenset(
    re.findall(
        r"\w+",
        "usd eur gbp chf jpy sek nok dkk cad aud pct percent kg km m cm h hr hrs min sec name label"
        " title value amount total num no nr",
    )
)


def named_at(prompt: str, column: str) -> int | None:
    """Where the prompt first names a column (all of its words but units and generic suffixes, in the prompt's
    words), else None."""
    said = words(prompt)
    named = [w for w in words(column) if len(w) >= 2 and not w.isdigit()]
    wanted = [w for w in named if w not in OPTIONAL_WORDS] or named
    if not wanted or not all(w in said for w in wanted):
        return None
    return min(said.index(w) for w in wanted)


def plan_by_rules(prompt: str, columns: list[Column]) -> AnalysisPlan | None:
    """The plan the prompt's words and the columns suggest (counting rows when no column holds numbers)."""
    candidates = [c for c in columns if c.kind == "number" and not is_identifier(c.name)]
    if not candidates:
        # Nothing to add up (a log of tickets, of visits): each group's number of rows is the measure.
        return _plan(prompt, columns, [Measure(column=ROWS, aggregate="count")])
    named = sorted((p, c.name) for c in candidates if (p := named_at(prompt, c.name)) is not None)
    order = [name for _, name in named]
    if not order:
        money = [c.name for c in candidates if MONEY.search(" ".join(words(c.name)))]
        quantity = [c.name for c in candidates if QUANTITY.search(" ".join(words(c.name)))]
        first_summable = next((c.name for c in candidates if adds_up(c.name)), candidates[0].name)
        order = (money or quantity or [first_summable])[:1]
    # The other measures too: summed when they add up, averaged when they do not (hours per ticket, a price).
    rest = [c.name for c in candidates if c.name not in order]
    average = bool(AVERAGE.search(prompt))
    measures = [
        Measure(column=name, aggregate="sum" if adds_up(name) and not (average and name in order) else "avg")
        for name in [*order, *rest][:MAX_MEASURES]
    ]
    return _plan(prompt, columns, measures)


def _plan(prompt: str, columns: list[Column], measures: list[Measure]) -> AnalysisPlan:
    """The plan for these measures: the dimensions, period, grain and ranking the prompt and columns give."""
    period = _period(prompt, columns)
    categories = [
        c for c in columns if c.kind in ("text", "period") and 2 <= c.distinct <= MAX_CATEGORIES and c.name != period
    ]
    named_dimensions = sorted((p, c.name) for c in categories if (p := named_at(prompt, c.name)) is not None)
    dimensions = [name for _, name in named_dimensions]
    if not dimensions:
        small = sorted((c for c in categories if c.kind == "text" and c.distinct <= AUTO_CATEGORIES), key=_fewest)
        dimensions = [c.name for c in small[:2]]
    rank = RANK.search(prompt)
    return AnalysisPlan(
        measures=measures,
        dimensions=dimensions[:MAX_DIMENSIONS],
        period=period,
        grain=_grain(prompt, columns, period),
        top_n=min(20, max(1, int(rank.group(1) or rank.group(2)))) if rank else 3,
        cross=len(named_dimensions) >= 2,
        chosen_by="rules",
    )


def _fewest(column: Column) -> int:
    return column.distinct


def _period(prompt: str, columns: list[Column]) -> str | None:
    periods = [c for c in columns if c.kind in ("date", "period") and c.distinct >= 2]
    named = [c for c in periods if named_at(prompt, c.name) is not None]
    chosen = named or periods
    return chosen[0].name if chosen else None


def _grain(prompt: str, columns: list[Column], period: str | None) -> Grain:
    column = next((c for c in columns if c.name == period), None)
    if column is None or column.kind != "date":
        return "value"
    for grain, pattern in GRAINS:
        if pattern.search(prompt):
            return grain
    return "value" if column.distinct <= 31 else "month"
