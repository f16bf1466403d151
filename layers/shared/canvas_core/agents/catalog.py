"""What the planner knows about block types, read from the block catalogue (models/catalog.py): what each does (the
planner prompt's catalogue), each deliverable's title and duty; and the deliverable each template ends in."""

from __future__ import annotations

from canvas_core.models.catalog import BLOCK_CATALOG, BlockType, Template

B = BlockType

BLOCK_GUIDE: dict[BlockType, str] = {kind: spec.guide for kind, spec in BLOCK_CATALOG.items()}

# The block a deliverable template's canvas ends in (the template table's "typical output").
TEMPLATE_DELIVERABLE: dict[Template, BlockType] = {
    Template.DEEP_RESEARCH: B.MEMO,
    Template.REPORT: B.DOCUMENT,
    Template.SLIDES: B.PRESENTATION,
    Template.MEMO: B.MEMO,
    Template.EXCEL: B.EXCEL,
    Template.APP: B.APP,
    Template.LANDING_PAGE: B.LANDING_PAGE,
}

# The deliverables: the block types whose catalogue entry gives a title and a duty.
DELIVERABLE_TITLES: dict[BlockType, str] = {kind: spec.title for kind, spec in BLOCK_CATALOG.items() if spec.title}
DELIVERABLE_DUTIES: dict[BlockType, str] = {kind: spec.duty for kind, spec in BLOCK_CATALOG.items() if spec.duty}
