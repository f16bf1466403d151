"""prompt-block: a persona's subtask (the block's instructions) worked through over the block's inputs in one
model call, citing the inputs' sources by number (`agents/writer.py` says how). The run's tables reach it as
what the engine computed from every row (blocks/analysis.py), not as rows."""

from __future__ import annotations

from canvas_core.agents.material import compose, number_sources
from canvas_core.agents.personas import role_of, system_prompt
from canvas_core.agents.writer import ANALYST_DUTY
from canvas_core.blocks.analysis import run_analyses, with_analyses
from canvas_core.blocks.context import BlockContext, BlockOutput


def run(ctx: BlockContext) -> BlockOutput:
    task = ctx.node.instructions or ctx.run.prompt
    sources, sections = number_sources(ctx.inputs)
    analyses = run_analyses(ctx, task)
    if analyses:
        sections = with_analyses(sources, sections, analyses)
    completion = ctx.complete(
        compose(task, sections, sources),
        role=role_of(ctx.node.persona, "researcher"),
        system=system_prompt(ctx.node.persona, ctx.run.agent_instructions, ANALYST_DUTY),
    )
    return BlockOutput(content=completion.text.strip(), sources=sources)
