"""table-block: structured data as a typed table, served as the node's content.

Tables come from the inputs as they are when there are any: an input file-block's CSV or XLSX upload (read
again from the file, so cell types are kept), or markdown tables in an input's content (a DOCX's tables, a
model's answer). Otherwise the model is asked for one table over the inputs; an answer without a table but
with a list becomes a table of its items. Each column is typed (integer, number, boolean, date, text) and
the content names the types above the table (`Columns: name (text), revenue (number)`).
"""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.research import task_of
from canvas_core.errors import BlockFatalError
from canvas_core.gather.extract import ExtractionError, extract
from canvas_core.models.items import NodeItem
from canvas_core.tables import (
    Table,
    parse_list,
    parse_markdown_tables,
    render_table,
    table_from_csv,
    table_from_rows,
    tables_from_xlsx,
)

MAX_TABLES = 10


def run(ctx: BlockContext) -> BlockOutput:
    tables = [t for node in ctx.inputs for t in _tables_of(ctx, node)][:MAX_TABLES]
    if not tables:
        tables = _tables_from_model(ctx)
    content = "\n\n".join(render_table(t) for t in tables)
    return BlockOutput(content=content, sources=ctx.input_sources())


def _tables_of(ctx: BlockContext, node: NodeItem) -> list[Table]:
    upload = next((u for u in ctx.run.uploads if node.upload_id and u.file_id == node.upload_id), None)
    if upload is not None and upload.extension in ("csv", "xlsx"):
        data = ctx.files.get(upload.s3_key)
        try:
            if upload.extension == "csv":
                extract(upload.name, "csv", data)  # the same checks as the file-block's
                table = table_from_csv(data.decode("utf-8-sig"), caption=upload.name)
                return [table] if table.headers else []
            extract(upload.name, "xlsx", data)
            tables = tables_from_xlsx(data)
        except ExtractionError as exc:
            raise BlockFatalError(str(exc)) from exc
        for table in tables:
            table.caption = f"{upload.name}, sheet {table.caption}"
        return tables
    found = parse_markdown_tables(node.content or "")
    for table in found:
        table.caption = table.caption or node.name
    return found


def _tables_from_model(ctx: BlockContext) -> list[Table]:
    task = task_of(ctx)
    material = ctx.material()
    ask = f"{task}\n\nAnswer with one markdown table (a header row, then one row per item) and nothing else." + (
        f"\n\nMaterial:\n{material}" if material else ""
    )
    answer = ctx.complete(ask, role="analyst").text
    tables = parse_markdown_tables(answer)
    if tables:
        return tables[:MAX_TABLES]
    items = parse_list(answer)
    if items:
        ctx.note("The model's answer held no table; the items it listed were made its rows")
        return [table_from_rows([["#", "Item"], *[[str(i), item.text] for i, item in enumerate(items, 1)]])]
    raise BlockFatalError("No table could be built: the inputs hold no table and the model's answer had none")
