"""excel-block: a workbook (.xlsx). Over uploaded or gathered tables, the analysis the request asks for
(blocks/analysis.py): a Summary sheet of findings, a sheet per result (totals, breakdowns with shares, the
series per period with growth, top and bottom), then every row of each table on a sheet of its own, and a
Sources sheet. Otherwise a sheet per table of the inputs or the draft, with typed cells, a styled
header row, sized columns and SUM totals where the columns add up, and a Sources sheet. Without tabular data,
the outline the plan gave it becomes the sheet: a row per item (a budget's categories with their amount cells
left for the requester to fill and a live total), else the draft's points."""

from __future__ import annotations

import re

from canvas_core.agents.outline import Outline, shorten
from canvas_core.analysis.findings import Analysis, number
from canvas_core.blocks.analysis import (
    answer_chart,
    answer_table,
    answered,
    as_table,
    computed_lines,
    data_sheets,
    run_analyses,
)
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import (
    CITE,
    compose,
    draft,
    outline,
    outline_instructions,
    references,
    request,
    sources,
    store,
    title,
)
from canvas_core.prompt_format import NOT_COVERED, NOTHING_YET
from canvas_core.render import xlsx
from canvas_core.render.structure import (
    Block,
    BulletList,
    Deliverable,
    Paragraph,
    block_markdown,
    plain,
    summable_columns,
)
from canvas_core.tables import Table

INSTRUCTIONS = (
    "Put the data asked for in Markdown pipe tables (| a | b |), each under a '## ' heading naming it: one row "
    "per item, one column per attribute, a header row, numbers without units in the cells (units in the header), "
    f"dates as YYYY-MM-DD. Besides the tables, one sentence per table saying where its numbers come from. {CITE}"
)
ROWS = (
    "Give each item of the outline below its own row (or group of rows), in this order; leave a cell empty where "
    "the material gives no value, and add no total row (totals are added as formulas)."
)
PREVIEW_ROWS = 20
MONEY = re.compile(
    r"\b(budget|cost|costs|price|prices|spend|spending|expenses?|fees?|quotes?|salary|salaries|revenue|income|"
    r"invoice|amounts?)\b|[$€£¥]",
    re.IGNORECASE,
)


def run(ctx: BlockContext) -> BlockOutput:
    analyses = run_analyses(ctx, request(ctx))
    if analyses:
        return _analysed(ctx, analyses)
    plan = outline(ctx)
    instructions = INSTRUCTIONS + (f"\n\n{ROWS}\n\n{outline_instructions(plan.items, 'part')}" if plan.items else "")
    book = compose(ctx, draft(ctx, instructions))
    tables = book.captioned_tables() or [_outline_table(ctx, book, plan) if plan.items else _points_table(book)]
    spec = xlsx.WorkbookSpec(title=book.title, tables=tables, references=book.references)
    data = xlsx.render_workbook(spec)
    artifact = store(ctx, book.title, "xlsx", data, xlsx.CONTENT_TYPE, xlsx.check_xlsx, label="workbook")
    return BlockOutput(content=_summary(book.title, tables), sources=sources(ctx), artifacts=[artifact])


def _analysed(ctx: BlockContext, analyses: list[Analysis]) -> BlockOutput:
    """The analysis's workbook: findings first, a sheet per result, every row of each table, the sources."""
    name = title(ctx)
    spec = analysed_workbook(name, analyses)
    spec.references = references(ctx)
    data = xlsx.render_workbook(spec)
    artifact = store(ctx, name, "xlsx", data, xlsx.CONTENT_TYPE, xlsx.check_xlsx, label="workbook")
    sheets = ["Summary", *(t.caption for t in spec.tables), *(d.caption for d in spec.data), "Sources"]
    lines = [f"# {name}", "", *(f"- {line}" for line in spec.summary), "", f"Workbook with {len(sheets)} sheets:"]
    lines += [f"- {plain(s)}" for s in sheets]
    for table in spec.tables:
        preview = Table(table.headers, table.rows[:PREVIEW_ROWS], table.caption)
        lines += ["", f"## {plain(table.caption)}", "", block_markdown(preview)]
    return BlockOutput(content="\n".join(lines), sources=sources(ctx), artifacts=[artifact])


