"""A question read into a query by a model: it sees the question, each table's columns (name, kind, a few of a text
column's values, a date column's first and last day) and the query's JSON schema, never the rows, and answers
with one query, a structured answer constrained to the query's JSON schema where the provider can
(providers/structured.py). The query runs only once it has been read into `AnalysisQuery` and checked against its
table (`check_query`); otherwise the rules read the question (questions.py) and the reason is kept for the run's
errors."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, Field

from canvas_core.analysis.engine import Dataset
from canvas_core.analysis.query import AnalysisQuery, check_query, date_bounds
from canvas_core.analysis.questions import Asked, read_question
from canvas_core.providers.structured import StructuredOutputError

VALUES_SHOWN = 8
ASK = (
    "Read the question below into one analysis query over one of the tables: set `query`, naming columns exactly "
    "as listed (a measure with no column counts rows; sum what adds up, such as amounts and counts, and average "
    "what does not, such as prices and scores), and leave `cannot` null. If the tables cannot answer the question "
    "(a measure or a period they do not hold), leave `query` null and say in `cannot` what is missing."
)


class QueryAnswer(BaseModel):
    """What the model is asked for: the question's query, or what the tables lack to answer it."""

    query: AnalysisQuery | None = None
    cannot: str | None = Field(default=None, max_length=300)


class Ask(Protocol):
    """A structured model call (BlockContext.structured): the prompt and the schema in, an instance out, or
    StructuredOutputError."""

    def __call__(self, prompt: str, schema: type[QueryAnswer]) -> QueryAnswer: ...


def read_question_by_model(question: str, datasets: list[Dataset], ask: Ask) -> Asked:
    """The model's query when it is valid for its table, else the rules' reading with the reason."""
    prompt = f"{ASK}\n\nQuestion: {question}\n\nTables:\n{_tables(datasets)}"
    problem = ""
    try:
        answer = ask(prompt, QueryAnswer)
        if answer.query is None:
            fallback = read_question(question, datasets)
            if fallback.query is None:
                return fallback  # the rules agree: the data cannot answer it
            problem = f"the model said the data cannot answer it ({(answer.cannot or 'no query').strip()[:200]})"
        else:
            query = answer.query
            dataset = next((d for d in datasets if d.name == query.table), None)
            if dataset is None:
                problem = f"it names the table {query.table!r}, which the run does not have"
            elif problems := check_query(query, dataset.columns):
                problem = "; ".join(problems)
            else:
                asked = read_question(question, [dataset])
                return Asked(question=question, dataset=dataset, query=query, extreme=asked.extreme)
    except StructuredOutputError as exc:
        problem = str(exc)
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
