"""text-block: the Writer. It synthesizes its inputs into the answer to the prompt (its instructions), citing
their sources by number, and ends with the numbered list of sources (`agents/writer.py` says how). When the run
holds tables, the answer starts with what the engine computed from every row (blocks/analysis.py), and the
material the writer reads carries those findings instead of the rows."""

from __future__ import annotations

from canvas_core.agents.material import compose, number_sources, sources_list, strip_sources_section
from canvas_core.agents.personas import role_of, system_prompt
from canvas_core.agents.writer import WRITER_DUTY
from canvas_core.blocks.analysis import answer_lead, computed_markdown, run_analyses, with_analyses
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.providers.offline import NOTICE, OfflineProvider

EMPTY_ANSWER = "The model's answer was empty; the answer is an extract of the inputs, made without a model"


def run(ctx: BlockContext) -> BlockOutput:
    """One model call (extractive with the offline provider) over the inputs, their sources numbered; an empty
    answer is replaced by that extract, and the run's errors say so."""
    question = ctx.run.prompt.strip()
    task = ctx.node.instructions or f"Write the answer to: {question}"
    sources, sections = number_sources(ctx.inputs)
    analyses = run_analyses(ctx, question)
    if analyses:
        sections = with_analyses(sources, sections, analyses)
    brief = f"Question: {question}\n\nYour task: {task}" if task.strip() != question else f"Question: {question}"
    prompt = compose(brief, sections, sources)
    role = role_of(ctx.node.persona, "writer")
    system = system_prompt(ctx.node.persona or "Writer", ctx.run.agent_instructions, WRITER_DUTY)
    body = strip_sources_section(ctx.complete(prompt, role=role, system=system).text.strip())
    if not body:
        # An empty answer is no answer: the extract the offline provider makes of the same material stands in,
        # without its notice that the deployment has no model (this one has; the run's errors say what happened).
        ctx.note(EMPTY_ANSWER)
        extract = OfflineProvider().complete(system=system, prompt=prompt, role=role).text
        body = strip_sources_section(extract.replace(NOTICE, "").strip())
    lead = answer_lead(analyses, sources)
    if lead:
        body = f"{lead}\n\n{body}"
    computed = computed_markdown(analyses)
    if computed:
        body = f"{body}\n\n{computed}"
    content = f"{body}\n\n{sources_list(sources)}".strip() if sources else body
    return BlockOutput(content=content, sources=sources)
