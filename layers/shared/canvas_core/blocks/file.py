"""file-block: an uploaded document made readable and searchable for downstream blocks.

Its text is extracted with the library made for its format (canvas_core/gather/extract.py; ZIP members each
by their own type, after the archive's limits are checked), becomes the node's content, and is cut into
chunks stored with the run as a BM25 index that downstream blocks search (canvas_core/gather/index.py).
A corrupt, encrypted or unsafe file fails the block with the reason; the run goes on without it.
"""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.errors import BlockFatalError
from canvas_core.gather.extract import Extraction, ExtractionError, extract
from canvas_core.gather.index import Bm25Index, chunk_sections, index_key, save_index
from canvas_core.models.items import Source, Upload

MAX_CHARS = 100_000
MAX_SOURCES = 100


def run(ctx: BlockContext) -> BlockOutput:
    upload = find_upload(ctx, "file")
    data = ctx.files.get(upload.s3_key)
    try:
        extraction = extract(upload.name, upload.extension, data)
    except ExtractionError as exc:
        raise BlockFatalError(str(exc)) from exc
    save_index(
        ctx.files,
        index_key(ctx.run.account_id, ctx.run.run_id, ctx.node.block_id),
        Bm25Index(chunk_sections(extraction.sections)),
    )
    text = extraction.text()
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"\n\n[truncated: {len(text) - MAX_CHARS} more characters; all of it is indexed]"
    return BlockOutput(content=text, sources=sources_of(extraction))


def find_upload(ctx: BlockContext, kind: str) -> Upload:
    upload = next((u for u in ctx.run.uploads if u.file_id == ctx.node.upload_id), None)
    if upload is None:
        raise BlockFatalError(f"The {kind} for block '{ctx.node.name}' is missing from the run")
    return upload


def sources_of(extraction: Extraction) -> list[Source]:
    """One source per file (per page for a PDF, per member for an archive)."""
    found: dict[tuple[str, int | None], Source] = {}
    for section in extraction.sections:
        key = (section.file_name, section.page)
        if key not in found and len(found) < MAX_SOURCES:
            found[key] = Source(title=section.file_name, file_name=section.file_name, page=section.page)
    return list(found.values())
