"""memo-block: a memo as a Word document (.docx): MEMORANDUM, the To / From / Date / Subject block, then a few
short sections (a summary, then a section per part of the outline the plan gave it) and the sources. Over
uploaded or gathered tables, the key figures the engine computed (blocks/analysis.py) follow the summary."""

from __future__ import annotations

from canvas_core.blocks.analysis import findings_section, revised_audience, run_analyses
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import (
    CITE,
    compose,
    draft,
    outline,
    outline_instructions,
    request,
    run_date,
    sources,
    store,
)
from canvas_core.render import docx
from canvas_core.render.structure import BulletList, MemoHeader, drop_repeated_statements, extract_fields, to_markdown

INSTRUCTIONS = (
    "Write this as a memo in Markdown. First lines: 'To: <audience>', 'From: <author>', 'Subject: <one line>'. "
    "Then three to five short '## ' sections (Summary, Background, Options or Analysis, Recommendation, Next "
    f"steps), each a few sentences or bullets at most. {CITE} No preamble."
)
DEFAULT_TO = "All stakeholders"
DEFAULT_FROM = "Research team"
MAX_SECTIONS = 6
MAX_ITEMS = 8  # a memo is read in a minute: longer lists are cut


def run(ctx: BlockContext) -> BlockOutput:
    plan = outline(ctx)
    parts = ["Summary", *plan.items][:MAX_SECTIONS] if plan.items else []
    instructions = f"{INSTRUCTIONS}\n\n{outline_instructions(parts, 'section')}".strip()
    analyses = run_analyses(ctx, request(ctx))
    memo = compose(ctx, draft(ctx, instructions, analyses=analyses), with_input_tables=False, parts=parts)
    if analyses:
        at = 1 if memo.sections else 0
        memo.sections.insert(at, findings_section(analyses, "Key figures"))
    fields = extract_fields(memo, ("to", "from", "subject", "re", "date"))
    header = MemoHeader(
        to=revised_audience(ctx) or fields.get("to") or plan.audience or DEFAULT_TO,
        sender=fields.get("from") or plan.sender or DEFAULT_FROM,
        date=run_date(ctx),
        subject=fields.get("subject") or fields.get("re") or memo.title,
    )
    memo.title = header.subject
    drop_repeated_statements(memo)
    memo.sections = memo.sections[:MAX_SECTIONS]
    for section in memo.sections:
        for block in section.blocks:
            if isinstance(block, BulletList):
                block.items = block.items[:MAX_ITEMS]
    data = docx.render_memo(memo, header)
    # "memo-" first: a report made from the same request has the same title, and the two files differ by name
    artifact = store(ctx, f"memo {header.subject}", "docx", data, docx.CONTENT_TYPE, docx.check_docx, label="memo")
    heading = f"To: {header.to}\nFrom: {header.sender}\nDate: {header.date.isoformat()}\nSubject: {header.subject}"
    return BlockOutput(content=f"{heading}\n\n{to_markdown(memo)}", sources=sources(ctx), artifacts=[artifact])
