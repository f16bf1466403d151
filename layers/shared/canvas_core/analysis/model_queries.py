"""A question read into a query by a model: it sees the question, each table's columns (name, kind, a few of a text
column's values, a date column's first and last day) and the query's JSON schema, never the rows, and answers
with one query. The query runs only once it has been read into `AnalysisQuery` and checked against its table
(`check_query`); otherwise the rules read the question (questions.py) and the reason is kept for the run's
errors."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from canvas_core.analysis.engine import Dataset
from canvas_core.analysis.query import AnalysisQuery, check_query, date_bounds
from canvas_core.analysis.questions import Asked, read_question

VALUES_SHOWN = 8
ASK = (
    "Read the question below into one analysis query over one of the tables. Answer with one JSON object that "
    "follows the schema and nothing else. Name columns exactly as listed. A measure with no column counts rows. "
    "Sum what adds up (amounts, counts), average what does not (prices, scores). If the tables cannot answer the "
    'question (a measure or a period they do not hold), answer {"cannot": "<what is missing>"} instead.'
)


def read_question_by_model(question: str, datasets: list[Dataset], complete: Callable[[str], str]) -> Asked:
    """The model's query when it is valid for its table, else the rules' reading with the reason."""
    schema = json.dumps(AnalysisQuery.model_json_schema(), separators=(",", ":"))
    prompt = f"{ASK}\n\nQuestion: {question}\n\nTables:\n{_tables(datasets)}\n\nJSON schema of the query:\n{schema}"
    problem = ""
    try:
        answer = _json_object(complete(prompt))
        if isinstance(answer, dict) and isinstance(answer.get("cannot"), str) and answer["cannot"].strip():
            fallback = read_question(question, datasets)
            if fallback.query is None:
                return fallback  # the rules agree: the data cannot answer it
            problem = f"the model said the data cannot answer it ({answer['cannot'].strip()[:200]})"
        else:
            query = AnalysisQuery.model_validate(answer)
            dataset = next((d for d in datasets if d.name == query.table), None)
            if dataset is None:
                problem = f"it names the table {query.table!r}, which the run does not have"
            elif problems := check_query(query, dataset.columns):
                problem = "; ".join(problems)
            else:
                asked = read_question(question, [dataset])
                return Asked(question=question, dataset=dataset, query=query, extreme=asked.extreme)
    except (ValueError, ValidationError) as exc:
        problem = _reason(exc)
    asked = read_question(question, datasets)
    asked.notes.append(f"The model's query for “{question[:120]}” was refused ({problem}); rules read the question.")
    return asked


def _tables(datasets: list[Dataset]) -> str:
    lines = []
    for dataset in datasets:
        lines.append(f"- {dataset.name} ({dataset.rows} rows):")
        for column in dataset.columns:
            detail = f"{column.kind}, {column.distinct} distinct values"
            if column.kind == "text" and column.distinct <= 50:
                values = dataset.values_read or {}
                shown = (values.get(column.name) or _some_values(dataset, column.name))[:VALUES_SHOWN]
                detail += f", e.g. {', '.join(shown)}"
            elif column.kind in ("date", "period") and (bounds := date_bounds(dataset, column.name)):
                detail += f", from {bounds[0].isoformat()} to {bounds[1].isoformat()}"
            lines.append(f"  - {column.name}: {detail}")
    return "\n".join(lines)


def _some_values(dataset: Dataset, column: str) -> list[str]:
    from canvas_core.analysis.engine import quote

    rows = dataset.connection.execute(
        f"SELECT DISTINCT CAST({quote(column)} AS VARCHAR) FROM data WHERE {quote(column)} IS NOT NULL "
        f"LIMIT {VALUES_SHOWN}"
    ).fetchall()
    return [str(r[0]) for r in rows]


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
