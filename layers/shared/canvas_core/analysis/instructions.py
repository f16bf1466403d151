"""Instructions that revise the analysis: a re-run's or an approval's ("Focus on the Nordics region only", "use
the median"), or the requester's agent_instructions. Read without a model into a `Revision` (rows kept, the
aggregate, a period), which every question's query then takes; words that revise nothing change nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from canvas_core.analysis.engine import Dataset
from canvas_core.analysis.query import AnalysisQuery, Filter, Period
from canvas_core.analysis.questions import QuestionWords, periods_in, value_mentions

ONLY = re.compile(r"\b(only|just|solely|exclusively|focus(?:ed|ing)? on|limit(?:ed)? to|restrict(?:ed)? to)\b")
# An aggregate asked for as a change ("use the median", "medians instead", "report averages"), not merely named.
_CHANGE = r"\b(?:use|using|show|report|give|with|in|switch to|as)\s+(?:the\s+)?{0}\b|\b{0}\s+(?:instead|rather)\b"
AGGREGATES = [
    ("median", re.compile(_CHANGE.format("(?:median|medians)"))),
    ("mean", re.compile(_CHANGE.format("(?:average|averages|mean|means)"))),
    ("sum", re.compile(_CHANGE.format("(?:totals?|sums?)"))),
]
AUDIENCE = re.compile(
    r"\b(?:address(?:ed)? (?:it |this |them )?to|for the attention of|written for)\s+(?:the\s+)?([^.;,]+)",
    re.IGNORECASE,
)


@dataclass
class Revision:
    """What instructions change in every query."""

    filters: list[Filter] = field(default_factory=list)
    aggregate: str | None = None
    period_words: str = ""  # the instructions' own words, read into a period against each table
    audience: str = ""

    def describe(self) -> str:
        parts = [
            f"{f.column} {'only ' if f.operator == 'in' else 'excluding '}{', '.join(map(str, f.values))}"
            for f in self.filters
        ]
        if self.aggregate:
            parts.append(f"{self.aggregate} instead of the question's aggregate")
        if self.period_words:
            parts.append(self.period_words)
        return "; ".join(parts)


def read_revision(instructions: str, datasets: list[Dataset]) -> Revision:
    said = QuestionWords.of(instructions)
    revision = Revision()
    if ONLY.search(said.text) or re.search(r"\b(exclud\w*|except|without|leave out|drop)\b", said.text):
        for dataset in datasets:
            for mention in value_mentions(said, dataset):
                operator = (
                    "not_in"
                    if mention.negated
                    or re.search(
                        r"\b(exclud\w*|except|without|leave out|drop)\s+(?:the\s+)?$", said.text[: mention.start]
                    )
                    else "in"
                )
                if not any(f.column == mention.column and mention.value in f.values for f in revision.filters):
                    revision.filters.append(Filter(column=mention.column, operator=operator, values=[mention.value]))  # type: ignore[arg-type]
    for aggregate, pattern in AGGREGATES:
        if pattern.search(said.text):
            revision.aggregate = aggregate
            break
    if re.search(r"\b(19|20)\d{2}\b|\bq[1-4]\b|\b(last|this|previous) (year|quarter|month)\b", said.text):
        revision.period_words = said.text
    audience = AUDIENCE.search(instructions)
    if audience:
        revision.audience = audience.group(1).strip()
    return revision


def apply_revision(query: AnalysisQuery, revision: Revision, dataset: Dataset) -> AnalysisQuery:
    """The query with the revision's filters (on the columns this table has), aggregate and period."""
    names = {c.name for c in dataset.columns}
    filters = [f for f in query.filters if not any(r.column == f.column for r in revision.filters if r.column in names)]
    filters += [f for f in revision.filters if f.column in names]
    update: dict[str, object] = {"filters": filters}
    measure = query.measure
    if revision.aggregate and measure.column and measure.aggregate in ("sum", "mean", "median"):
        update["measure"] = measure.model_copy(update={"aggregate": revision.aggregate})
    if revision.period_words and query.date_column and query.compare is None:
        column = dataset.column(query.date_column)
        periods, problem = periods_in(QuestionWords.of(revision.period_words), dataset, column)
        if periods and not problem:
            update["period"] = (
                periods[0]
                if len(periods) == 1
                else Period(
                    start=periods[0].start, end=periods[-1].end, label=f"{periods[0].label} to {periods[-1].label}"
                )
            )
    return query.model_copy(update=update)


def revise_dataset(dataset: Dataset, revision: Revision) -> list[str]:
    """Keep only the rows the revision's filters and period keep (on the columns this table has), so every figure
    computed from the table afterwards is of those rows; what was kept, in words."""
    from canvas_core.analysis.engine import described_again, quote
    from canvas_core.analysis.query import date_sql, filter_sql

    names = {c.name for c in dataset.columns}
    params: list[object] = []
    conditions = [filter_sql(f, params) for f in revision.filters if f.column in names]
    kept = [
        f"{f.column} {'in' if f.operator == 'in' else 'not in'} {', '.join(map(str, f.values))}"
        for f in revision.filters
        if f.column in names
    ]
    if revision.period_words:
        dates = [c for c in dataset.columns if c.kind in ("date", "period")]
        if dates:
            periods, problem = periods_in(QuestionWords.of(revision.period_words), dataset, dates[0])
            if periods and not problem:
                conditions.append(f"{date_sql(dates[0])} >= ? AND {date_sql(dates[0])} < ?")
                params += [periods[0].start, periods[-1].end]
                kept.append(f"{quote(dates[0].name)[1:-1]} from {periods[0].start} to before {periods[-1].end}")
    if not conditions:
        return []
    where = " AND ".join(f"({c})" for c in conditions)
    dataset.connection.execute(f"CREATE TABLE revised AS SELECT * FROM data WHERE {where}", params)
    dataset.connection.execute("DROP TABLE data")
    dataset.connection.execute("ALTER TABLE revised RENAME TO data")
    described_again(dataset)
    return kept
