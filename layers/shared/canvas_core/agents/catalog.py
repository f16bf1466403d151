"""What the planner knows about block types: what each does (the planner prompt's catalogue), the deliverable
each template ends in, and each deliverable's title and duty."""

from __future__ import annotations

from canvas_core.models.catalog import BlockType, Template

B = BlockType

BLOCK_GUIDE: dict[BlockType, str] = {
    B.FILE: "reads one uploaded document (created for each upload; do not plan it yourself)",
    B.IMAGE: "describes an uploaded image, or generates an image (e.g. a hero image) from its instructions",
    B.WEB: "fetches one web page (put its URL in `url`) and extracts its main text",
    B.WEB_RESEARCH: "searches the web on its instructions and reads the best pages, with sources",
    B.DEEP_RESEARCH: "multi-round research on a broad question: many searches and pages, with sources",
    B.YT: "reads the transcript of one YouTube video (put its URL in `url`)",
    B.PROMPT: "one model call: works through a subtask over its inputs (analysis, comparison, reasoning)",
    B.TABLE: "builds a table of facts, figures or comparisons from its inputs",
    B.LIST: "builds a list of items (ideas, steps, options) from its inputs",
    B.TEXT: "the Writer: synthesizes its inputs into the written answer, citing sources by number",
    B.DOCUMENT: "renders its inputs as a report document (.docx)",
    B.PRESENTATION: "renders its inputs as a slide deck (.pptx)",
    B.MEMO: "renders its inputs as a memo (.docx)",
    B.EXCEL: "renders its inputs (tables especially) as a spreadsheet (.xlsx)",
    B.APP: "builds a single-file web app (.html) from its inputs",
    B.PROTOTYPE: "builds a clickable prototype (.html) from its inputs",
    B.LANDING_PAGE: "builds a landing page (.html) from its inputs (copy, images)",
}

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

DELIVERABLE_TITLES: dict[BlockType, str] = {
    B.DOCUMENT: "Report",
    B.PRESENTATION: "Slide deck",
    B.MEMO: "Memo",
    B.EXCEL: "Spreadsheet",
    B.APP: "App",
    B.PROTOTYPE: "Prototype",
    B.LANDING_PAGE: "Landing page",
}

DELIVERABLE_DUTIES: dict[BlockType, str] = {
    B.DOCUMENT: "Turn the answer into a well-structured report document (.docx)",
    B.PRESENTATION: "Turn the answer into a clear slide deck (.pptx)",
    B.MEMO: "Turn the answer into a concise memo (.docx)",
    B.EXCEL: "Turn the tables and figures into a spreadsheet (.xlsx)",
    B.APP: "Build a working single-file web app (.html)",
    B.PROTOTYPE: "Build a clickable prototype (.html)",
    B.LANDING_PAGE: "Build the landing page (.html)",
}
