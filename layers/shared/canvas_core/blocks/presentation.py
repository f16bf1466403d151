"""presentation-block: a slide deck (.pptx): a title slide, a slide per part of the outline the plan gave it
(as many as the request asked for, when it said how many, else at most 15), charts and tables of the inputs'
data, and sources in the speaker notes. Text is split so it stays inside its box.

Over uploaded or gathered tables the deck shows their analysis (blocks/analysis.py): the findings with their
numbers, a chart per breakdown (bars, one measure, each category once) and per series (a line over the
periods), the top and bottom; the data itself is an appendix slide and a workbook attached beside the deck
with every row. An uploaded logo is the deck's logo, not a slide of its own."""

from __future__ import annotations

import re

from canvas_core.agents.outline import generic_parts
from canvas_core.analysis.findings import Analysis, number
from canvas_core.blocks.analysis import (
    analysed_inputs,
    answer_chart,
    answer_table,
    answered,
    as_table,
    chart_table,
    findings_section,
    run_analyses,
    shown_part,
    unanswered_parts,
)
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import (
    CITE,
    compose,
    draft,
    input_figures,
    input_tables,
    outline,
    outline_instructions,
    references,
    request,
    sources,
    store,
)
from canvas_core.models.items import Artifact
from canvas_core.render import pptx
from canvas_core.render.structure import (
    BulletList,
    Figure,
    Section,
    drop_repeated_statements,
    to_markdown,
)
from canvas_core.tables import Table

LOGO_NAME = re.compile(r"(logo|brand|emblem|wordmark|icon)", re.IGNORECASE)
APPENDIX_ROWS = 8

INSTRUCTIONS = (
    "Write this as a slide deck in Markdown: '# ' with the deck's title, then one '## ' heading per slide (eight "
    "to fifteen slides), each followed by three to six '- ' bullets of at most twenty words. Put figures in pipe "
    f"tables (| a | b |) under their own '## ' heading. {CITE}"
)


def run(ctx: BlockContext) -> BlockOutput:
    plan = outline(ctx)
    analyses = run_analyses(ctx, request(ctx))
    items = unanswered_parts(list(plan.items), analyses)
    analysed = analysed_inputs(ctx, analyses)
    tables = input_tables(ctx, analysed)
    visuals = analysis_slides(analyses)
    data_slides = sum(min(2, pptx.visual_slides(t)) for t in tables) + sum(
        pptx.visual_slides(b) for s in visuals for b in s.blocks if isinstance(b, Table)
    )
    parts = slide_parts(items, plan.count, data_slides + (1 if analyses else 0))
    instructions = INSTRUCTIONS
    if plan.count:
        instructions += f" The deck has exactly {plan.count} slides: the title slide and {plan.count - 1} more."
    instructions = f"{instructions}\n\n{outline_instructions(parts, 'slide')}".strip()
    deck = compose(ctx, draft(ctx, instructions, analyses=analyses), parts=parts, exclude=analysed)
    artifacts: list[Artifact] = []
    if analyses:
        workbook = _attach_workbook(ctx, deck.title, analyses)
        artifacts.append(workbook)
        deck.sections = [findings_section(analyses), *deck.sections, *visuals]
        deck.appendix = appendix(analyses, workbook.name)
    drop_repeated_statements(deck)
    deck.logo, deck.figures = split_logo(input_figures(ctx), ctx.run.prompt)
    limit = plan.count - 1 if plan.count else None
    data = pptx.render_deck(deck, max_slides=limit)
    artifact = store(ctx, deck.title, "pptx", data, pptx.CONTENT_TYPE, pptx.check_pptx, label="slide deck")
    slides = pptx.plan_slides(deck, max_slides=limit)
    outline_lines = "\n".join(f"{n}. {s.title}" for n, s in enumerate(slides, start=2))
    content = f"# {deck.title}\n\nSlides:\n1. {deck.title}\n{outline_lines}\n\n{to_markdown(deck)}"
    return BlockOutput(content=content, sources=sources(ctx), artifacts=[artifact, *artifacts])


