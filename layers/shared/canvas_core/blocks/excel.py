"""excel-block: a workbook (.xlsx): a sheet per table of the inputs or the draft, with typed cells, a styled
header row, sized columns and SUM totals where the columns add up, and a Sources sheet."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import CITE, compose, draft, sources, store
from canvas_core.render import xlsx
from canvas_core.render.structure import BulletList, Paragraph, Table, block_markdown, plain, summable_columns

INSTRUCTIONS = (
    "Put the data asked for in Markdown pipe tables (| a | b |), each under a '## ' heading naming it: one row "
    "per item, one column per attribute, a header row, numbers without units in the cells (units in the header), "
    f"dates as YYYY-MM-DD. Besides the tables, one sentence per table saying where its numbers come from. {CITE}"
)
PREVIEW_ROWS = 20


def run(ctx: BlockContext) -> BlockOutput:
    book = compose(ctx, draft(ctx, INSTRUCTIONS))
    tables = book.captioned_tables() or [_points_table(book)]
    spec = xlsx.WorkbookSpec(title=book.title, tables=tables, references=book.references)
    data = xlsx.render_workbook(spec)
    artifact = store(ctx, book.title, "xlsx", data, xlsx.CONTENT_TYPE, xlsx.check_xlsx, label="workbook")
    return BlockOutput(content=_summary(book.title, tables), sources=sources(ctx), artifacts=[artifact])


def _points_table(book) -> Table:
    """Without tabular data, the draft's points, one per row, so the workbook still holds the findings."""
    rows = []
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
