"""prompt-block: one model call over the block's inputs, answering the block's instructions."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput


def run(ctx: BlockContext) -> BlockOutput:
    task = ctx.node.instructions or ctx.run.prompt
    material = ctx.material()
    prompt = f"{task}\n\nMaterial:\n{material}" if material else task
    completion = ctx.provider.complete(system=ctx.system_prompt(), prompt=prompt, role="researcher")
    sources = [s for n in ctx.inputs for s in n.sources]
    return BlockOutput(content=completion.text, sources=sources, models_used=[completion.model_id])
