"""The answer to each question, leading with it: one sentence per question, its number first computed by the
engine (query.py), then what was computed. A question the data cannot answer says so and names what is missing;
one the rules could not read says that it could not, never answering another question in its place.

`answer_questions` is the one call: the prompt (and any later instructions) in, an `Answers` out, whose `text`
opens the run's answer and whose items carry each question's query and result for the deliverables."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from canvas_core.analysis.engine import AnalysisError, Dataset
from canvas_core.analysis.findings import number, percent, unit_of
from canvas_core.analysis.instructions import Revision, apply_revision, read_revision
from canvas_core.analysis.model_queries import Ask as QueryAsk
from canvas_core.analysis.model_queries import read_question_by_model
from canvas_core.analysis.query import (
    AnalysisQuery,
    QueryResult,
    filter_phrase,
    measure_phrase,
    period_phrase,
    run_query,
)
from canvas_core.analysis.questions import Asked, read_question, split_questions

MAX_LISTED = 8  # groups named in one sentence; the rest are in the result's table


@dataclass
class Answer:
    """One question's answer: its sentence, and the query and result behind it (none when it cannot be answered)."""

    question: str
    status: Literal["answered", "cannot", "unmapped"]
    sentence: str
    query: AnalysisQuery | None = None
    result: QueryResult | None = None
    dataset: Dataset | None = None


@dataclass
class Answers:
    items: list[Answer] = field(default_factory=list)
    revision: Revision | None = None
    notes: list[str] = field(default_factory=list)  # a model's query refused, and why

    @property
    def text(self) -> str:
        """One line per question, each opening with its answer."""
        return "\n".join(a.sentence for a in self.items)

    @property
    def answered(self) -> list[Answer]:
        return [a for a in self.items if a.result is not None]


def answer_questions(
    datasets: list[Dataset], prompt: str, instructions: str = "", ask: QueryAsk | None = None
) -> Answers:
    """Each question the prompt asks of the tables, answered; `instructions` (a re-run's, an approval's, the
    requester's) revise every query: a filter, an aggregate, a period. `ask` has a model read each question into
    its query (a structured answer, checked; the rules read it when the model's is refused); without it, rules do."""
    revision = read_revision(instructions, datasets) if instructions.strip() else None
    answers = Answers(revision=revision)
    for question in split_questions(prompt):
        if ask is not None and read_question(question, datasets).dataset is not None:
            asked = read_question_by_model(question, datasets, ask)
            answers.notes += asked.notes
        else:
            asked = read_question(question, datasets)
        if asked.query is None and not asked.cannot and not asked.unmapped:
            continue  # not a question about the tables
        answers.items.append(_answer(asked, revision))
    return answers


def _answer(asked: Asked, revision: Revision | None) -> Answer:
    question = asked.question
    if asked.cannot:
        table = f" in {asked.dataset.name}" if asked.dataset is not None else ""
        return Answer(
            question, "cannot", f"“{_short(question)}” cannot be answered from the data{table}: {asked.cannot}."
        )
    if asked.query is None or asked.dataset is None:
        return Answer(
            question,
            "unmapped",
            f"“{_short(question)}” cannot be read as a computation on the data: "
            f"{asked.unmapped or 'it names nothing the tables hold'}.",
        )
    query = asked.query
    if revision is not None:
        query = apply_revision(query, revision, asked.dataset)
    try:
        result = run_query(asked.dataset, query)
    except AnalysisError as exc:
        return Answer(
            question,
            "cannot",
            f"“{_short(question)}” cannot be answered from {asked.dataset.name}: {exc}.",
            query=query,
            dataset=asked.dataset,
        )
    sentence = _sentence(result, asked, asked.dataset)
    noun = _rows_named(question, asked.dataset)
    if noun:
        sentence = sentence.replace("number of rows", f"number of {noun}")  # "the number of orders", as asked
    return Answer(question, "answered", sentence, query=query, result=result, dataset=asked.dataset)


def _rows_named(question: str, dataset: Dataset) -> str:
    """The word the question calls the table's rows by ("orders", "tickets"), when it uses one."""
    from canvas_core.analysis.questions import row_nouns
    from canvas_core.analysis.rules import words

    nouns = row_nouns(dataset) - {"row", "record", "entry", "entrie", "line", "item", "case", "observation"}
    return next((w for w in re.findall(r"[A-Za-z]+", question.lower()) if words(w) and words(w)[0] in nouns
                 and w.endswith("s")), "")  # fmt: skip