def analysed_workbook(name: str, analyses: list[Analysis]) -> xlsx.WorkbookSpec:
    """The workbook of analysed tables (without its sources): the findings and what was cut on the Summary
    sheet, the results, and the data whole."""
    sheets, notes = data_sheets(analyses)
    summary = [f for a in analyses for f in a.findings] + notes
    summary += [
        f"Computed from all {number(a.dataset.rows)} rows of {a.source}; the analysis was chosen by {a.plan.chosen_by}."
        for a in analyses
    ]
    tables = []
    for n, answer in enumerate(answered(analyses), start=1):
        # A sheet per question, captioned with it, charted where it has groups or periods.
        table = answer_table(answer, exact=True)
        table.caption = f"{n}. {table.caption}"
        chart = answer_chart(answer)
        table.chart = (chart.chart if chart is not None else "none") if len(table.headers) <= 4 else "none"
        tables.append(table)
    computed = computed_lines(analyses)
    if computed:
        tables.append(
            Table(
                headers=["Question", "Computed as", "Rows used", "SQL"],
                rows=computed,
                caption="How this was computed",
                chart="none",
                sum_columns=[],
            )
        )
    for analysis in analyses:
        for result in analysis.results:
            table = as_table(result, analysis, exact=True)
            if result.kind in ("breakdown", "series") and result.labels == 1:
                table.chart = "bar" if result.kind == "breakdown" else "line"
            tables.append(table)
    return xlsx.WorkbookSpec(title=name, tables=tables, summary=summary, data=sheets)


def _outline_table(ctx: BlockContext, book: Deliverable, plan: Outline) -> Table:
    """A row per outline item, with what the material says of it as a note. A budget (or anything priced) gets
    an Amount column for the requester to fill and a total that adds it up as they do; a comparison gets a
    column per thing compared."""
    money = bool(MONEY.search(ctx.run.prompt))
    notes = {plain(s.title).lower(): _note(s.blocks) for s in book.sections if s.title}
    if len(plan.subjects) == 2:
        headers = ["Criterion", *plan.subjects, "Notes"]
        rows = [[item, "", "", notes.get(item.lower(), "")] for item in plan.items]
        sums = None
    elif money:
        headers = ["Category", "Amount", "Notes"]
        rows = [[item, "", notes.get(item.lower(), "")] for item in plan.items]
        sums = [1]
    else:
        headers = ["Item", "Value", "Notes"]
        rows = [[item, "", notes.get(item.lower(), "")] for item in plan.items]
        sums = None
    caption = shorten(book.title, 31) if len(book.title) > 31 else book.title
    return Table(headers=headers, rows=rows, caption=caption, sum_columns=sums)


def _note(blocks: list[Block]) -> str:
    """The first point the draft wrote for an item, unless it only says there is none."""
    for block in blocks:
        items = block.items if isinstance(block, BulletList) else [block.text] if isinstance(block, Paragraph) else []
        for item in items:
            if plain(item) not in (NOT_COVERED, NOTHING_YET):
                return plain(item)
    return ""


def _points_table(book: Deliverable) -> Table:
    """Without tabular data, the draft's points, one per row, so the workbook still holds the findings."""
    rows: list[list[object]] = []
    for section in book.sections:
        for block in section.blocks:
            items = (
                block.items if isinstance(block, BulletList) else [block.text] if isinstance(block, Paragraph) else []
            )
            rows += [[str(len(rows) + n + 1), section.title or "Summary", plain(i)] for n, i in enumerate(items)]
    return Table(headers=["#", "Section", "Point"], rows=rows, caption="Key points")


def _summary(title: str, tables: list[Table]) -> str:
    lines = [f"# {title}", "", f"Workbook with {len(tables) + 1} sheets:"]
    for table in tables:
        totals = [plain(table.headers[c]) for c in summable_columns(table)]
        detail = f"; totals of {', '.join(totals)}" if totals else ""
        lines.append(f"- {plain(table.caption)}: {len(table.rows)} rows, {len(table.headers)} columns{detail}")
    lines.append("- Sources")
    for table in tables:
        preview = Table(table.headers, table.rows[:PREVIEW_ROWS], table.caption)
        more = (
            f"\n\n({len(table.rows) - PREVIEW_ROWS} more rows in the workbook)"
            if len(table.rows) > PREVIEW_ROWS
            else ""
        )
        lines += ["", f"## {plain(table.caption)}", "", block_markdown(preview) + more]
    return "\n".join(lines)
