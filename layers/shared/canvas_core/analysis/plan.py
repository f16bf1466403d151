"""The analysis as data: which measures, aggregated how, broken down by which dimensions, summed over which
period, and how many to rank. A plan names columns of one table; `check_plan` holds it to that table's schema,
so a plan a model wrote runs only when every column it names exists and has the kind its role needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

Aggregate = Literal["sum", "avg", "count"]
ROWS = "rows"  # the measure of a table with nothing to add up: how many rows each group has (`count`)
Grain = Literal["day", "week", "month", "quarter", "year", "value"]
MAX_MEASURES = 4
MAX_DIMENSIONS = 3


@dataclass(frozen=True)
class Column:
    """A column as the engine sees it: `kind` is number, text, date or period (text that names a period,
    e.g. `2025-03` or `March`); `distinct` is how many values it holds."""

    name: str
    kind: str
    distinct: int
    unit: str = ""  # the currency its cells were written in (`$1,200.50`), when they were


class Measure(BaseModel):
    column: str = Field(min_length=1)
    aggregate: Aggregate = "sum"

    @property
    def adds_up(self) -> bool:
        """Whether the groups' figures add up to the whole (sums and counts, not averages)."""
        return self.aggregate != "avg"


class PlanFields(BaseModel):
    """What to compute, as a model is asked for it. The first measure is the one the question is about (rankings and
    the answer use it)."""

    measures: list[Measure] = Field(min_length=1, max_length=MAX_MEASURES)
    dimensions: list[str] = Field(default_factory=list, max_length=MAX_DIMENSIONS)
    period: str | None = None
    grain: Grain = "value"
    top_n: int = Field(default=3, ge=1, le=20)
    cross: bool = False  # also break the first measure down by the first two dimensions together


class AnalysisPlan(PlanFields):
    """The plan to run: its fields, and who chose it (set by the code, never asked of a model)."""

    chosen_by: str = "rules"  # rules or model, and why the rules when a model's plan was refused
    note: str = ""


def check_plan(plan: AnalysisPlan, columns: list[Column]) -> list[str]:
    """What is wrong with a plan for a table of these columns (nothing: it can run)."""
    by_name = {c.name: c for c in columns}
    problems = []
    for measure in plan.measures:
        column = by_name.get(measure.column)
        if measure.aggregate == "count":
            continue  # counts rows, whatever column it names
        if column is None:
            problems.append(f"measure {measure.column!r} is not a column")
        elif column.kind != "number":
            problems.append(f"measure {measure.column!r} holds {column.kind}, not numbers")
    for name in plan.dimensions:
        column = by_name.get(name)
        if column is None:
            problems.append(f"dimension {name!r} is not a column")
        elif column.kind == "number" and column.distinct > 50:
            problems.append(f"dimension {name!r} is a measure with {column.distinct} values, not a category")
    if plan.period is not None:
        column = by_name.get(plan.period)
        if column is None:
            problems.append(f"period {plan.period!r} is not a column")
        elif column.kind not in ("date", "period") and plan.grain != "value":
            problems.append(f"period {plan.period!r} holds {column.kind}, which cannot be grouped by {plan.grain}")
    if len({m.column for m in plan.measures}) != len(plan.measures):
        problems.append("a measure is named twice")
    if plan.period is not None and plan.period in plan.dimensions:
        problems.append(f"{plan.period!r} is both the period and a dimension")
    return problems
