"""The plan chosen by a model: it sees the table's schema and a few sample rows (never every row), answers
with a JSON plan, and the plan runs only once it has been read and checked against the schema (plan.py). A
plan that is not JSON, not in the plan's shape or names what the table does not have is refused, and the rules
choose instead (rules.py), with the reason kept in the plan's `chosen_by`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from canvas_core.analysis.engine import Dataset
from canvas_core.analysis.plan import AnalysisPlan, check_plan
from canvas_core.analysis.rules import plan_by_rules

ASK = (
    "Choose the analysis of the table below that answers the request. Answer with one JSON object and nothing "
    'else: {"measures": [{"column": <a number column>, "aggregate": "sum" or "avg"}, or {"column": "rows", '
    '"aggregate": "count"} to count the rows of each group], "dimensions": [<text '
    'columns to break the measures down by>], "period": <a date or period column, or null>, "grain": "day", '
    '"week", "month", "quarter", "year" or "value", "top_n": <how many to rank>, "cross": <true to also break '
    "the first measure down by the first two dimensions together>}. The first measure is the one the request is "
    "about. Sum what adds up (amounts, counts); average what does not (prices, rates, scores)."
)


def plan_by_model(request: str, dataset: Dataset, complete: Callable[[str], str]) -> AnalysisPlan | None:
    """The model's plan when it is valid for the table, else the rules' (saying why the model's was refused)."""
    schema = "\n".join(f"- {c.name}: {c.kind}, {c.distinct} distinct values" for c in dataset.columns)
    sample = "\n".join(json.dumps([_jsonable(v) for v in row]) for row in dataset.sample())
    prompt = (
        f"{ASK}\n\nRequest: {request}\n\nTable {dataset.name}: {dataset.rows} rows.\nColumns:\n{schema}\n\n"
        f"First rows:\n{sample}"
    )
    answer = complete(prompt)
    problem = ""
    try:
        plan = AnalysisPlan.model_validate(_json_object(answer))
        problems = check_plan(plan, dataset.columns)
        if not problems:
            return plan.model_copy(update={"chosen_by": "model"})
        problem = "; ".join(problems)
    except (ValueError, ValidationError) as exc:
        problem = _reason(exc)
    fallback = plan_by_rules(request, dataset.columns)
    if fallback is None:
        return None
    return fallback.model_copy(
        update={"chosen_by": "rules", "note": f"The model's analysis plan was refused ({problem}); rules chose it."}
    )


def _json_object(text: str) -> Any:
    match = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not match:
        raise ValueError("the answer holds no JSON object")
    return json.loads(match.group(0))


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc).splitlines()[0]


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, int | float | str | bool) or value is None else str(value)
