"""document-block: a report as a Word document (.docx): title, headed sections, paragraphs, bullet lists, the
inputs' tables, and a references section for the sources cited as [n]."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import CITE, compose, draft, sources, store
from canvas_core.render import docx
from canvas_core.render.structure import to_markdown

INSTRUCTIONS = (
    "Write this as a report in Markdown. Start with '# ' and a specific title. Then '## ' sections: an executive "
    "summary first, the findings, and a conclusion with recommendations last; '### ' for subsections. Use short "
    "paragraphs, '- ' bullet lists for enumerations, and pipe tables (| a | b |) for figures. "
    f"{CITE} Use only what the material supports, and say what is uncertain."
)


def run(ctx: BlockContext) -> BlockOutput:
    report = compose(ctx, draft(ctx, INSTRUCTIONS))
    data = docx.render_report(report)
    artifact = store(ctx, report.title, "docx", data, docx.CONTENT_TYPE, docx.check_docx, label="report")
    return BlockOutput(content=to_markdown(report), sources=sources(ctx), artifacts=[artifact])
