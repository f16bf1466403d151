"""document-block: a report as a Word document (.docx): title, a section per part of the outline the plan gave
it (an executive summary first), paragraphs, bullet lists, the inputs' tables with captions, the uploaded
images as figures, and a references section for the sources cited as [n]. Over uploaded or gathered tables, the
findings the engine computed (blocks/analysis.py) follow the summary, then the analysis's tables."""

from __future__ import annotations

from canvas_core.blocks.analysis import (
    analysed_inputs,
    findings_section,
    result_sections,
    run_analyses,
    unanswered_parts,
)
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import (
    CITE,
    compose,
    draft,
    input_figures,
    outline,
    outline_instructions,
    request,
    sources,
    store,
)
from canvas_core.render import docx
from canvas_core.render.structure import drop_repeated_statements, to_markdown

INSTRUCTIONS = (
    "Write this as a report in Markdown. Start with '# ' and a specific title. Then '## ' sections: an executive "
    "summary first, the findings, and a conclusion with recommendations last; '### ' for subsections. Use short "
    "paragraphs, '- ' bullet lists for enumerations, and pipe tables (| a | b |) for figures. "
    f"{CITE} Use only what the material supports, and say what is uncertain."
)


def run(ctx: BlockContext) -> BlockOutput:
    plan = outline(ctx)
    analyses = run_analyses(ctx, request(ctx))
    items = unanswered_parts(list(plan.items), analyses)
    parts = ["Summary", *items] if plan.items else []
    instructions = INSTRUCTIONS
    if len(plan.subjects) == 2:
        instructions += f" Compare {plan.subjects[0]} and {plan.subjects[1]} in each section."
    instructions = f"{instructions}\n\n{outline_instructions(parts, 'section')}".strip()
    analysed = analysed_inputs(ctx, analyses)
    report = compose(ctx, draft(ctx, instructions, analyses=analyses), parts=parts, exclude=analysed)
    if analyses:
        at = 1 if report.sections and report.sections[0].level == 1 else 0
        results, appendix = result_sections(analyses)
        report.sections[at:at] = [findings_section(analyses, "Findings"), *results]
        report.sections += appendix
    drop_repeated_statements(report)
    report.figures = input_figures(ctx)
    data = docx.render_report(report)
    artifact = store(ctx, report.title, "docx", data, docx.CONTENT_TYPE, docx.check_docx, label="report")
    return BlockOutput(content=to_markdown(report), sources=sources(ctx), artifacts=[artifact])