def _short(question: str, limit: int = 120) -> str:
    question = " ".join(question.split())
    return question if len(question) <= limit else question[: limit - 1].rsplit(" ", 1)[0] + "…"


# ---- sentences -----------------------------------------------------------------------------------------------------


def _unit(dataset: Dataset, column: str | None) -> str:
    if column is None:
        return ""
    found = dataset.column(column)
    return (found.unit if found is not None else "") or unit_of(column)


def _scope(query: AnalysisQuery) -> str:
    """The filters and the period, as words after the figure's name: ` in Nordics, in 2025`."""
    parts = [filter_phrase(f) for f in query.filters]
    if query.period is not None:
        parts.append(period_phrase(query.period))
    return (" " + ", ".join(parts)) if parts else ""


def _figure(value: Any, kind: str, unit: str) -> str:
    if kind == "percent":
        return percent(value)
    if value is None:
        return "n/a"
    return number(value, unit)


def _signed(value: float | None) -> str:
    if value is None:
        return "n/a"
    text = percent(abs(value))
    return ("+" if value >= 0 else "-") + text


def _sentence(result: QueryResult, asked: Asked, dataset: Dataset) -> str:
    query = result.query
    unit = _unit(dataset, query.measure.column)
    what = measure_phrase(query.measure) + (f" per {query.per}" if query.per else "")
    scope = _scope(query)
    rows = result.rows
    used = f"{number(result.rows_used)} rows of {dataset.name}"
    if not rows or (result.labels == 0 and rows[0][0] is None and query.measure.aggregate != "count"):
        return f"No rows of {dataset.name} match{scope or ' the question'}, so {what} cannot be computed."
    if query.compare is not None:
        return _comparison_sentence(result, asked, unit, what, scope, used)
    if result.labels == 0:
        row = rows[0]
        if query.measure.aggregate == "share" and query.share_of is not None:
            part = filter_phrase(query.share_of).removeprefix("in ")
            column = query.measure.column or "rows"
            return (
                f"{part} accounts for {percent(row[0])} of {column}{scope}: {number(row[1], unit)} of "
                f"{number(row[2], unit)} (computed over {used})."
            )
        figure = _figure(row[0], "number", unit)
        return f"The {what}{scope} is {figure} (computed over {used})."
    if query.rank is not None and query.rank.within is not None:
        return _within_sentence(result, unit, what, scope)
    if query.change:
        return _steps_sentence(result, unit, what, scope)
    label_columns = result.headers[: result.labels]
    groups = " and ".join(label_columns)
    kinds = result.formats
    value_at = 1 if query.measure.aggregate == "share" and query.share_of is None else 0
    ordered = rows
    if query.grain is not None and query.rank is None and asked.extreme:
        ordered = sorted(
            (r for r in rows if r[result.labels + value_at] is not None),
            key=lambda r: r[result.labels + value_at],
            reverse=True,
        )

    def item(row: list[Any]) -> str:
        label = ", ".join(str(v) for v in row[: result.labels])
        figure = _figure(row[result.labels + value_at], kinds[value_at], unit)
        if query.measure.aggregate == "share" and query.share_of is None:
            figure += f", {number(row[result.labels], unit)}"
        return f"{label} ({figure})"

    if query.rank is not None:
        listed = [item(r) for r in ordered[:MAX_LISTED]]
        return f"{query.rank.order.title()} {len(ordered)} {groups} by {what}{scope}: {'; '.join(listed)}."
    if asked.extreme:
        present = [r for r in ordered if r[result.labels + value_at] is not None]
        chosen = present[-1] if asked.extreme == "bottom" else present[0]
        other = present[0] if asked.extreme == "bottom" else present[-1]
        word = "lowest" if asked.extreme == "bottom" else "highest"
        other_word = "highest" if asked.extreme == "bottom" else "lowest"
        label = ", ".join(str(v) for v in chosen[: result.labels])
        text = (
            f"{label} has the {word} {what}{scope}: {_figure(chosen[result.labels + value_at], kinds[value_at], unit)}"
        )
        if len(present) > 1:
            other_label = ", ".join(str(v) for v in other[: result.labels])
            text += (
                f" (of {len(present)} {groups} values; the {other_word}: {other_label}, "
                f"{_figure(other[result.labels + value_at], kinds[value_at], unit)})"
            )
        return text + "."
    if len(ordered) > MAX_LISTED:
        # Too many figures for a sentence: how many there are, and the largest and smallest, the rest in the table.
        present = sorted(
            (r for r in ordered if r[result.labels + value_at] is not None),
            key=lambda r: r[result.labels + value_at],
            reverse=True,
        )
        return (
            f"The {what} by {groups}{scope} is a table of {len(ordered)} figures: the largest "
            f"{item(present[0])}, the smallest {item(present[-1])}."
        )
    listed = [item(r) for r in ordered]
    return f"The {what} by {groups}{scope}: {'; '.join(listed)}."


