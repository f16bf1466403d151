"""file-block: an uploaded document made readable for downstream blocks. Text formats are read here;
formats that need a parser of their own (PDF, DOCX, XLSX, ZIP) fail the block with a clear reason."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.errors import BlockFatalError
from canvas_core.models.items import Source

TEXT_EXTENSIONS = {"txt", "md", "csv", "json", "yaml", "yml"}
MAX_CHARS = 100_000


def run(ctx: BlockContext) -> BlockOutput:
    upload = next((u for u in ctx.run.uploads if u.file_id == ctx.node.upload_id), None)
    if upload is None:
        raise BlockFatalError(f"The file for block '{ctx.node.name}' is missing from the run")
    if upload.extension not in TEXT_EXTENSIONS:
        raise BlockFatalError(f"Reading .{upload.extension} files is not supported yet: {upload.name}")
    text = ctx.files.get(upload.s3_key).decode("utf-8-sig", errors="replace")
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"\n\n[truncated: {len(text) - MAX_CHARS} more characters]"
    return BlockOutput(content=text, sources=[Source(file_name=upload.name, title=upload.name)])