def analysis_slides(analyses: list[Analysis]) -> list[Section]:
    """The analysis as slides: a chart per breakdown and per series (the first measure alone), then the top
    and bottom, and the largest combinations, as tables of their first rows."""
    sections = []
    for answer in answered(analyses):
        # A slide per question: its answer, and the chart of the query that computed it (else its table).
        chart = answer_chart(answer)
        shown = chart if chart is not None else answer_table(answer)
        if chart is None:
            shown.chart = "none"
            rows = pptx.TABLE_ROWS_PER_SLIDE
            if len(shown.rows) > rows:
                total = len(shown.rows)
                caption = f"{shown.caption}: first {rows} of {total} rows (all {total} in the attached workbook)"
                shown = Table(headers=shown.headers, rows=shown.rows[:rows], caption=caption, chart="none")
        sections.append(Section(title=shown.caption, blocks=[BulletList(items=[answer.sentence]), shown]))
    for analysis in analyses:
        for result in analysis.results:
            if result.kind in ("breakdown", "series") and len(result.rows) >= 2:
                chart = chart_table(result, analysis)
                chart.chart = "line" if result.kind == "series" else "bar"
                sections.append(Section(title=result.caption, blocks=[chart]))
            elif result.kind in ("ranking", "cross"):
                table = as_table(result, analysis)
                table = shown_part(table, result, pptx.TABLE_ROWS_PER_SLIDE, "the attached workbook")
                table.chart = "none"
                sections.append(Section(title=result.caption, blocks=[table]))
    return sections


def appendix(analyses: list[Analysis], workbook: str) -> list[Section]:
    """The data behind the deck: what each table holds and where all of it is, and its first rows."""
    sections = []
    for analysis in analyses:
        dataset = analysis.dataset
        names = [c.name for c in dataset.columns]
        shown = min(APPENDIX_ROWS, dataset.rows)
        about = BulletList(
            items=[
                f"{dataset.name}: {number(dataset.rows)} rows, {len(names)} columns ({', '.join(names)}).",
                f"Every row, and each table of the analysis, is in the workbook {workbook}.",
                f"The analysis was chosen by {analysis.plan.chosen_by} and computed from every row.",
            ]
        )
        rows = [[_cell(v) for v in row] for row in dataset.iter_rows(limit=shown)]
        caption = f"{dataset.name}: first {shown} of {number(dataset.rows)} rows"
        table = Table(headers=names, rows=rows, caption=caption, chart="none")
        sections += [
            Section(title=f"Appendix: the data of {dataset.name}", blocks=[about]),
            Section(title=f"Appendix: {table.caption}", blocks=[table]),
        ]
    return sections


def _cell(value: object) -> str:
    return "" if value is None else number(value) if isinstance(value, int | float) else str(value)


def _attach_workbook(ctx: BlockContext, title: str, analyses: list[Analysis]) -> Artifact:
    """The workbook of the analysis (every row of the data), stored beside the deck."""
    from canvas_core.blocks.excel import analysed_workbook
    from canvas_core.render import xlsx

    spec = analysed_workbook(title, analyses)
    spec.references = references(ctx)
    data = xlsx.render_workbook(spec)
    return store(ctx, title, "xlsx", data, xlsx.CONTENT_TYPE, xlsx.check_xlsx, label="workbook", qualifier="data")


def split_logo(figures: list[Figure], prompt: str) -> tuple[Figure | None, list[Figure]]:
    """The requester's logo (an uploaded image named as one, or the only uploaded image when the request speaks
    of a logo) apart from the figures the deck shows as slides."""
    uploaded = [f for f in figures if f.uploaded]
    logo = next((f for f in uploaded if LOGO_NAME.search(f.caption)), None)
    if logo is None and len(uploaded) == 1 and re.search(r"\b(logo|brand(ing)?)\b", prompt, re.IGNORECASE):
        logo = uploaded[0]
    return logo, [f for f in figures if f is not logo]


def slide_parts(items: list[str], count: int | None, data_slides: int) -> list[str]:
    """The slides to write: one per item; with a number of slides asked for, as many as fit beside the title
    slide and the data's slides (items past the last slot share it, and generic parts fill what is left)."""
    if not count:
        return items
    slots = max(1, count - 1 - data_slides)
    if not items:
        return generic_parts(slots)
    if len(items) > slots:
        return [*items[: slots - 1], "; ".join(items[slots - 1 :])]
    extra = slots - len(items)
    lead = ["Overview"] if extra >= 1 else []
    tail = ["Next steps"] if extra >= 2 else []
    middle = [p for p in generic_parts(extra + 2)[1:-1]][: extra - len(lead) - len(tail)]
    return [*lead, *items, *middle, *tail]
