"""The heuristic behind `estimated_duration_ms`: a base per run, plus time per planned block kind and file."""

from __future__ import annotations

from canvas_core.models.catalog import TEMPLATE_BLOCKS, BlockType, Template

BASE_MS = 60_000
PER_FILE_MS = 20_000
# Rough per-block times; deep research and deliverables dominate a run.
BLOCK_MS = {
    BlockType.DEEP_RESEARCH: 600_000,
    BlockType.WEB_RESEARCH: 180_000,
    BlockType.DOCUMENT: 120_000,
    BlockType.PRESENTATION: 120_000,
    BlockType.EXCEL: 90_000,
    BlockType.APP: 120_000,
    BlockType.PROTOTYPE: 120_000,
    BlockType.LANDING_PAGE: 120_000,
    BlockType.MEMO: 60_000,
}
DEFAULT_BLOCK_MS = 30_000


def estimate_duration_ms(template: str, blocks: list[str] | None, file_count: int) -> int:
    allowed = [BlockType(b) for b in blocks] if blocks else sorted(TEMPLATE_BLOCKS[Template(template)])
    # A run uses a handful of its allowed kinds; count the three slowest once each.
    slowest = sorted((BLOCK_MS.get(b, DEFAULT_BLOCK_MS) for b in allowed), reverse=True)[:3]
    return BASE_MS + sum(slowest) + PER_FILE_MS * file_count
