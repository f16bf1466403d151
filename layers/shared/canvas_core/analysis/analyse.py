"""One call from a table to its analysis: the plan (the model's when there is one to ask, else the rules'),
run in the engine, described in sentences."""

from __future__ import annotations

from canvas_core.analysis.answers import answer_questions
from canvas_core.analysis.engine import Dataset, run_plan
from canvas_core.analysis.findings import Analysis, describe
from canvas_core.analysis.model import Ask as PlanAsk
from canvas_core.analysis.model import plan_by_model
from canvas_core.analysis.plan import AnalysisPlan
from canvas_core.analysis.rules import plan_by_rules


def analyse(dataset: Dataset, request: str, ask: PlanAsk | None = None) -> Analysis | None:
    """The analysis of a loaded table for a request; None when the table has no column to measure or nothing to
    group (one row per item: the table already says what a breakdown would). `complete` asks a model for the
    plan; without it (the offline provider) the rules choose."""
    if not _worth_planning(dataset):
        return None
    plan = plan_by_model(request, dataset, ask) if ask is not None else plan_by_rules(request, dataset.columns)
    if plan is None or not _groups_rows(dataset, plan):
        return None
    analysis = Analysis(dataset=dataset, plan=plan, results=run_plan(dataset, plan))
    if plan.note:
        analysis.notes.append(plan.note)
    describe(analysis, request)
    return analysis


def _groups_rows(dataset: Dataset, plan: AnalysisPlan) -> bool:
    """Whether a dimension or the period of the plan puts several rows together."""
    keys = [*plan.dimensions, *([plan.period] if plan.period else [])]
    return any((c := dataset.column(k)) is not None and c.distinct < dataset.rows for k in keys)


def _worth_planning(dataset: Dataset) -> bool:
    """Whether the table has a column that could group rows (before a model is asked); without a number to
    measure, the groups' number of rows is the measure."""
    return any(c.kind != "number" and 2 <= c.distinct < dataset.rows for c in dataset.columns)


__all__ = ["analyse", "answer_questions"]
