"""The plan chosen by a model: it sees the table's schema and a few sample rows (never every row), answers
with a plan, a structured answer constrained to the plan's JSON schema where the provider can
(providers/structured.py), and the plan runs only once it has been read and checked against the table (plan.py). A
plan that is not JSON, not in the plan's shape or names what the table does not have is refused, and the rules
choose instead (rules.py), with the reason kept in the plan's `chosen_by`."""

from __future__ import annotations

import json
from typing import Any, Protocol

from canvas_core.analysis.engine import Dataset
from canvas_core.analysis.plan import AnalysisPlan, PlanFields, check_plan
from canvas_core.analysis.rules import plan_by_rules
from canvas_core.providers.structured import StructuredOutputError

ASK = (
    "Choose the analysis of the table below that answers the request: the measures (a number column summed or "
    'averaged, or the column "rows" counted to count the rows of each group), the text columns to break them down '
    "by, a date or period column and its grain (or null), how many to rank, and whether to also break the first "
    "measure down by the first two dimensions together. The first measure is the one the request is about. Sum "
    "what adds up (amounts, counts); average what does not (prices, rates, scores)."
)


# What the model is asked for: the plan's own fields, none of those the code sets.
PlanAnswer = PlanFields


class Ask(Protocol):
    """A structured model call (BlockContext.structured): StructuredOutputError when the answer is not one."""

    def __call__(self, prompt: str, schema: type[PlanAnswer]) -> PlanAnswer: ...


def plan_by_model(request: str, dataset: Dataset, ask: Ask) -> AnalysisPlan | None:
    """The model's plan when it is valid for the table, else the rules' (saying why the model's was refused)."""
    schema = "\n".join(f"- {c.name}: {c.kind}, {c.distinct} distinct values" for c in dataset.columns)
    sample = "\n".join(json.dumps([_jsonable(v) for v in row]) for row in dataset.sample())
    prompt = (
        f"{ASK}\n\nRequest: {request}\n\nTable {dataset.name}: {dataset.rows} rows.\nColumns:\n{schema}\n\n"
        f"First rows:\n{sample}"
    )
    problem = ""
    try:
        plan = AnalysisPlan(**ask(prompt, PlanAnswer).model_dump())
        problems = check_plan(plan, dataset.columns)
        if not problems:
            return plan.model_copy(update={"chosen_by": "model"})
        problem = "; ".join(problems)
    except StructuredOutputError as exc:
        problem = str(exc)
    fallback = plan_by_rules(request, dataset.columns)
    if fallback is None:
        return None
    return fallback.model_copy(
        update={"chosen_by": "rules", "note": f"The model's analysis plan was refused ({problem}); rules chose it."}
    )


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)