def _steps_sentence(result: QueryResult, unit: str, what: str, scope: str) -> str:
    """Each period's figure and its change on the one before: "2025-Q2: 510 (-5.6 %)"."""
    query = result.query
    labels = result.labels
    parts = []
    for row in result.rows[: MAX_LISTED * 2]:
        label = ", ".join(str(v) for v in row[:labels])
        change = f" ({_signed(row[labels + 2])})" if row[labels + 2] is not None else ""
        parts.append(f"{label}: {number(row[labels], unit)}{change}")
    more = f"; and {len(result.rows) - MAX_LISTED * 2} more in the table" if len(result.rows) > MAX_LISTED * 2 else ""
    return f"The {what} {query.grain} over {query.grain}{scope}: {'; '.join(parts)}{more}."


def _within_sentence(result: QueryResult, unit: str, what: str, scope: str) -> str:
    query = result.query
    assert query.rank is not None and query.rank.within is not None
    within_at = query.dimensions.index(query.rank.within)
    other_at = 1 - within_at
    ranked = result.headers[other_at]
    groups: dict[str, list[str]] = {}
    for row in result.rows:
        figure = _figure(row[result.labels], "number", unit)
        groups.setdefault(str(row[within_at]), []).append(f"{row[other_at]} ({figure})")
    order = query.rank.order
    head = (
        f"{'Top' if order == 'top' else 'Bottom'} {ranked}"
        if query.rank.count == 1
        else (f"{'Top' if order == 'top' else 'Bottom'} {query.rank.count} {ranked} values")
    )
    parts = [f"{group}: {', '.join(items)}" for group, items in list(groups.items())]
    return f"{head} by {what} in each {query.rank.within}{scope}: {'; '.join(parts)}."


def _comparison_sentence(result: QueryResult, asked: Asked, unit: str, what: str, scope: str, used: str) -> str:
    query = result.query
    assert query.compare is not None
    before, now = query.compare.previous.label, query.compare.current.label
    rows = result.rows
    labels = result.labels
    if labels == 0:
        previous, current, _, growth = rows[0]
        direction = (
            "rose"
            if (current or 0) > (previous or 0)
            else "fell"
            if (current or 0) < (previous or 0)
            else "was unchanged"
        )
        text = f"The {what}{scope} {direction} from {before} to {now}"
        if growth is not None and direction != "was unchanged":
            text += f" by {percent(abs(growth))}"
        return text + f": {number(previous, unit)} to {number(current, unit)} ({_signed(growth)})."
    present = [r for r in rows if r[labels + 3] is not None]
    if not present:
        return f"The {what}{scope} cannot be compared from {before} to {now}: no group has figures in both."
    groups = " and ".join(result.headers[:labels])

    def item(row: list[Any]) -> str:
        label = ", ".join(str(v) for v in row[:labels])
        return f"{label} {_signed(row[labels + 3])}"

    if asked.extreme:
        ordered = sorted(present, key=lambda r: r[labels + 3], reverse=asked.extreme != "bottom")
        chosen = ordered[0]
        label = ", ".join(str(v) for v in chosen[:labels])
        verb = "grew the least" if asked.extreme == "bottom" else "grew the most"
        if asked.extreme == "bottom" and (chosen[labels + 3] or 0) < 0:
            verb = "fell the most"
        others = "; ".join(item(r) for r in ordered[1:MAX_LISTED])
        return (
            f"{label} {verb} from {before} to {now}: {what}{scope} {_signed(chosen[labels + 3])}, "
            f"{number(chosen[labels], unit)} to {number(chosen[labels + 1], unit)}"
            + (f" (other {groups} values: {others})." if others else ".")
        )
    listed = "; ".join(item(r) for r in present[:MAX_LISTED])
    return f"Change in {what}{scope} from {before} to {now} by {groups}: {listed}."
